// The errors a caller can tell apart with `instanceof`. Each message names what failed (a
// personId is refused in the Python library's words); a refused control item also carries the
// kind and the attribute the Python library reports for it.

/** Base class of every error this package throws on purpose. */
export class SagaIndexError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A personId the index cannot key: not a string, empty, a lone surrogate, or too long. */
export class InvalidPersonIdError extends SagaIndexError {}

/** A shard count that is not a power of two from 1 to 1024. */
export class InvalidShardCountError extends SagaIndexError {}

/** A GSI4PK / GSI4SK / openedAt value that does not follow the key contract. */
export class InvalidKeyError extends SagaIndexError {}

/** The control record exists but breaks docs/control-contract.md (treated as unreadable). */
export class ControlRecordInvalidError extends SagaIndexError {}

/**
 * How a control item breaks the contract (docs/control-contract.md, "STATE attributes"): the
 * same words as the Python library's `Refusal`, which docs/contract-vectors.json pairs with
 * every refused item.
 */
export type RefusalKind =
  | 'wrong-item'
  | 'missing'
  | 'unexpected'
  | 'wrong-type'
  | 'invalid-value'
  | 'inconsistent';

/**
 * One control item a strict reader refuses: `kind` says how, `attribute` names where. Both
 * agree with the Python library for the same item; the message is this package's own.
 */
export class ControlItemInvalidError extends ControlRecordInvalidError {
  readonly kind: RefusalKind;
  readonly attribute: string;

  constructor(kind: RefusalKind, attribute: string, message: string) {
    super(message);
    this.kind = kind;
    this.attribute = attribute;
  }
}

/**
 * The control record could not be read (or did not parse) and no state read recently enough
 * (within T + grace) is there to serve. Nothing was read or keyed: a layout is never guessed.
 */
export class RecordUnavailableError extends SagaIndexError {}

/**
 * A read could not read every partition it needed. `failures` names each failed partition
 * with its error; no partial result is returned.
 */
export class IncompleteEnumerationError extends SagaIndexError {
  readonly failures: ReadonlyMap<string, unknown>;

  constructor(failures: ReadonlyMap<string, unknown>) {
    const sorted = new Map([...failures].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    const detail = [...sorted]
      .map(([partition, err]) => `${partition}: ${describeError(err)}`)
      .join('; ');
    super(
      `could not read ${sorted.size} partition(s), no partial result returned: ${detail}`,
      { cause: sorted.values().next().value },
    );
    this.failures = sorted;
  }

  /** The failed partitions (GSI4PK values), sorted. */
  get partitions(): string[] {
    return [...this.failures.keys()];
  }
}

export function describeError(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return String(err);
}
