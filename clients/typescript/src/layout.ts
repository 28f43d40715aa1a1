// Layouts: where a row's GSI4PK points. `legacy` gives every row one key; `sharded(N)` gives a
// person's rows the key of their shard under N (docs/control-contract.md, "A layout").
import { LEGACY_GSI4PK, shardedGsi4pk, type Person } from './keys.js';
import { validateShardCount } from './shard.js';

export type Layout =
  | { readonly kind: 'legacy' }
  | { readonly kind: 'sharded'; readonly shardCount: number };

export const LEGACY: Layout = Object.freeze({ kind: 'legacy' });

export function sharded(shardCount: number): Layout {
  return Object.freeze({ kind: 'sharded', shardCount: validateShardCount(shardCount) });
}

export function sameLayout(a: Layout | null, b: Layout | null): boolean {
  if (a === null || b === null) return a === b;
  if (a.kind === 'legacy' || b.kind === 'legacy') return a.kind === b.kind;
  return a.shardCount === b.shardCount;
}

export function shardCountOf(layout: Layout): number | null {
  return layout.kind === 'sharded' ? layout.shardCount : null;
}

/** "legacy" or "sharded(N)": the Python library's str(Layout). */
export function layoutName(layout: Layout): string {
  return layout.kind === 'legacy' ? 'legacy' : `sharded(${layout.shardCount})`;
}

/** The GSI4PK this layout gives a person's rows. */
export function keyFor(layout: Layout, p: Person): string {
  return layout.kind === 'legacy' ? LEGACY_GSI4PK : shardedGsi4pk(p.hash % layout.shardCount);
}

/** Every GSI4PK of the layout, in ascending shard order. */
export function partitions(layout: Layout): string[] {
  if (layout.kind === 'legacy') return [LEGACY_GSI4PK];
  return Array.from({ length: layout.shardCount }, (_, s) => shardedGsi4pk(s));
}

export type Phase = 'legacy' | 'migrating' | 'sharded' | 'rolling-back' | 'resharding';

/** The phase naming (current, movingTo); null when a "move" goes nowhere (not a state). */
export function phaseOf(current: Layout, movingTo: Layout | null): Phase | null {
  if (movingTo === null) return current.kind === 'sharded' ? 'sharded' : 'legacy';
  if (sameLayout(current, movingTo)) return null;
  if (current.kind === 'legacy') return 'migrating';
  return movingTo.kind === 'sharded' ? 'resharding' : 'rolling-back';
}
