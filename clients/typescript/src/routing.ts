// The routing rule, the same for every state (docs/control-contract.md, "Routing"), as
// lambdas/saga_index/layout_change/record/routing.py:
//   writers  stamp the state's prior write layout until its effectiveAt (by the writer's own
//            wall clock), and the target layout (movingTo, else the current one) from then on
//   readers  read the source (current) layout first, then the target, de-duplicated on (PK, SK)
// The open-saga index follows the same switch (open-index.ts): writers stamp OpenSagaPK on open
// sagas as the previous state did until effectiveAt, as the new state does from then on;
// enumerations of open sagas read the open index's keys only while the state is `open`, else
// GSI4's. By-person reads always read GSI4.
// Writers wait because a process that has not re-read the record since the move opened still
// reads only the previous state's layouts; until effectiveAt such a process may exist.
import { ControlRecordInvalidError } from './errors.js';
import { keyFor, LEGACY, layoutName, partitions, sameLayout, type Layout, type Phase } from './layout.js';
import type { Person } from './keys.js';
import { OPEN_INDEX_OFF, openKeyFor, openPartitions, readsOpenIndex, stamps, type OpenIndex } from './open-index.js';
import type { StateRecord, Transition } from './record.js';

export type RecordCondition = 'present' | 'never-migrated' | 'missing';

/** The state a reader or writer follows, with the routing it implies. */
export interface ControlState {
  readonly condition: RecordCondition;
  readonly version: number;
  readonly phase: Phase;
  readonly layout: Layout;
  readonly movingTo: Layout | null;
  /** The layout read first (the current one; for a missing record, the side not written to). */
  readonly source: Layout;
  /** The layout writers stamp from effectiveAt on. */
  readonly target: Layout;
  /** The layout writers stamp until effectiveAt. */
  readonly priorWrite: Layout;
  readonly effectiveAt: string | null;
  readonly effectiveAtMs: number | null;
  /** The open-saga index's state (off when never migrated), and the state before it. */
  readonly openIndex: OpenIndex;
  readonly previousOpenIndex: OpenIndex;
  /** The STATE item's attributes (present only); the newest HISTORY item's transition (missing). */
  readonly record: StateRecord | null;
  readonly transition: Transition | null;
}

export const NEVER_MIGRATED: ControlState = Object.freeze({
  condition: 'never-migrated',
  version: 0,
  phase: 'legacy',
  layout: LEGACY,
  movingTo: null,
  source: LEGACY,
  target: LEGACY,
  priorWrite: LEGACY,
  effectiveAt: null,
  effectiveAtMs: null,
  openIndex: OPEN_INDEX_OFF,
  previousOpenIndex: OPEN_INDEX_OFF,
  record: null,
  transition: null,
});

export function presentState(record: StateRecord): ControlState {
  const t = record.transition;
  return fromTransition('present', t, t.layout, record);
}

/**
 * The state of a deleted STATE item, from its newest HISTORY item: writers per that item
 * (its prior write layout until its effectiveAt, then the state it resulted in), readers over
 * both sides of that move, the side that is not the writers' target first. A history item that
 * names more than two layouts is refused: no transition produces one, so no reading order can
 * be trusted to show every row.
 */
export function missingState(t: Transition): ControlState {
  const target = t.movingTo ?? t.layout;
  const named = [t.layout, t.movingTo, t.previousLayout, t.previousMovingTo];
  const others: Layout[] = [];
  for (const layout of named) {
    if (layout === null || sameLayout(layout, target)) continue;
    if (!others.some((o) => sameLayout(o, layout))) others.push(layout);
  }
  if (others.length > 1) {
    throw new ControlRecordInvalidError(
      `history version ${t.version} names more than two layouts ` +
        `(${others.map(layoutName).join(', ')} and ${layoutName(target)}): no transition produces that`,
    );
  }
  return fromTransition('missing', t, others[0] ?? target, null);
}

function fromTransition(
  condition: RecordCondition,
  t: Transition,
  source: Layout,
  record: StateRecord | null,
): ControlState {
  return Object.freeze({
    condition,
    version: t.version,
    phase: t.phase,
    layout: t.layout,
    movingTo: t.movingTo,
    source,
    target: t.movingTo ?? t.layout,
    priorWrite: t.priorWrite,
    effectiveAt: t.effectiveAt,
    effectiveAtMs: t.effectiveAtMs,
    openIndex: t.openIndex,
    previousOpenIndex: t.previousOpenIndex,
    record,
    transition: t,
  });
}

/** The layout a writer whose wall clock reads `nowMs` (epoch ms) stamps in `state`. */
export function writeLayout(state: ControlState, nowMs: number): Layout {
  if (state.effectiveAtMs !== null && nowMs < state.effectiveAtMs) return state.priorWrite;
  return state.target;
}

export function writeKey(state: ControlState, p: Person, nowMs: number): string {
  return keyFor(writeLayout(state, nowMs), p);
}

/**
 * The open index whose OpenSagaPK a writer whose wall clock reads `nowMs` stamps on an open saga
 * (the previous state's until effectiveAt, as for the layout); null: it stamps none and removes any.
 */
export function openWriteIndex(state: ControlState, nowMs: number): OpenIndex | null {
  const early = state.effectiveAtMs !== null && nowMs < state.effectiveAtMs;
  const followed = early ? state.previousOpenIndex : state.openIndex;
  return stamps(followed) ? followed : null;
}

/** The OpenSagaPK a writer stamps on this person's open saga rows now; null: none (remove it). */
export function openWriteKey(state: ControlState, p: Person, nowMs: number): string | null {
  const index = openWriteIndex(state, nowMs);
  return index === null ? null : openKeyFor(index, p);
}

/**
 * The OpenSagaPKs an enumeration of open sagas reads (one stage: rows never move between them),
 * from the moment the state is read; null: it reads GSI4 (`enumerationStages`).
 */
export function openEnumerationKeys(state: ControlState): string[] | null {
  return readsOpenIndex(state.openIndex) ? openPartitions(state.openIndex) : null;
}

/** The GSI4PKs a by-person read queries, in order: source, then target when it differs. */
export function readKeys(state: ControlState, p: Person): string[] {
  return [...new Set([keyFor(state.source, p), keyFor(state.target, p)])];
}

/**
 * The GSI4PKs an enumeration reads, stage by stage. A key both layouts name (only a re-shard
 * has one) sits where it keeps the rule: in a split rows only leave a shared key, so it is read
 * with the source; in a merge rows only enter it, so it is read with the target.
 */
export function enumerationStages(state: ControlState): string[][] {
  const sourceKeys = partitions(state.source);
  if (sameLayout(state.source, state.target)) return [sourceKeys];
  const targetKeys = partitions(state.target);
  const shared = new Set(sourceKeys.filter((k) => targetKeys.includes(k)));
  const targetFiner = countOf(state.target) > countOf(state.source);
  const first = shared.size > 0 && !targetFiner ? sourceKeys.filter((k) => !shared.has(k)) : sourceKeys;
  const second = targetKeys.filter((k) => !first.includes(k));
  return [first, second].filter((stage) => stage.length > 0);
}

function countOf(layout: Layout): number {
  return layout.kind === 'sharded' ? layout.shardCount : 0;
}

