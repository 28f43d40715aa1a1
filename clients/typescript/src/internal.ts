// The package's internals, for its own tests and nothing else: package.json's `exports` maps
// only the public entry (src/index.ts), so no consumer can import this module.
export * from './index.js';
export { parseStateItem, parseHistoryItem, type Item } from './record.js';
export {
  enumerationStages,
  missingState,
  presentState,
  readKeys,
  writeLayout,
  NEVER_MIGRATED,
} from './routing.js';
export { ControlStateCache, readControlState } from './control.js';
export {
  LEGACY_GSI4PK,
  allOpenIndexPks,
  gsi4sk,
  openIndexKeyFor,
  openIndexPk,
  parseGsi4pk,
  parseGsi4sk,
  person,
  shardedGsi4pk,
} from './keys.js';
export { keyFor } from './layout.js';
export { validateShardCount } from './shard.js';
export { compareCodePoints, orderRows } from './reads.js';
