// The shard contract (docs/shard-contract.md):
//   shard(personId, N) = uint32_be(SHA-256(UTF-8(personId))[0:4]) mod N
// No Unicode normalisation and no case folding: the stored bytes are the hashed bytes, so this
// agrees with the Python Lambdas and every other writer of the table (docs/shard-vectors.json).
import { createHash } from 'node:crypto';
import { InvalidShardCountError } from './errors.js';
import { quoted, validatePersonId } from './person.js';

export const DEFAULT_SHARD_COUNT = 16;
export const MAX_SHARD_COUNT = 1024;

/** `n` when it is an integer power of two from 1 to 1024; otherwise InvalidShardCountError. */
export function validateShardCount(n: unknown): number {
  if (typeof n !== 'number' || !Number.isInteger(n)) {
    const shown =
      typeof n === 'string' ? quoted(n) : typeof n === 'boolean' ? (n ? 'True' : 'False') : String(n);
    throw new InvalidShardCountError(
      `shard count must be an integer power of two from 1 to ${MAX_SHARD_COUNT}, got ${shown}`,
    );
  }
  if (n < 1 || n > MAX_SHARD_COUNT || (n & (n - 1)) !== 0) {
    throw new InvalidShardCountError(
      `shard count must be a power of two from 1 to ${MAX_SHARD_COUNT}, got ${n}`,
    );
  }
  return n;
}

/**
 * The first 4 bytes of SHA-256(UTF-8(personId)), unsigned big-endian, for a personId already
 * validated (a lone surrogate would otherwise be hashed as U+FFFD by Buffer's UTF-8 encoder).
 */
export function shardHashOfValid(personId: string): number {
  return createHash('sha256').update(personId, 'utf8').digest().readUInt32BE(0);
}

/** The shard of `personId` under N = `shardCount` (validates both). */
export function shardOf(personId: string, shardCount: number = DEFAULT_SHARD_COUNT): number {
  validateShardCount(shardCount);
  return shardHashOfValid(validatePersonId(personId)) % shardCount;
}
