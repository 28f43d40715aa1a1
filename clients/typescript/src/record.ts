// The control record's items, parsed strictly (docs/control-contract.md, "STATE attributes").
// A reader refuses what does not parse. The attributes and the grammar of their values are
// record-schema.ts, generated from the Python library's one declaration of them (record/schema.py
// and record/grammar.py) by `python -m devkit.ts_record`: this file holds only how a part is
// read. The tests check the table against the `attributes` and `grammar` of
// docs/contract-vectors.json, every refused item there against the kind and attribute of this
// parser's ControlItemInvalidError, and docs/contract-corpus.json's mutated records against the
// Python reader's answers. Checked in the Python decoder's order: each part's attributes in the
// table's order, then the rules across attributes, then `phase`.
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { ControlItemInvalidError, InvalidShardCountError, type RefusalKind } from './errors.js';
import { LEGACY, layoutName, phaseOf, sameLayout, sharded, type Layout, type Phase } from './layout.js';
import { validateShardCount } from './shard.js';
import { OPEN_INDEX_OFF, openIndexName, sameOpenIndex, type OpenIndex, type OpenIndexState } from './open-index.js';
import {
  COMPLETION,
  CONTROLS,
  DYNAMO_TYPES,
  GRAMMAR,
  HISTORY_FLAGS,
  LEASE,
  PARTS,
  TRANSITION,
  type AttributeSpec,
  type PartSpec,
  type ValueKind,
} from './record-schema.js';

export type { ValueKind } from './record-schema.js';
export type Item = Record<string, AttributeValue>;

export const CONTROL_PK = 'RSAGA_INDEX#CONTROL';
export const STATE_SK = 'STATE';
export const HISTORY_SK_PREFIX = 'HISTORY#';
const ENTITY_STATE = 'RenewalSagaIndexControl';
const ENTITY_HISTORY = 'RenewalSagaIndexControlHistory';
// The grammar's patterns match a whole value; they use `[0-9]`, never a Unicode-aware class.
const TIME = new RegExp(`^(?:${GRAMMAR.timePattern})$`);
const NUMBER = new RegExp(`^(?:${GRAMMAR.numberPattern})$`);
const MAX_INTEGER = BigInt(GRAMMAR.maxInteger);

/** One attribute as docs/contract-vectors.json lists it. */
export interface RecordAttribute {
  readonly name: string;
  readonly part: string;
  readonly items: readonly string[];
  readonly type: 'S' | 'N' | 'BOOL' | 'L';
  readonly value: ValueKind;
  readonly optional: boolean;
  readonly requiredWith: string | null;
  readonly absent: AttributeSpec['absent'];
  readonly count: string | null;
}

