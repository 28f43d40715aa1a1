// The control record's items, parsed strictly (docs/control-contract.md, "STATE attributes").
// A reader refuses what does not parse. The attributes are one table (PARTS, below), the same
// list as the Python library's record/schema.py: the tests check it against the `attributes`
// of docs/contract-vectors.json, and every refused item there against the kind and attribute
// of this parser's ControlItemInvalidError. Checked in the Python decoder's order: each part's
// attributes in the table's order, then the rules across attributes, then `phase`.
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { ControlItemInvalidError, InvalidShardCountError, type RefusalKind } from './errors.js';
import { LEGACY, layoutName, phaseOf, sameLayout, sharded, type Layout, type Phase } from './layout.js';

export type Item = Record<string, AttributeValue>;

export const CONTROL_PK = 'RSAGA_INDEX#CONTROL';
export const STATE_SK = 'STATE';
export const HISTORY_SK_PREFIX = 'HISTORY#';
const ENTITY_STATE = 'RenewalSagaIndexControl';
const ENTITY_HISTORY = 'RenewalSagaIndexControlHistory';
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** What an attribute holds: its DynamoDB type and the rule a reader checks. */
export type ValueKind =
  | 'string'
  | 'integer'
  | 'number'
  | 'boolean'
  | 'time'
  | 'strings'
  | 'layout'
  | 'shardCount'
  | 'phase'
  | 'direction';

const DYNAMO_TYPES: Readonly<Record<ValueKind, 'S' | 'N' | 'BOOL' | 'L'>> = {
  string: 'S',
  integer: 'N',
  number: 'N',
  boolean: 'BOOL',
  time: 'S',
  strings: 'L',
  layout: 'S',
  shardCount: 'N',
  phase: 'S',
  direction: 'S',
};

interface AttributeSpec {
  readonly name: string;
  readonly value: ValueKind;
  readonly optional?: boolean;
  /** What an absent optional attribute reads as (null unless given). */
  readonly absent?: unknown;
  /** A layout's shard-count attribute. */
  readonly count?: string;
}

interface PartSpec {
  readonly name: string;
  readonly items: readonly ('STATE' | 'HISTORY')[];
  /** The attribute whose presence puts the whole part on the item; each is then required. */
  readonly presentIf: string | null;
  readonly attributes: readonly AttributeSpec[];
}

const layoutPair = (kind: string, count: string, optional: boolean): AttributeSpec[] => [
  { name: kind, value: 'layout', optional, count },
  { name: count, value: 'shardCount', optional: true },
];

const TRANSITION: PartSpec = {
  name: 'transition',
  items: ['STATE', 'HISTORY'],
  presentIf: null,
  attributes: [
    ...layoutPair('layout', 'shardCount', false),
    ...layoutPair('movingToLayout', 'movingToShardCount', true),
    // Derived from the layouts: `phase` is checked against them, `previousPhase` is not read.
    { name: 'phase', value: 'phase' },
    ...layoutPair('previousLayout', 'previousShardCount', false),
    ...layoutPair('previousMovingToLayout', 'previousMovingToShardCount', true),
    { name: 'previousPhase', value: 'phase' },
    { name: 'version', value: 'integer' },
    { name: 'changedAt', value: 'time' },
    { name: 'changedBy', value: 'string' },
    { name: 'reason', value: 'string' },
    { name: 'effectiveAt', value: 'time' },
    // Absent only on items written before it existed: then writers stamp `layout`.
    ...layoutPair('priorWriteLayout', 'priorWriteShardCount', true),
    { name: 'checksPassed', value: 'strings', optional: true, absent: [] },
    { name: 'checksForced', value: 'strings', optional: true, absent: [] },
  ],
};

const LEASE: PartSpec = {
  name: 'lease',
  items: ['STATE'],
  presentIf: 'leaseToken',
  attributes: [
    { name: 'leaseHolder', value: 'string' },
    { name: 'leaseToken', value: 'string' },
    { name: 'leaseDirection', value: 'direction' },
    { name: 'leaseAcquiredAt', value: 'time' },
    { name: 'leaseHeartbeatAt', value: 'time' },
    { name: 'leaseExpiresAt', value: 'time' },
    { name: 'leaseStateVersion', value: 'integer' },
    // The pace the running backfill chose and why, as of its last heartbeat.
    { name: 'leasePace', value: 'string', optional: true },
  ],
};

