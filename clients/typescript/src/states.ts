// The saga states that count as open (docs/data-model.md), as the Python library's OPEN_STATES.

/** The saga states that count as open (docs/data-model.md). */
export const OPEN_STATES: readonly string[] = Object.freeze([
  'OPENED',
  'PREPARING',
  'PREPARE_FAILED',
  'OFFER_SENT',
  'NEGOTIATING',
  'AWAITING_SIGNATURE',
]);
