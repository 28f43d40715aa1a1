// The cursor of a paged enumeration: where the next page of "all sagas" / "all open sagas"
// starts, as an opaque string. One format for every language, the Python library's
// (lambdas/saga_index/store/cursor.py; docs/cursor-vectors.json holds both to it): base64url,
// without padding, of the UTF-8 JSON
//   {"v":1,"of":"all"|"open","plan":FINGERPRINT,"at":GSI4PK,"after":null|{"GSI4PK":..,"GSI4SK":..,"PK":..,"SK":..}}
// keys in that order, no spaces. `at` is the partition the next page starts in (the ones before
// it, in the plan's order, are done), `after` the Query's ExclusiveStartKey in it. `plan` is the
// fingerprint of the enumeration stages the cursor was taken under, so a cursor is only ever
// resumed under the same stages. On the sparse open-saga index the partition key is OpenSagaPK:
// its value fills the position's "GSI4PK" slot (the partition key of the index the plan reads;
// the plan's keys, "RenewalSagaOpen#<n>", tell the two apart), so the format is one for both.
import { createHash } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { SagaIndexError } from './errors.js';

export const CURSOR_VERSION = 1;
/** The most rows one page may ask for. */
export const MAX_PAGE_LIMIT = 1000;
const MAX_CURSOR_CHARS = 32_768;
const POSITION_ATTRIBUTES = ['GSI4PK', 'GSI4SK', 'PK', 'SK'] as const;
const FIELDS = ['after', 'at', 'of', 'plan', 'v'];

export type Enumeration = 'all' | 'open';
type PositionKey = Readonly<Record<(typeof POSITION_ATTRIBUTES)[number], string>>;

/**
 * A cursor that does not parse as one this package (or the Python library) wrote, or one of the
 * other enumeration (an open-saga cursor given to the all-saga page): refused before any request.
 */
export class InvalidCursorError extends SagaIndexError {}

/**
 * A cursor taken under another key plan (another layout, another N): resuming it could skip or
 * repeat sagas, so it is refused. Start the enumeration again without a cursor.
 */
export class CursorLayoutChangedError extends SagaIndexError {}

/**
 * Paging is refused while rows move between layouts (two enumeration stages): a cursor cannot
 * remember which rows an earlier page returned, so a row moved between two pages would come back
 * twice. Use the full enumeration (getAllSagas / getAllOpenSagas, or the page iterators).
 */
export class PagingDuringMoveError extends SagaIndexError {}

export interface Position {
  readonly at: string;
  readonly after: PositionKey | null;
}

export interface Cursor {
  readonly of: Enumeration;
  readonly plan: string;
  readonly position: Position;
}

/** 16 hex digits of SHA-256 over the stages as compact JSON: the Python library's fingerprint. */
export function planFingerprint(stages: readonly (readonly string[])[]): string {
  return createHash('sha256').update(JSON.stringify(stages), 'utf8').digest('hex').slice(0, 16);
}

export function encodeCursor(of: Enumeration, plan: string, position: Position): string {
  const after =
    position.after === null
      ? null
      : { GSI4PK: position.after.GSI4PK, GSI4SK: position.after.GSI4SK, PK: position.after.PK, SK: position.after.SK };
  const text = JSON.stringify({ v: CURSOR_VERSION, of, plan, at: position.at, after });
  return Buffer.from(text, 'utf8').toString('base64url');
}

/** The cursor a string holds, or InvalidCursorError naming what is wrong with it. */
export function decodeCursor(cursor: unknown): Cursor {
  if (typeof cursor !== 'string') throw new InvalidCursorError(`a cursor is a string, got ${typeof cursor}`);
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]*$/.test(cursor)) {
    throw new InvalidCursorError(
      'not a cursor of this library: expected a non-empty base64url string of at most ' +
        `${MAX_CURSOR_CHARS} characters (pass the \`cursor\` of the previous page as given)`,
    );
  }
  if (cursor.length % 4 === 1) throw new InvalidCursorError('not a cursor of this library: truncated base64url');
  let document: unknown;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(cursor, 'base64url'));
    document = JSON.parse(text);
  } catch (err) {
    throw new InvalidCursorError(`not a cursor of this library: ${(err as Error).message}`, { cause: err });
  }
  return parse(document);
}

function parse(document: unknown): Cursor {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new InvalidCursorError('not a cursor of this library: not a JSON object');
  }
  const d = document as Record<string, unknown>;
  if (d.v !== CURSOR_VERSION) {
    throw new InvalidCursorError(
      `cursor version ${JSON.stringify(d.v) ?? 'None'} is not ${CURSOR_VERSION}: a cursor from another version of the library`,
    );
  }
  const fields = Object.keys(d).sort();
  if (fields.join() !== FIELDS.join()) {
    throw new InvalidCursorError(`cursor fields ${JSON.stringify(fields)} are not v, of, plan, at, after`);
  }
  const { of, plan, at, after } = d;
  if (of !== 'all' && of !== 'open') throw new InvalidCursorError(`cursor enumeration ${JSON.stringify(of)} is neither 'all' nor 'open'`);
  if (typeof plan !== 'string' || !/^[0-9a-f]{16}$/.test(plan)) {
    throw new InvalidCursorError(`cursor plan ${JSON.stringify(plan)} is not a fingerprint (16 hex digits)`);
  }
  if (typeof at !== 'string' || at === '') throw new InvalidCursorError(`cursor partition ${JSON.stringify(at)} is not a GSI4PK`);
  if (after === null) return { of, plan, position: { at, after: null } };
  if (
    typeof after !== 'object' ||
    Array.isArray(after) ||
    Object.keys(after).sort().join() !== [...POSITION_ATTRIBUTES].sort().join()
  ) {
    throw new InvalidCursorError(`cursor position must name exactly ${POSITION_ATTRIBUTES.join(', ')}`);
  }
  const key = after as Record<string, unknown>;
  if (!POSITION_ATTRIBUTES.every((name) => typeof key[name] === 'string')) {
    throw new InvalidCursorError('cursor position values must be strings');
  }
  if (key.GSI4PK !== at) {
    throw new InvalidCursorError(`cursor position is under ${JSON.stringify(key.GSI4PK)}, not its partition ${JSON.stringify(at)}`);
  }
  return { of, plan, position: { at, after: key as PositionKey } };
}

/**
 * A Query's LastEvaluatedKey as a cursor position; `partitionKey` is the index's partition key
 * attribute (GSI4PK, or the open index's OpenSagaPK), whose value fills the "GSI4PK" slot.
 */
export function positionOf(
  lastEvaluatedKey: Record<string, AttributeValue>,
  partitionKey = 'GSI4PK',
): PositionKey {
  const value = (name: string): string => {
    const s = lastEvaluatedKey[name]?.S;
    if (typeof s !== 'string') throw new TypeError(`LastEvaluatedKey ${name} is not a string`);
    return s;
  };
  return { GSI4PK: value(partitionKey), GSI4SK: value('GSI4SK'), PK: value('PK'), SK: value('SK') };
}

/** A cursor position as a Query's ExclusiveStartKey on the index keyed by `partitionKey`. */
export function startKey(position: PositionKey, partitionKey = 'GSI4PK'): Record<string, AttributeValue> {
  return Object.fromEntries(
    POSITION_ATTRIBUTES.map((name) => [name === 'GSI4PK' ? partitionKey : name, { S: position[name] }]),
  );
}