/** Every attribute of a STATE or HISTORY item this parser knows, in the table's order. */
export const RECORD_ATTRIBUTES: readonly RecordAttribute[] = PARTS.flatMap((part) =>
  part.attributes.map((a) => ({
    name: a.name,
    part: part.name,
    items: [...part.items],
    type: DYNAMO_TYPES[a.value],
    value: a.value,
    optional: a.optional || part.presentIf !== null,
    // An attribute optional within its part (leasePace) is required with nothing.
    requiredWith: part.presentIf !== a.name && !a.optional ? part.presentIf : null,
    absent: a.absent,
    count: a.count,
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
  /** The open-saga index's state after this transition, and before it (absent reads as off). */
  readonly openIndex: OpenIndex;
  readonly previousOpenIndex: OpenIndex;
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
    values.set(a.name, readAttribute(item, a, !a.optional));
  }
  return values;
}

function readAttribute(item: Item, a: AttributeSpec, required: boolean): unknown {
  if (a.value === 'layout') {
    const layout = parseLayout(item, a.name, a.count ?? '');
    if (layout === null && required) refuse('missing', a.name, `${a.name} is missing`);
    return layout;
  }
  if (a.value === 'openIndex') return parseOpenIndex(item, a.name, a.count ?? '');
  const value = get(item, a.name);
  if (value === undefined && !required) return a.absent;
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

/** A HISTORY item's flags: whether a STATE write of it was confirmed (`applied`; absent or
 * NULL on items written before intents existed: true) or seen to fail (`abandoned`). A flag
 * that breaks the contract is refused as any attribute is, naming the item. */
export function parseHistoryFlags(item: Item): { applied: boolean; abandoned: boolean } {
  try {
    const values = readPart(item, HISTORY_FLAGS) as Values;
    return { applied: values.get('applied') as boolean, abandoned: values.get('abandoned') as boolean };
  } catch (err) {
    if (!(err instanceof ControlItemInvalidError)) throw err;
    throw new ControlItemInvalidError(
      err.kind,
      err.attribute,
      `history item ${shown(get(item, 'SK'))}: ${err.message}`,
    );
  }
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
  const openIndex = values.get('openIndex') as OpenIndex;
  const previousOpenIndex = values.get('previousOpenIndex') as OpenIndex;
  // A transition changes the layout or the open index, never both: a reader that learns of one
  // change at a time then never meets a state mixing two unsettled switches.
  if (
    !sameOpenIndex(openIndex, previousOpenIndex) &&
    !(sameLayout(layout, previousLayout) && sameLayout(movingTo, previousMovingTo))
  ) {
    refuse(
      'inconsistent',
      'openIndex',
      'openIndex: a transition changes the layout or the open index, never both: this one changes ' +
        `the open index (${openIndexName(previousOpenIndex)} -> ${openIndexName(openIndex)}) and the layout together`,
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
    openIndex,
    previousOpenIndex,
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

/** The open index's state and N; an item without the state (or with `off`) reads as off. */
function parseOpenIndex(item: Item, kindName: string, countName: string): OpenIndex {
  const kind = get(item, kindName);
  const count = get(item, countName);
  if (kind === undefined || kind.S === 'off') {
    if (count !== undefined) {
      refuse('unexpected', countName, `${countName} must be absent while ${kindName} is off`);
    }
    return OPEN_INDEX_OFF;
  }
  // Exactly a word writers write: no trimming or case folding.
  const states: readonly string[] = GRAMMAR.openIndexStates;
  if (kind.S === undefined || !states.includes(kind.S)) {
    refuse(
      kind.S === undefined ? 'wrong-type' : 'invalid-value',
      kindName,
      `${kindName} must be one of ${states.join(', ')}, got ${shown(kind)}`,
    );
  }
  const n = int(count, countName);
  try {
    return Object.freeze({ state: kind.S as OpenIndexState, shardCount: validateShardCount(n) });
  } catch (err) {
    if (err instanceof InvalidShardCountError) refuse('invalid-value', countName, `${countName}: ${err.message}`);
    throw err;
  }
}

/** An N's text under the grammar (a plain decimal literal); anything else is refused. */
function numberText(value: AttributeValue | undefined, name: string): string {
  if (value?.N === undefined) return wrongValue(value, name, 'a number');
  if (!NUMBER.test(value.N)) {
    refuse('invalid-value', name, `${name} must be a decimal number, got ${JSON.stringify(value.N)}`);
  }
  return value.N;
}

function number(value: AttributeValue | undefined, name: string): number {
  const n = Number(numberText(value, name));
  if (!Number.isFinite(n)) refuse('invalid-value', name, `${name} must be a finite number, got ${value?.N}`);
  return n;
}

/**
 * The exact value of a decimal literal when it is whole, else null. Digits and a power of ten
 * in BigInt, never a double: a double would round 2^53 + 1 to 2^53 and 1.0000000000000001 to 1,
 * and accept as integers what the Python reader, which reads decimals exactly, refuses.
 */
function wholeValue(text: string): bigint | null {
  const [mantissa = '', exponent = '0'] = text.toLowerCase().split('e');
  const negative = mantissa.startsWith('-');
  const [whole = '', fraction = ''] = (negative ? mantissa.slice(1) : mantissa).split('.');
  const digits = (whole + fraction).replace(/^0+/, '');
  const significant = digits.replace(/0+$/, '');
  if (significant === '') return 0n;
  const power = Number(exponent) - fraction.length + (digits.length - significant.length);
  if (power < 0) return null;
  const magnitude = BigInt(significant) * 10n ** BigInt(power);
  return negative ? -magnitude : magnitude;
}

function int(value: AttributeValue | undefined, name: string): number {
  const text = numberText(value, name);
  const whole = wholeValue(text);
  if (whole === null) return refuse('invalid-value', name, `${name} must be an integer, got ${text}`);
  if (whole > MAX_INTEGER || whole < -MAX_INTEGER) {
    refuse('invalid-value', name, `${name} must be an integer of magnitude at most 2^53 - 1, got ${text}`);
  }
  return Number(whole);
}

function strings(value: AttributeValue | undefined, name: string): string[] {
  const list = value?.L;
  if (list === undefined || !list.every((v) => v.S !== undefined)) {
    return wrongValue(value, name, 'a list of strings');
  }
  return list.map((v) => v.S as string);
}

// Exactly a word writers write: no trimming or case folding, which languages do differently.
function direction(value: AttributeValue | undefined, name: string): 'forward' | 'rollback' {
  const text = value?.S;
  if (text === 'forward' || text === 'rollback') return text;
  return refuse(
    text !== undefined ? 'invalid-value' : absentOrWrong(value),
    name,
    `${name} must be 'forward' or 'rollback', got ${shown(value)}`,
  );
}

/**
 * A record time: UTC ISO-8601 with milliseconds and "Z", fixed width in ASCII digits, from
 * year 0001 (the Python reader's first), and a real instant.
 */
function time(value: AttributeValue | undefined, name: string): string {
  const text = value?.S;
  if (text === undefined) {
    return wrongValue(value, name, 'a UTC ISO-8601 time');
  }
  const at = new Date(text);
  if (
    !TIME.test(text) ||
    Number(text.slice(0, 4)) < GRAMMAR.firstYear ||
    Number.isNaN(at.getTime()) ||
    at.toISOString() !== text
  ) {
    refuse(
      'invalid-value',
      name,
      `${name} must be UTC ISO-8601 'YYYY-MM-DDTHH:MM:SS.mmmZ' in ASCII digits from year 0001, got ${text}`,
    );
  }
  return text;
}