const CONTROLS: PartSpec = {
  name: 'backfill controls',
  items: ['STATE'],
  presentIf: null,
  attributes: [
    { name: 'backfillMaxWritesPerSecond', value: 'number', optional: true },
    { name: 'backfillPaused', value: 'boolean', optional: true, absent: false },
    { name: 'leaseEpoch', value: 'integer', optional: true },
  ],
};

const COMPLETION: PartSpec = {
  name: 'last backfill',
  items: ['STATE'],
  presentIf: 'lastBackfillDirection',
  attributes: [
    { name: 'lastBackfillDirection', value: 'direction' },
    ...layoutPair('lastBackfillSourceLayout', 'lastBackfillSourceShardCount', false),
    ...layoutPair('lastBackfillTargetLayout', 'lastBackfillTargetShardCount', false),
    { name: 'lastBackfillStateVersion', value: 'integer' },
    { name: 'lastBackfillStartedAt', value: 'time' },
    { name: 'lastBackfillCompletedAt', value: 'time' },
    { name: 'lastBackfillScanned', value: 'integer' },
    { name: 'lastBackfillRestamped', value: 'integer' },
    { name: 'lastBackfillAnomalies', value: 'integer' },
    { name: 'lastBackfillComplete', value: 'boolean' },
    { name: 'lastBackfillVerified', value: 'boolean' },
    { name: 'lastBackfillHolder', value: 'string' },
    { name: 'lastBackfillLeaseToken', value: 'string' },
  ],
};

// HISTORY intents (docs/control-contract.md, "The record"): this package follows the newest
// HISTORY item when STATE is missing and does not read them, but they are part of the record.
const HISTORY_FLAGS: PartSpec = {
  name: 'history flags',
  items: ['HISTORY'],
  presentIf: null,
  attributes: [
    { name: 'applied', value: 'boolean', optional: true, absent: true },
    { name: 'abandoned', value: 'boolean', optional: true, absent: false },
  ],
};

const PARTS: readonly PartSpec[] = [TRANSITION, LEASE, CONTROLS, COMPLETION, HISTORY_FLAGS];

/** One attribute as docs/contract-vectors.json lists it. */
export interface RecordAttribute {
  readonly name: string;
  readonly part: string;
  readonly items: readonly string[];
  readonly type: 'S' | 'N' | 'BOOL' | 'L';
  readonly value: ValueKind;
  readonly optional: boolean;
  readonly requiredWith: string | null;
}

/** Every attribute of a STATE or HISTORY item this parser knows, in the table's order. */
export const RECORD_ATTRIBUTES: readonly RecordAttribute[] = PARTS.flatMap((part) =>
  part.attributes.map((a) => ({
    name: a.name,
    part: part.name,
    items: [...part.items],
    type: DYNAMO_TYPES[a.value],
    value: a.value,
    optional: a.optional === true || part.presentIf !== null,
    // An attribute optional within its part (leasePace) is required with nothing.
    requiredWith: part.presentIf !== a.name && a.optional !== true ? part.presentIf : null,
  })),
);

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
  /** The pace the run chose and why, as its last heartbeat wrote it (null: none yet). */
  readonly pace: string | null;
}

/** What a STATE item says: the transition and the backfill's attributes. */
export interface StateRecord {
  readonly transition: Transition;
  readonly lease: Lease | null;
  readonly backfillMaxWritesPerSecond: number | null;
  readonly backfillPaused: boolean;
  readonly lastBackfillDirection: 'forward' | 'rollback' | null;
}

const refuse = (kind: RefusalKind, attribute: string, message: string): never => {
  throw new ControlItemInvalidError(kind, attribute, message);
};

// A NULL attribute counts as absent (the contract never writes one).
function get(item: Item, name: string): AttributeValue | undefined {
  const value = item[name];
  return value === undefined || value.NULL !== undefined ? undefined : value;
}

/** An attribute as shown in a refusal: its DynamoDB JSON, or "nothing" when absent. */
function shown(value: AttributeValue | undefined): string {
  return value === undefined ? 'nothing' : JSON.stringify(value);
}

const absentOrWrong = (value: AttributeValue | undefined): RefusalKind =>
  value === undefined ? 'missing' : 'wrong-type';

/** Absent, or another DynamoDB type than the attribute's. */
const wrongValue = (value: AttributeValue | undefined, name: string, what: string): never =>
  refuse(absentOrWrong(value), name, `${name} must be ${what}, got ${shown(value)}`);

