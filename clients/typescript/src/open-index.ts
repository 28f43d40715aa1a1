// The sparse open-saga index's state: the control record's second dimension beside the layout
// (docs/control-contract.md, "The open-saga index"), as the Python library's
// record/open_index.py:
//   off       readers enumerate open sagas over GSI4; writers stamp no OpenSagaPK (and remove it)
//   adding    writers stamp OpenSagaPK on the open sagas they write (from effectiveAt); a backfill
//             stamps the older ones; readers still enumerate over GSI4
//   open      enumerations of open sagas read the open index (the end: no rollback after it)
//   removing  the rollback of `adding`: writers stop stamping at effectiveAt, readers use GSI4
// Whatever the state, a writer that closes a saga removes its OpenSagaPK, so a closed saga never
// stays in the open index. The open index has its own N, present whenever the state is not off.
import { allOpenIndexPks, openIndexKeyFor, type Person } from './keys.js';

export type OpenIndexState = 'off' | 'adding' | 'open' | 'removing';

/** The open index's state and its own shard count (null exactly when `off`). */
export interface OpenIndex {
  readonly state: OpenIndexState;
  readonly shardCount: number | null;
}

export const OPEN_INDEX_OFF: OpenIndex = Object.freeze({ state: 'off', shardCount: null });

/** Writers stamp OpenSagaPK on the open sagas they write (from effectiveAt). */
export function stamps(index: OpenIndex): boolean {
  return index.state === 'adding' || index.state === 'open';
}

/** Enumerations of open sagas read the open index instead of GSI4. */
export function readsOpenIndex(index: OpenIndex): boolean {
  return index.state === 'open';
}

export function sameOpenIndex(a: OpenIndex, b: OpenIndex): boolean {
  return a.state === b.state && a.shardCount === b.shardCount;
}

/** The OpenSagaPK this index's N gives a person's open sagas. */
export function openKeyFor(index: OpenIndex, p: Person): string {
  if (index.shardCount === null) throw new TypeError('the open index is off: it gives no OpenSagaPK');
  return openIndexKeyFor(p, index.shardCount);
}

/** Every OpenSagaPK of the index's N, shard 0 first (none while off). */
export function openPartitions(index: OpenIndex): string[] {
  return index.shardCount === null ? [] : allOpenIndexPks(index.shardCount);
}

/** "off", or the state and its N: "adding(16)" (the Python library's str(OpenIndex)). */
export function openIndexName(index: OpenIndex): string {
  return index.shardCount === null ? index.state : `${index.state}(${index.shardCount})`;
}
