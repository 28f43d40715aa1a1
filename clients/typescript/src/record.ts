// The control record's items, parsed strictly (docs/control-contract.md, "STATE attributes").
// A reader refuses what does not parse: the reference is the Python decoder
// (lambdas/saga_index/layout_change/record/decode.py), checked in the same order and refused
// with the same messages, so both languages refuse the same items for the same reason.
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { ControlRecordInvalidError, InvalidShardCountError } from './errors.js';
import { LEGACY, layoutName, phaseOf, sameLayout, sharded, type Layout, type Phase } from './layout.js';
import { reprAttribute, reprStr } from './pyrepr.js';

export type Item = Record<string, AttributeValue>;

export const CONTROL_PK = 'RSAGA_INDEX#CONTROL';
export const STATE_SK = 'STATE';
export const HISTORY_SK_PREFIX = 'HISTORY#';
const ENTITY_STATE = 'RenewalSagaIndexControl';
const ENTITY_HISTORY = 'RenewalSagaIndexControlHistory';
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** One layout transition: the STATE item carries the newest, each HISTORY item one. */
export interface Transition {
  readonly version: number;
  readonly phase: Phase;
  readonly layout: Layout;
  readonly movingTo: Layout | null;
  readonly previousLayout: Layout;
  readonly previousMovingTo: Layout | null;
  /** The layout writers stamp until effectiveAt (the item's priorWriteLayout, else `layout`). */
  readonly priorWrite: Layout;
  readonly changedAt: string;
  readonly changedBy: string;
  readonly reason: string;
  readonly effectiveAt: string;
  /** effectiveAt as epoch milliseconds. */
  readonly effectiveAtMs: number;
  readonly checksPassed: readonly string[];
  readonly checksForced: readonly string[];
}

export interface Lease {
  readonly holder: string;
  readonly token: string;
  readonly direction: 'forward' | 'rollback';
  readonly acquiredAt: string;
  readonly heartbeatAt: string;
  readonly expiresAt: string;
  readonly stateVersion: number;
}

/** What a STATE item says: the transition and the backfill's attributes. */
export interface StateRecord {
  readonly transition: Transition;
  readonly lease: Lease | null;
  readonly backfillMaxWritesPerSecond: number | null;
  readonly backfillPaused: boolean;
  readonly lastBackfillDirection: 'forward' | 'rollback' | null;
}

const fail = (message: string): never => {
  throw new ControlRecordInvalidError(message);
};

// A NULL attribute deserialises to None, as an absent one does.
function get(item: Item, name: string): AttributeValue | undefined {
  const value = item[name];
  return value === undefined || value.NULL !== undefined ? undefined : value;
}

export function parseStateItem(item: Item): StateRecord {
  expectEntity(item, ENTITY_STATE);
  const transition = parseTransition(item);
  const lease = parseLease(item);
  const rate = optionalRate(item);
  const paused = bool(item, 'backfillPaused', false);
  return {
    transition,
    lease,
    backfillMaxWritesPerSecond: rate,
    backfillPaused: paused,
    lastBackfillDirection: parseCompletion(item),
  };
}

export function parseHistoryItem(item: Item): Transition {
  expectEntity(item, ENTITY_HISTORY);
  const transition = parseTransition(item);
  const expected = HISTORY_SK_PREFIX + String(transition.version).padStart(10, '0');
  if (item.SK?.S !== expected) {
    fail(`history item ${reprAttribute(item.SK)} holds version ${transition.version}`);
  }
  return transition;
}

/** The transition attributes, shared by the STATE item and every HISTORY item. */
export function parseTransition(item: Item): Transition {
  const layout = parseLayout(item, 'layout', 'shardCount') ?? fail('layout is missing');
  const previousLayout =
    parseLayout(item, 'previousLayout', 'previousShardCount') ?? fail('previousLayout is missing');
  const version = int(item, 'version');
  const movingTo = parseLayout(item, 'movingToLayout', 'movingToShardCount');
  const previousMovingTo = parseLayout(item, 'previousMovingToLayout', 'previousMovingToShardCount');
  const changedAt = time(item, 'changedAt');
  const changedBy = str(item, 'changedBy');
  const reason = str(item, 'reason');
  const effectiveAt = time(item, 'effectiveAt');
  const checksPassed = strList(item, 'checksPassed');
  const checksForced = strList(item, 'checksForced');
  const priorWritten = parseLayout(item, 'priorWriteLayout', 'priorWriteShardCount');
  const invalid = (detail: string): never => fail(`control item does not parse: ${detail}`);
  if (version < 1) invalid(`a transition's version starts at 1, got ${version}`);
  const phase =
    phaseOf(layout, movingTo) ??
    invalid(`a state cannot move from ${layoutName(layout)} to itself`);
  if (phaseOf(previousLayout, previousMovingTo) === null) {
    invalid(`a state cannot move from ${layoutName(previousLayout)} to itself`);
  }
  if (
    priorWritten !== null &&
    !sameLayout(priorWritten, layout) &&
    !sameLayout(priorWritten, movingTo)
  ) {
    invalid(
      `the prior write layout ${layoutName(priorWritten)} is neither the layout ` +
        `(${layoutName(layout)}) nor movingTo (${movingTo === null ? 'None' : layoutName(movingTo)}): ` +
        'readers of this state would not see what its writers stamp',
    );
  }
  const stored = get(item, 'phase');
  if (stored?.S !== phase) {
    fail(`phase ${reprAttribute(stored)} disagrees with its layouts (${reprStr(phase)})`);
  }
  return {
    version,
    phase,
    layout,
    movingTo,
    previousLayout,
    previousMovingTo,
    priorWrite: priorWritten ?? layout,
    changedAt,
    changedBy,
    reason,
    effectiveAt,
    effectiveAtMs: Date.parse(effectiveAt),
    checksPassed,
    checksForced,
  };
}