/** A part's values by attribute name; null when the part is not on the item. */
type Values = ReadonlyMap<string, unknown>;

function readPart(item: Item, part: PartSpec): Values | null {
  if (part.presentIf !== null && get(item, part.presentIf) === undefined) return null;
  const values = new Map<string, unknown>();
  for (const a of part.attributes) {
    if (a.value === 'shardCount' || a.value === 'phase') continue;
    // A part on the item has all its attributes but those optional within it (leasePace).
    values.set(a.name, readAttribute(item, a, a.optional !== true));
  }
  return values;
}

function readAttribute(item: Item, a: AttributeSpec, required: boolean): unknown {
  if (a.value === 'layout') {
    const layout = parseLayout(item, a.name, a.count ?? '');
    if (layout === null && required) refuse('missing', a.name, `${a.name} is missing`);
    return layout;
  }
  const value = get(item, a.name);
  if (value === undefined && !required) return a.absent ?? null;
  switch (a.value) {
    case 'string':
      return value?.S ?? wrongValue(value, a.name, 'a string');
    case 'integer':
      return int(value, a.name);
    case 'number':
      return number(value, a.name);
    case 'boolean':
      return value?.BOOL ?? wrongValue(value, a.name, 'a boolean');
    case 'time':
      return time(value, a.name);
    case 'strings':
      return strings(value, a.name);
    case 'direction':
      return direction(value, a.name);
    default:
      throw new Error(`no reader for ${a.value}`);
  }
}

export function parseStateItem(item: Item): StateRecord {
  expectEntity(item, ENTITY_STATE);
  const transition = parseTransition(item);
  const lease = readPart(item, LEASE);
  const controls = readPart(item, CONTROLS);
  const completion = readPart(item, COMPLETION);
  return {
    transition,
    lease:
      lease === null
        ? null
        : {
            holder: lease.get('leaseHolder') as string,
            token: lease.get('leaseToken') as string,
            direction: lease.get('leaseDirection') as Lease['direction'],
            acquiredAt: lease.get('leaseAcquiredAt') as string,
            heartbeatAt: lease.get('leaseHeartbeatAt') as string,
            expiresAt: lease.get('leaseExpiresAt') as string,
            stateVersion: lease.get('leaseStateVersion') as number,
            pace: (lease.get('leasePace') as string | null) ?? null,
          },
    backfillMaxWritesPerSecond: controls?.get('backfillMaxWritesPerSecond') as number | null,
    backfillPaused: controls?.get('backfillPaused') as boolean,
    lastBackfillDirection:
      completion === null ? null : (completion.get('lastBackfillDirection') as Lease['direction']),
  };
}

export function parseHistoryItem(item: Item): Transition {
  expectEntity(item, ENTITY_HISTORY);
  const transition = parseTransition(item);
  const expected = HISTORY_SK_PREFIX + String(transition.version).padStart(10, '0');
  if (get(item, 'SK')?.S !== expected) {
    refuse(
      'inconsistent',
      'SK',
      `history item SK ${shown(get(item, 'SK'))} holds version ${transition.version}, not ${expected}`,
    );
  }
  return transition;
}

