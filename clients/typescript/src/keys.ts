// Every key string of a saga row (docs/shard-contract.md, "Key formats"):
//   legacy GSI4PK   "RenewalSaga"
//   sharded GSI4PK  "RenewalSaga#" + shard        (decimal, no padding)
//   GSI4SK          personId + "#" + openedAt     (unchanged by sharding)
//   OpenSagaPK      "RenewalSagaOpen#" + shard    (the sparse open-saga index; only open sagas
//                                                  carry it, shard under the open index's own N)
import { InvalidKeyError } from './errors.js';
import { quoted, shown, validatePersonId } from './person.js';
import { MAX_SHARD_COUNT, shardHashOfValid, validateShardCount } from './shard.js';

export const LEGACY_GSI4PK = 'RenewalSaga';
const SHARD_PREFIX = `${LEGACY_GSI4PK}#`;
const SHARD_SUFFIX = /^(0|[1-9][0-9]{0,3})$/;

/** The sparse open-saga index: a GSI beside GSI4 that only open sagas are in. */
export const OPEN_INDEX_NAME = 'renewal-saga-open-index';
/** Its partition key attribute; its sort key is GSI4SK, so it is read in GSI4's order. */
export const OPEN_INDEX_PARTITION_KEY = 'OpenSagaPK';
export const OPEN_INDEX_KEY_PREFIX = 'RenewalSagaOpen#';
/** A personId validated once and hashed once: every layout's key is arithmetic on the hash. */
export interface Person {
  readonly id: string;
  readonly hash: number;
}

export function person(personId: unknown): Person {
  const id = validatePersonId(personId);
  return { id, hash: shardHashOfValid(id) };
}

export function shardedGsi4pk(shard: number): string {
  if (!Number.isInteger(shard) || shard < 0 || shard >= MAX_SHARD_COUNT) {
    throw new InvalidKeyError(
      `shard number must be an integer from 0 to ${MAX_SHARD_COUNT - 1}, got ${shard}`,
    );
  }
  return `${SHARD_PREFIX}${shard}`;
}

/** The open index's partition key of shard `shard`: "RenewalSagaOpen#" + decimal shard number. */
export function openIndexPk(shard: number): string {
  return OPEN_INDEX_KEY_PREFIX + shardedGsi4pk(shard).slice(SHARD_PREFIX.length);
}

/** The OpenSagaPK of a person's open sagas under the open index's N: GSI4's shard under that N. */
export function openIndexKeyFor(p: Person, shardCount: number): string {
  return openIndexPk(p.hash % validateShardCount(shardCount));
}

/** Every partition key of the open index under its N, shard 0 first. */
export function allOpenIndexPks(shardCount: number): string[] {
  return Array.from({ length: validateShardCount(shardCount) }, (_, s) => openIndexPk(s));
}

/** null for the legacy key, the shard number for a sharded key; anything else throws. */
export function parseGsi4pk(value: string): number | null {
  if (value === LEGACY_GSI4PK) return null;
  if (value.startsWith(SHARD_PREFIX)) {
    const suffix = value.slice(SHARD_PREFIX.length);
    if (SHARD_SUFFIX.test(suffix) && Number(suffix) < MAX_SHARD_COUNT) return Number(suffix);
  }
  throw new InvalidKeyError(
    `GSI4PK ${quoted(value)} is neither the legacy key ${quoted(LEGACY_GSI4PK)} ` +
      `nor a sharded key ${quoted(SHARD_PREFIX)} + decimal shard number`,
  );
}

/** personId + "#" + openedAt, checked against the sort-key limit. */
export function gsi4sk(personId: string, openedAt: string): string {
  if (typeof openedAt !== 'string' || openedAt.length === 0 || openedAt.includes('#')) {
    throw new InvalidKeyError(
      `openedAt must be a non-empty ISO-8601 string, got ${typeof openedAt === 'string' ? quoted(openedAt) : shown(openedAt)}`,
    );
  }
  return `${validatePersonId(personId, openedAt)}#${openedAt}`;
}

/** The inverse of gsi4sk: openedAt never holds "#", so the LAST "#" splits the two. */
export function parseGsi4sk(value: string): { personId: string; openedAt: string } {
  const at = value.lastIndexOf('#');
  if (at <= 0 || at === value.length - 1) {
    throw new InvalidKeyError(`GSI4SK ${quoted(value)} is not personId + '#' + openedAt`);
  }
  return { personId: value.slice(0, at), openedAt: value.slice(at + 1) };
}
