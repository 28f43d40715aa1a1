// The shape of a saga row as the index returns it (docs/data-model.md, "Saga rows").

/**
 * A saga row, unmarshalled. The keys are what the index guarantees (GSI4 holds only rows that
 * have both string index keys; PK and SK are the table's string keys); `sagaId`, `personId`,
 * `openedAt`, `state` and `entityType` are what every saga writer stores. The index holds every
 * other attribute of the row as well (`updatedAt`, `leaseId`, ...), typed `unknown` here: give
 * `SagaIndex` a row type of your own (and a `parseRow` that checks it) to name them.
 *
 * A few production rows were written without a usable `personId` (missing, empty or not a
 * string: the drift check counts them as anomalies). Enumerations return those rows as stored,
 * as the Python library does, so their `personId` may not be a string at run time: a service
 * that must not trust that passes a `parseRow` that checks it.
 */
export interface SagaRow {
  readonly [attribute: string]: unknown;
  /** `"RSAGA#" + sagaId`. */
  readonly PK: string;
  /** `"META"`. */
  readonly SK: string;
  /** `"RenewalSaga"` (legacy) or `"RenewalSaga#" + shard`. */
  readonly GSI4PK: string;
  /** `personId + "#" + openedAt`. */
  readonly GSI4SK: string;
  readonly entityType: string;
  readonly sagaId: string;
  readonly personId: string;
  /** ISO-8601 UTC, never holds `#`. */
  readonly openedAt: string;
  /** One of the saga states; `OPEN_STATES` lists the open ones. */
  readonly state: string;
}
