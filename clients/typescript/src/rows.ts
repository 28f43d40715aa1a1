// The shape of a saga row as the index returns it (docs/data-model.md, "Saga rows").

/**
 * A saga row, unmarshalled. The keys are what the index guarantees (GSI4 holds only rows that
 * have both string index keys; PK and SK are the table's string keys); `sagaId`, `personId`,
 * `openedAt`, `state` and `entityType` are what every saga writer stores. The index holds every
 * other attribute of the row as well (`updatedAt`, `leaseId`, ...), typed `unknown` here: give
 * `SagaIndex` a row type of your own (and a `parseRow` that checks it) to name them.
 *
 * `personId` is `unknown` because that is what it may be at run time: a few production rows were
 * written without a usable one (missing, empty or not a string: the drift check counts them as
 * anomalies), and enumerations return those rows as stored, as the Python library does. Narrow it
 * with `validatePersonId(row.personId)` (the string, or an `InvalidPersonIdError`), a `typeof`
 * check, or a `parseRow` whose row type declares `personId: string`. A by-person read returns only
 * rows whose `GSI4SK` names that person, whatever the row's own `personId` attribute holds.
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
  /** A string on every row written through `writeKeys`; see above for the rows that predate it. */
  readonly personId: unknown;
  /** ISO-8601 UTC, never holds `#`. */
  readonly openedAt: string;
  /** One of the saga states; `OPEN_STATES` lists the open ones. */
  readonly state: string;
}
