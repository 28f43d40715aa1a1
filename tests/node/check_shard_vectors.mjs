// Recompute every vector of docs/shard-vectors.json with Node's own crypto, independently of
// the Python code, so the shard contract is checked across runtimes (docs/shard-contract.md).
//
//   node tests/node/check_shard_vectors.mjs [path/to/shard-vectors.json]
//
// Exit 0 and print "<n> vectors ok" when every vector matches; exit 1 listing each mismatch.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const path =
  process.argv[2] ?? fileURLToPath(new URL('../../docs/shard-vectors.json', import.meta.url));

const shard = (personId, n) =>
  createHash('sha256').update(personId, 'utf8').digest().readUInt32BE(0) % n;
const gsi4pk = (personId, n) => `RenewalSaga#${shard(personId, n)}`;

const { vectors } = JSON.parse(readFileSync(path, 'utf8'));
if (!Array.isArray(vectors) || vectors.length === 0) {
  console.error(`${path}: no vectors`);
  process.exit(1);
}

const mismatches = [];
vectors.forEach((v, i) => {
  const where = `vector ${i} (${JSON.stringify(v.personId)}, N=${v.shardCount})`;
  // A JS string is UTF-16: 'utf8' encoding would silently turn a lone surrogate into U+FFFD,
  // hashing different bytes from the ones Python refuses to encode at all.
  if (typeof v.personId !== 'string' || !v.personId.isWellFormed()) {
    mismatches.push(`${where}: personId is not a well-formed string`);
    return;
  }
  const hex = Buffer.from(v.personId, 'utf8').toString('hex');
  if (hex !== v.utf8Hex) mismatches.push(`${where}: utf8Hex ${v.utf8Hex} != computed ${hex}`);
  const s = shard(v.personId, v.shardCount);
  if (s !== v.shard) mismatches.push(`${where}: shard ${v.shard} != computed ${s}`);
  const pk = gsi4pk(v.personId, v.shardCount);
  if (pk !== v.gsi4pk) mismatches.push(`${where}: gsi4pk ${v.gsi4pk} != computed ${pk}`);
});

if (mismatches.length > 0) {
  console.error(`${mismatches.length} mismatch(es) in ${path}:\n${mismatches.join('\n')}`);
  process.exit(1);
}
console.log(`${vectors.length} vectors ok`);
