// docs/contract-vectors.json: generated from the Python code; the package must agree with every
// vector, so a change to one language that the other does not follow fails both test suites.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CACHE_SECONDS,
  ControlItemInvalidError,
  ControlRecordInvalidError,
  EFFECTIVE_DELAY_SECONDS,
  NEVER_MIGRATED,
  OPEN_STATES,
  RETRY_AFTER_SECONDS,
  STALE_GRACE_SECONDS,
  enumerationStages,
  missingState,
  parseHistoryItem,
  parseStateItem,
  presentState,
  readKeys,
  writeLayout,
  type ControlState,
  type Item,
  type RefusalKind,
  type Transition,
} from '../src/internal.js';
import { followedState, needsLostRecordProbe } from '../src/control.js';
import { openIndexName } from '../src/open-index.js';
import { openEnumerationKeys, openWriteKey } from '../src/routing.js';
import { person } from '../src/keys.js';
import { keyFor } from '../src/layout.js';
import { RECORD_ATTRIBUTES, type RecordAttribute } from '../src/record.js';
import { GRAMMAR } from '../src/record-schema.js';
import { docsJson } from './vectors.js';

interface PersonRouting {
  personId: string;
  writeKey: string;
  readKeys: string[];
}
interface Vectors {
  routing: { name: string; item: Item; now: string; persons: PersonRouting[]; stages: string[][] }[];
  attributes: RecordAttribute[];
  records: {
    name: string;
    item: Item;
    valid: boolean;
    refusal: { kind: string; attribute: string } | null;
    phase: string | null;
    version: number | null;
  }[];
  missing: {
    name: string;
    history: Item | null;
    now: string;
    // Either the state the fallback follows, or the substring of the refusal.
    expect:
      | { condition: string; persons: PersonRouting[]; stages: string[][] }
      | { error: string };
  }[];
  missingRecord: {
    name: string;
    state: Item | null;
    history: Item[];
    now: string;
    // The state followed, or the refusal of an item no reader follows.
    expect:
      | {
          condition: string;
          version: number;
          phase: string;
          probe: boolean;
          persons: PersonRouting[];
          stages: string[][];
        }
      | { refusal: { kind: string; attribute: string } };
  }[];
  grammar: typeof GRAMMAR;
  openStates: string[];
  openIndex: {
    name: string;
    state: Item | null;
    history: Item[];
    now: string;
    expect: {
      condition: string;
      version: number;
      phase: string;
      openIndex: string;
      openIndexShardCount: number | null;
      persons: { personId: string; openWriteKey: string | null }[];
      openReadKeys: string[] | null;
    };
  }[];
  openIndexRecords: (Vectors['records'][number] & { openIndex?: string | null })[];
  timing: {
    cacheSeconds: number;
    staleGraceSeconds: number;
    effectiveDelaySeconds: number;
    retryAfterSeconds: number;
  };
}

const vectors = docsJson<Vectors>('contract-vectors.json');

function routed(state: ControlState, now: string, personIds: string[]): PersonRouting[] {
  const nowMs = Date.parse(now);
  return personIds.map((personId) => {
    const p = person(personId);
    return { personId, writeKey: keyFor(writeLayout(state, nowMs), p), readKeys: readKeys(state, p) };
  });
}

describe('contract vectors: routing (every state, before and from effectiveAt)', () => {
  assert.ok(vectors.routing.length > 0);
  for (const v of vectors.routing) {
    test(v.name, () => {
      const state = presentState(parseStateItem(v.item));
      const ids = v.persons.map((p) => p.personId);
      assert.deepEqual(routed(state, v.now, ids), v.persons);
      assert.deepEqual(enumerationStages(state), v.stages);
    });
  }
});

/** A valid item parses to its phase and version (and `more` holds); an invalid one is refused
 * with the Python reader's kind and attribute, its message naming the attribute. */
function checkRecord(v: Vectors['records'][number], more: (transition: Transition) => void = () => undefined): void {
  if (v.valid) {
    const { transition } = parseStateItem(v.item);
    assert.equal(transition.phase, v.phase);
    assert.equal(transition.version, v.version);
    more(transition);
    return;
  }
  assert.throws(
    () => parseStateItem(v.item),
    (err: unknown) => {
      assert.ok(err instanceof ControlItemInvalidError, `not a refusal: ${String(err)}`);
      assert.deepEqual({ kind: err.kind, attribute: err.attribute }, v.refusal);
      assert.ok(err.message.includes(err.attribute), err.message);
      return true;
    },
  );
}

describe('contract vectors: records (valid and invalid STATE items)', () => {
  assert.ok(vectors.records.some((r) => r.valid) && vectors.records.some((r) => !r.valid));
  for (const v of vectors.records) test(v.name, () => checkRecord(v));
});