/** The transition attributes, shared by the STATE item and every HISTORY item. */
export function parseTransition(item: Item): Transition {
  const values = readPart(item, TRANSITION) as Values;
  const version = values.get('version') as number;
  const layout = values.get('layout') as Layout;
  const movingTo = values.get('movingToLayout') as Layout | null;
  const previousLayout = values.get('previousLayout') as Layout;
  const previousMovingTo = values.get('previousMovingToLayout') as Layout | null;
  const priorWritten = values.get('priorWriteLayout') as Layout | null;
  if (version < 1) refuse('invalid-value', 'version', `version must be at least 1, got ${version}`);
  const phase =
    phaseOf(layout, movingTo) ??
    refuse(
      'inconsistent',
      'movingToLayout',
      `movingToLayout: a state cannot move from ${layoutName(layout)} to itself`,
    );
  if (phaseOf(previousLayout, previousMovingTo) === null) {
    refuse(
      'inconsistent',
      'previousMovingToLayout',
      `previousMovingToLayout: a state cannot move from ${layoutName(previousLayout)} to itself`,
    );
  }
  if (
    priorWritten !== null &&
    !sameLayout(priorWritten, layout) &&
    !sameLayout(priorWritten, movingTo)
  ) {
    refuse(
      'inconsistent',
      'priorWriteLayout',
      `priorWriteLayout ${layoutName(priorWritten)} is neither the layout (${layoutName(layout)}) ` +
        `nor movingTo (${movingTo === null ? 'none' : layoutName(movingTo)}): readers of this ` +
        'state would not see what its writers stamp',
    );
  }
  const stored = get(item, 'phase');
  if (stored?.S !== phase) {
    refuse(
      stored === undefined ? 'missing' : 'inconsistent',
      'phase',
      `phase ${shown(stored)} disagrees with its layouts, which make it ${phase}`,
    );
  }
  const effectiveAt = values.get('effectiveAt') as string;
  return {
    version,
    phase,
    layout,
    movingTo,
    previousLayout,
    previousMovingTo,
    priorWrite: priorWritten ?? layout,
    changedAt: values.get('changedAt') as string,
    changedBy: values.get('changedBy') as string,
    reason: values.get('reason') as string,
    effectiveAt,
    effectiveAtMs: Date.parse(effectiveAt),
    checksPassed: values.get('checksPassed') as string[],
    checksForced: values.get('checksForced') as string[],
  };
}

function expectEntity(item: Item, entity: string): void {
  const pk = get(item, 'PK');
  const entityType = get(item, 'entityType');
  if (pk?.S !== CONTROL_PK || entityType?.S !== entity) {
    refuse(
      'wrong-item',
      pk?.S !== CONTROL_PK ? 'PK' : 'entityType',
      `not a ${entity} item: PK ${shown(pk)}, entityType ${shown(entityType)}`,
    );
  }
}

function parseLayout(item: Item, kindName: string, countName: string): Layout | null {
  const kind = get(item, kindName);
  const count = get(item, countName);
  if (kind === undefined) {
    if (count !== undefined) {
      refuse('unexpected', countName, `${countName} is set but ${kindName} is not`);
    }
    return null;
  }
  if (kind.S === 'legacy') {
    if (count !== undefined) {
      refuse('unexpected', countName, `${countName} must be absent for a legacy layout`);
    }
    return LEGACY;
  }
  if (kind.S === 'sharded') {
    const n = int(count, countName);
    try {
      return sharded(n);
    } catch (err) {
      if (err instanceof InvalidShardCountError) {
        refuse('invalid-value', countName, `${countName}: ${err.message}`);
      }
      throw err;
    }
  }
  return refuse(
    kind.S === undefined ? 'wrong-type' : 'invalid-value',
    kindName,
    `${kindName} must be 'legacy' or 'sharded', got ${shown(kind)}`,
  );
}

function number(value: AttributeValue | undefined, name: string): number {
  if (value?.N === undefined) return wrongValue(value, name, 'a number');
  return Number(value.N);
}

function int(value: AttributeValue | undefined, name: string): number {
  const n = number(value, name);
  if (!Number.isInteger(n)) refuse('invalid-value', name, `${name} must be an integer, got ${value?.N}`);
  return n;
}

function strings(value: AttributeValue | undefined, name: string): string[] {
  const list = value?.L;
  if (list === undefined || !list.every((v) => v.S !== undefined)) {
    return wrongValue(value, name, 'a list of strings');
  }
  return list.map((v) => v.S as string);
}

// Python's BackfillDirection.parse: trimmed, any case; only a string can name one.
function direction(value: AttributeValue | undefined, name: string): 'forward' | 'rollback' {
  const text = value?.S?.trim().toLowerCase();
  if (text === 'forward' || text === 'rollback') return text;
  return refuse(
    value?.S !== undefined ? 'invalid-value' : absentOrWrong(value),
    name,
    `${name} must be 'forward' or 'rollback', got ${shown(value)}`,
  );
}

/** A record time: UTC ISO-8601 with milliseconds and "Z", fixed width, and a real instant. */
function time(value: AttributeValue | undefined, name: string): string {
  const text = value?.S;
  if (text === undefined) {
    return wrongValue(value, name, 'a UTC ISO-8601 time');
  }
  const at = new Date(text);
  if (!TIME.test(text) || Number.isNaN(at.getTime()) || at.toISOString() !== text) {
    refuse('invalid-value', name, `${name} must be UTC ISO-8601 'YYYY-MM-DDTHH:MM:SS.mmmZ', got ${text}`);
  }
  return text;
}