function parseLease(item: Item): Lease | null {
  if (get(item, 'leaseToken') === undefined) return null;
  const value = get(item, 'leaseDirection');
  const direction = parseDirection(value) ?? fail(`leaseDirection: ${directionError(value)}`);
  return {
    holder: str(item, 'leaseHolder'),
    token: str(item, 'leaseToken'),
    direction,
    acquiredAt: time(item, 'leaseAcquiredAt'),
    heartbeatAt: time(item, 'leaseHeartbeatAt'),
    expiresAt: time(item, 'leaseExpiresAt'),
    stateVersion: int(item, 'leaseStateVersion'),
  };
}

function parseCompletion(item: Item): 'forward' | 'rollback' | null {
  const value = get(item, 'lastBackfillDirection');
  if (value === undefined) return null;
  const direction =
    parseDirection(value) ?? fail(`last backfill does not parse: ${directionError(value)}`);
  const source = parseLayout(item, 'lastBackfillSourceLayout', 'lastBackfillSourceShardCount');
  const target = parseLayout(item, 'lastBackfillTargetLayout', 'lastBackfillTargetShardCount');
  if (source === null || target === null) fail('last backfill lacks its source or target layout');
  int(item, 'lastBackfillStateVersion');
  time(item, 'lastBackfillStartedAt');
  time(item, 'lastBackfillCompletedAt');
  int(item, 'lastBackfillScanned');
  int(item, 'lastBackfillRestamped');
  int(item, 'lastBackfillAnomalies');
  bool(item, 'lastBackfillComplete');
  bool(item, 'lastBackfillVerified');
  str(item, 'lastBackfillHolder');
  str(item, 'lastBackfillLeaseToken');
  return direction;
}

// BackfillDirection.parse: str(value).strip().lower(); only a string can ever match.
function parseDirection(value: AttributeValue | undefined): 'forward' | 'rollback' | null {
  const text = value?.S?.trim().toLowerCase();
  return text === 'forward' || text === 'rollback' ? text : null;
}

function directionError(value: AttributeValue | undefined): string {
  return `direction must be 'forward' or 'rollback'; got ${reprAttribute(value)}`;
}

function expectEntity(item: Item, entity: string): void {
  if (get(item, 'PK')?.S !== CONTROL_PK || get(item, 'entityType')?.S !== entity) {
    fail(
      `not a ${entity} item: PK=${reprAttribute(get(item, 'PK'))}, ` +
        `entityType=${reprAttribute(get(item, 'entityType'))}`,
    );
  }
}

function parseLayout(item: Item, kindName: string, countName: string): Layout | null {
  const kind = get(item, kindName);
  if (kind === undefined) {
    if (get(item, countName) !== undefined) fail(`${countName} is set but ${kindName} is not`);
    return null;
  }
  if (kind.S === 'legacy') {
    if (get(item, countName) !== undefined) {
      fail(`${countName} must be absent for a legacy layout`);
    }
    return LEGACY;
  }
  if (kind.S === 'sharded') {
    const count = int(item, countName);
    try {
      return sharded(count);
    } catch (err) {
      if (err instanceof InvalidShardCountError) fail(`${countName}: ${err.message}`);
      throw err;
    }
  }
  return fail(`${kindName} must be 'legacy' or 'sharded', got ${reprAttribute(kind)}`);
}

function int(item: Item, name: string): number {
  const value = get(item, name);
  if (value?.N === undefined) return fail(`${name} must be a number, got ${reprAttribute(value)}`);
  const n = Number(value.N);
  if (!Number.isInteger(n)) fail(`${name} must be an integer, got ${value.N}`);
  return n;
}

function optionalRate(item: Item): number | null {
  const value = get(item, 'backfillMaxWritesPerSecond');
  if (value === undefined) return null;
  if (value.N === undefined) {
    fail(`backfillMaxWritesPerSecond must be a number, got ${reprAttribute(value)}`);
  }
  return Number(value.N);
}

function str(item: Item, name: string): string {
  const value = get(item, name);
  if (value?.S === undefined) return fail(`${name} must be a string, got ${reprAttribute(value)}`);
  return value.S;
}

function bool(item: Item, name: string, fallback?: boolean): boolean {
  const value = get(item, name);
  if (value === undefined && fallback !== undefined) return fallback;
  if (value?.BOOL === undefined) {
    return fail(`${name} must be a boolean, got ${reprAttribute(value)}`);
  }
  return value.BOOL;
}

// item.get(name, []): absent is an empty list, but a NULL attribute is None and refused.
function strList(item: Item, name: string): string[] {
  const value = item[name];
  if (value === undefined) return [];
  const list = value.L;
  if (list === undefined || !list.every((v) => v.S !== undefined)) {
    return fail(`${name} must be a list of strings, got ${reprAttribute(value)}`);
  }
  return list.map((v) => v.S as string);
}

/** A record time: UTC ISO-8601 with milliseconds and "Z", fixed width, and a real instant. */
export function time(item: Item, name: string): string {
  const value = get(item, name);
  const text = value?.S;
  if (text === undefined || !TIME.test(text)) {
    return fail(
      `${name} must be UTC ISO-8601 'YYYY-MM-DDTHH:MM:SS.mmmZ', got ${reprAttribute(value)}`,
    );
  }
  const at = new Date(text);
  if (Number.isNaN(at.getTime()) || at.toISOString() !== text) {
    fail(`${name} is not a time: ${reprStr(text)}`);
  }
  return text;
}