test('contract vectors: the record attributes this parser knows are the Python table', () => {
  assert.deepEqual(RECORD_ATTRIBUTES, vectors.attributes);
});

test('contract vectors: the grammar this parser checks values under is the Python one', () => {
  assert.deepEqual(GRAMMAR, vectors.grammar);
});

test('contract vectors: every refusal kind is exercised', () => {
  const kinds = new Set(vectors.records.flatMap((r) => (r.refusal === null ? [] : [r.refusal.kind])));
  const all: RefusalKind[] = ['wrong-item', 'missing', 'unexpected', 'wrong-type', 'invalid-value', 'inconsistent'];
  assert.deepEqual([...kinds].sort(), [...all].sort());
});

describe('contract vectors: the missing-record fallback', () => {
  for (const v of vectors.missing) {
    test(v.name, () => {
      const resolve = (): ControlState =>
        v.history === null ? NEVER_MIGRATED : missingState(parseHistoryItem(v.history));
      if ('error' in v.expect) {
        const wanted = v.expect.error;
        assert.throws(
          resolve,
          (err: unknown) => err instanceof ControlRecordInvalidError && err.message.includes(wanted),
        );
        return;
      }
      const state = resolve();
      assert.equal(state.condition, v.expect.condition);
      const ids = v.expect.persons.map((p) => p.personId);
      assert.deepEqual(routed(state, v.now, ids), v.expect.persons);
      assert.deepEqual(enumerationStages(state), v.expect.stages);
    });
  }
});

describe('contract vectors: the one missing-record rule (STATE, HISTORY applied, intents, abandoned)', () => {
  assert.ok(vectors.missingRecord.length > 0);
  for (const v of vectors.missingRecord) {
    test(v.name, () => {
      if ('refusal' in v.expect) {
        const wanted = v.expect.refusal;
        assert.throws(
          () => followedState(v.state, v.history),
          (err: unknown) => {
            assert.ok(err instanceof ControlItemInvalidError, `not a refusal: ${String(err)}`);
            assert.deepEqual({ kind: err.kind, attribute: err.attribute }, wanted);
            return true;
          },
        );
        return;
      }
      const state = followedState(v.state, v.history);
      assert.deepEqual(
        { condition: state.condition, version: state.version, phase: state.phase },
        { condition: v.expect.condition, version: v.expect.version, phase: v.expect.phase },
      );
      const ids = v.expect.persons.map((p) => p.personId);
      assert.deepEqual(routed(state, v.now, ids), v.expect.persons);
      assert.deepEqual(enumerationStages(state), v.expect.stages);
      assert.equal(needsLostRecordProbe(state), v.expect.probe);
    });
  }
});

describe('contract vectors: the open-saga index (every state, before and from effectiveAt, a lost STATE)', () => {
  assert.ok(vectors.openIndex.length > 0);
  const states = new Set(vectors.openIndex.map((v) => v.expect.openIndex));
  assert.deepEqual([...states].sort(), ['adding', 'off', 'open', 'removing']);
  for (const v of vectors.openIndex) {
    test(v.name, () => {
      const state = followedState(v.state, v.history);
      const nowMs = Date.parse(v.now);
      assert.deepEqual(
        {
          condition: state.condition,
          version: state.version,
          phase: state.phase,
          openIndex: state.openIndex.state,
          openIndexShardCount: state.openIndex.shardCount,
        },
        {
          condition: v.expect.condition,
          version: v.expect.version,
          phase: v.expect.phase,
          openIndex: v.expect.openIndex,
          openIndexShardCount: v.expect.openIndexShardCount,
        },
      );
      const persons = v.expect.persons.map(({ personId }) => ({
        personId,
        openWriteKey: openWriteKey(state, person(personId), nowMs),
      }));
      assert.deepEqual(persons, v.expect.persons);
      assert.deepEqual(openEnumerationKeys(state), v.expect.openReadKeys);
    });
  }
});

describe("contract vectors: the open-saga index's attributes (valid and invalid STATE items)", () => {
  assert.ok(vectors.openIndexRecords.some((r) => r.valid) && vectors.openIndexRecords.some((r) => !r.valid));
  for (const v of vectors.openIndexRecords) {
    test(v.name, () => checkRecord(v, (t) => assert.equal(openIndexName(t.openIndex), v.openIndex)));
  }
});

test('contract vectors: the open states', () => {
  assert.deepEqual([...OPEN_STATES], vectors.openStates);
});

test('contract vectors: T, the stale grace, the effective delay and the retry after a failed read', () => {
  assert.deepEqual(
    {
      cacheSeconds: CACHE_SECONDS,
      staleGraceSeconds: STALE_GRACE_SECONDS,
      effectiveDelaySeconds: EFFECTIVE_DELAY_SECONDS,
      retryAfterSeconds: RETRY_AFTER_SECONDS,
    },
    vectors.timing,
  );
});
