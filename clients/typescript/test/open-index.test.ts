// The sparse open-saga index: the package stamps and reads it as the control record says, with
// the record's states taken from docs/contract-vectors.json (`openIndex`), never hand-made.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CursorLayoutChangedError,
  IncompleteEnumerationError,
  SagaIndex,
  describeState,
  shardOf,
  type Item,
  type SagaRow,
  type StateChange,
} from '../src/internal.js';
import { docsJson } from './vectors.js';
import { FakeDynamo, OPEN_INDEX, sagaRow } from './fake.js';

interface OpenIndexVector {
  name: string;
  state: Item | null;
  history: Item[];
  now: string;
}
const cases = new Map(
  docsJson<{ openIndex: OpenIndexVector[] }>('contract-vectors.json').openIndex.map((v) => [v.name, v]),
);
function vector(name: string): OpenIndexVector {
  const found = cases.get(name);
  assert.ok(found, `no openIndex vector named ${name}`);
  return found;
}

const ADDING = vector('sharded(16), open index adding(16): from effectiveAt');
const OPEN = vector('sharded(16), open index open(16): from effectiveAt');
const REMOVING = vector('sharded(16), open index removing(16): from effectiveAt');
const LOST_OPEN = vector('STATE missing, newest open applied: the open index is read');
const effectiveAt = (v: OpenIndexVector): number => Date.parse(v.state?.effectiveAt?.S ?? v.now);

const gsi4 = (p: string): string => `RenewalSaga#${shardOf(p, 16)}`;
const openKey = (p: string): string => `RenewalSagaOpen#${shardOf(p, 16)}`;
const OPEN_KEYS = Array.from({ length: 16 }, (_, n) => `RenewalSagaOpen#${n}`);

/** A fake table in the vector's record state, with its saga rows. */
function table(v: OpenIndexVector, rows: Item[]): FakeDynamo {
  const fake = new FakeDynamo();
  if (v.state !== null) fake.put(v.state);
  for (const item of v.history) fake.put(item);
  for (const row of rows) fake.put(row);
  return fake;
}

function index(fake: FakeDynamo, nowMs: number, pageSize?: number): SagaIndex {
  return new SagaIndex({
    client: fake,
    tableName: 'sagas',
    cacheSeconds: 30,
    wallClock: () => nowMs,
    ...(pageSize === undefined ? {} : { pageSize }),
  });
}

/** Open rows stamped with their OpenSagaPK, an open row the backfill has not reached, closed rows. */
function rows(): Item[] {
  const out: Item[] = [];
  for (let n = 0; n < 40; n++) {
    const p = `person-${n}`;
    out.push(sagaRow(`open-${n}`, p, gsi4(p), 'NEGOTIATING', { OpenSagaPK: { S: openKey(p) } }));
    out.push(sagaRow(`closed-${n}`, p, gsi4(p), 'SIGNED'));
  }
  out.push(sagaRow('open-unstamped', 'late', gsi4('late'), 'OPENED'));
  return out;
}
const ids = (found: SagaRow[]): string[] => found.map((r) => r.sagaId).sort();
const indexNames = (fake: FakeDynamo): Set<unknown> => new Set(fake.queriesOf().map((q) => q.IndexName));

describe('open sagas: the open index while the record says open, GSI4 otherwise', () => {
  test('open: one Query per OpenSagaPK of the N, on the open index, and nothing else', async () => {
    const fake = table(OPEN, rows());
    const found = await index(fake, effectiveAt(OPEN) + 1).getAllOpenSagas();
    assert.deepEqual(ids(found), Array.from({ length: 40 }, (_, n) => `open-${n}`).sort());
    const queries = fake.queriesOf();
    assert.deepEqual(indexNames(fake), new Set([OPEN_INDEX]));
    assert.deepEqual(
      queries.map((q) => (q.ExpressionAttributeValues as Item)[':pk']?.S).sort(),
      [...OPEN_KEYS].sort(),
    );
    for (const q of queries) assert.equal((q.ExpressionAttributeNames as Record<string, string>)['#pk'], 'OpenSagaPK');
    // The rows come sorted as every enumeration's: by GSI4SK, then PK, SK.
    const sortKeys = found.map((r) => r.GSI4SK);
    assert.deepEqual(sortKeys, [...sortKeys].sort());
  });

  test('open: the page iterator reads the same keys and rows', async () => {
    const fake = table(OPEN, rows());
    const seen: SagaRow[] = [];
    for await (const page of index(fake, effectiveAt(OPEN) + 1, 3).pagesOfOpenSagas()) seen.push(...page);
    assert.deepEqual(ids(seen), Array.from({ length: 40 }, (_, n) => `open-${n}`).sort());
    assert.deepEqual(indexNames(fake), new Set([OPEN_INDEX]));
  });

  test('open: a key that cannot be read fails the whole enumeration, naming it', async () => {
    for (const read of ['array', 'pages'] as const) {
      const fake = table(OPEN, rows());
      fake.failQueryOf.set('RenewalSagaOpen#7', Object.assign(new Error('throttled'), { name: 'ThrottlingException' }));
      const sagas = index(fake, effectiveAt(OPEN) + 1, 2);
      const run = async (): Promise<unknown> => {
        if (read === 'array') return sagas.getAllOpenSagas();
        for await (const _page of sagas.pagesOfOpenSagas()) {
          // drained: the failure must surface from the loop, never end it early
        }
        return undefined;
      };
      await assert.rejects(run(), (err: unknown) => {
        assert.ok(err instanceof IncompleteEnumerationError, String(err));
        assert.deepEqual([...err.failures.keys()], ['RenewalSagaOpen#7']);
        return true;
      });
    }
  });

  test('open: every saga and a by-person read stay on GSI4 (one Query for a person)', async () => {
    const fake = table(OPEN, rows());
    const sagas = index(fake, effectiveAt(OPEN) + 1);
    assert.equal((await sagas.getAllSagas()).length, 81);
    assert.deepEqual(indexNames(fake), new Set(['renewal-saga-person-index']));
    fake.sent = [];
    const mine = await sagas.getSagasByPerson('person-3');
    assert.deepEqual(ids(mine), ['closed-3', 'open-3']);
    assert.equal(fake.queriesOf().length, 1);
    assert.equal((fake.queriesOf()[0]?.ExpressionAttributeValues as Item)[':pk']?.S, gsi4('person-3'));
  });

  test('open: pages of the open index concatenate to every open saga once, resumed mid-key', async () => {
    const fake = table(OPEN, rows());
    const sagas = index(fake, effectiveAt(OPEN) + 1);
    const seen: string[] = [];
    let cursor: string | null = null;
    let midKey = 0;
    do {
      const page: { rows: SagaRow[]; cursor: string | null } = await sagas.pageOfOpenSagas({ limit: 3, cursor });
      seen.push(...page.rows.map((r) => r.sagaId));
      cursor = page.cursor;
      if (cursor !== null) {
        const document = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as {
          at: string;
          after: Record<string, string> | null;
        };
        assert.match(document.at, /^RenewalSagaOpen#\d+$/);
        if (document.after !== null) {
          midKey += 1;
          // The format is the one cursor format: the partition key's value in its first slot.
          assert.deepEqual(Object.keys(document.after), ['GSI4PK', 'GSI4SK', 'PK', 'SK']);
          assert.equal(document.after.GSI4PK, document.at);
        }
      }
    } while (cursor !== null);
    assert.ok(midKey > 0, 'some page ended inside a key');
    assert.deepEqual(seen.sort(), Array.from({ length: 40 }, (_, n) => `open-${n}`).sort());
    assert.deepEqual(indexNames(fake), new Set([OPEN_INDEX]));
    const resumed = fake.queriesOf().filter((q) => q.ExclusiveStartKey !== undefined);
    assert.ok(resumed.length > 0);
    for (const q of resumed) {
      assert.deepEqual(Object.keys(q.ExclusiveStartKey as Item).sort(), ['GSI4SK', 'OpenSagaPK', 'PK', 'SK']);
    }
  });

  test('a cursor taken while GSI4 was read is refused once reads switch to the open index', async () => {
    const fake = table(ADDING, rows());
    const first = await index(fake, effectiveAt(ADDING) + 1).pageOfOpenSagas({ limit: 3 });
    assert.ok(first.cursor !== null);
    const switched = table(OPEN, rows());
    await assert.rejects(
      index(switched, effectiveAt(OPEN) + 1).pageOfOpenSagas({ limit: 3, cursor: first.cursor }),
      CursorLayoutChangedError,
    );
    assert.equal(switched.queriesOf().length, 0);
  });

  for (const v of [ADDING, REMOVING]) {
    test(`${v.name}: open sagas are read over GSI4, unstamped ones included`, async () => {
      const fake = table(v, rows());
      const found = await index(fake, effectiveAt(v) + 1).getAllOpenSagas();
      assert.equal(found.length, 41);
      assert.ok(ids(found).includes('open-unstamped'));
      assert.deepEqual(indexNames(fake), new Set(['renewal-saga-person-index']));
    });
  }

  test('a deleted STATE item whose history reached open: the open index is read (never "never migrated")', async () => {
    const fake = table(LOST_OPEN, rows());
    const sagas = index(fake, Date.parse(LOST_OPEN.now));
    assert.equal((await sagas.state()).condition, 'missing');
    assert.equal((await sagas.getAllOpenSagas()).length, 40);
    assert.deepEqual(indexNames(fake), new Set([OPEN_INDEX]));
  });
});

describe('a running process follows the open index within T, with no deploy', () => {
  test('adding -> open: GSI4 until the cached state is T old, the open index from then on', async () => {
    const fake = table(ADDING, rows());
    let monotonic = 0;
    const changes: StateChange[] = [];
    const sagas = new SagaIndex({
      client: fake,
      tableName: 'sagas',
      cacheSeconds: 30,
      monotonicClock: () => monotonic,
      wallClock: () => effectiveAt(OPEN) + 1,
      onStateChange: (change) => changes.push(change),
    });
    // The unstamped open saga is only on GSI4: whether it comes back says which index was read.
    assert.ok(ids(await sagas.getAllOpenSagas()).includes('open-unstamped'));
    assert.ok(OPEN.state !== null);
    fake.put(OPEN.state); // an operator's `open-index set open`
    monotonic += 29_999;
    assert.equal((await sagas.getAllOpenSagas()).length, 41);
    assert.equal(await sagas.openEnumerationKeys(), null);
    monotonic += 1;
    const found = await sagas.getAllOpenSagas();
    assert.equal(found.length, 40);
    assert.ok(!ids(found).includes('open-unstamped'));
    assert.deepEqual(await sagas.openEnumerationKeys(), OPEN_KEYS);
    // Only the open index changed (the layout stayed sharded(16)), and the listener hears it.
    assert.equal(changes.length, 2);
    assert.equal(changes[1]?.previous?.openIndex.state, 'adding');
    assert.equal(changes[1]?.current.openIndex.state, 'open');
    assert.equal(changes[1]?.current.phase, changes[1]?.previous?.phase);
  });
});

describe('writeKeys: the OpenSagaPK a writer sets, or removes', () => {
  test('adding: the previous state (off) until effectiveAt, the key from then on', async () => {
    const at = effectiveAt(ADDING);
    const before = await index(table(ADDING, []), at - 1).writeKeys('p-1', '2026-07-10T12:00:00.000Z');
    assert.deepEqual(before, { GSI4PK: gsi4('p-1'), GSI4SK: 'p-1#2026-07-10T12:00:00.000Z' });
    const from = await index(table(ADDING, []), at).writeKeys('p-1', '2026-07-10T12:00:00.000Z');
    assert.deepEqual(from, {
      GSI4PK: gsi4('p-1'),
      GSI4SK: 'p-1#2026-07-10T12:00:00.000Z',
      OpenSagaPK: 'RenewalSagaOpen#14',
    });
  });

  test('a closed saga never gets the key, whatever the state: it is removed', async () => {
    const sagas = index(table(OPEN, []), effectiveAt(OPEN) + 1);
    for (const sagaState of ['SIGNED', 'EXPIRED', 'CANCELLED', 'anything-not-open']) {
      const keys = await sagas.writeKeys('p-1', '2026-07-10T12:00:00.000Z', { sagaState });
      assert.equal('OpenSagaPK' in keys, false, sagaState);
      const update = await sagas.keyUpdate('p-1', '2026-07-10T12:00:00.000Z', { sagaState });
      assert.deepEqual(update, { set: keys, remove: ['OpenSagaPK'] }, sagaState);
    }
    const open = await sagas.keyUpdate('p-1', '2026-07-10T12:00:00.000Z', { sagaState: 'NEGOTIATING' });
    assert.deepEqual(open, {
      set: { GSI4PK: gsi4('p-1'), GSI4SK: 'p-1#2026-07-10T12:00:00.000Z', OpenSagaPK: 'RenewalSagaOpen#14' },
      remove: [],
    });
    await assert.rejects(sagas.writeKeys('p-1', '2026-07-10T12:00:00.000Z', { sagaState: 7 as unknown as string }), TypeError);
  });

  test('removing: writers stop stamping at effectiveAt', async () => {
    const at = effectiveAt(REMOVING);
    assert.equal((await index(table(REMOVING, []), at - 1).writeKeys('p-1', '2026-07-10T12:00:00.000Z')).OpenSagaPK, 'RenewalSagaOpen#14');
    assert.equal((await index(table(REMOVING, []), at).writeKeys('p-1', '2026-07-10T12:00:00.000Z')).OpenSagaPK, undefined);
  });

  test('keysFor and openEnumerationKeys say the same', async () => {
    const sagas = index(table(OPEN, []), effectiveAt(OPEN) + 1);
    assert.equal((await sagas.keysFor('p-1')).openWriteKey, 'RenewalSagaOpen#14');
    assert.deepEqual(await sagas.openEnumerationKeys(), OPEN_KEYS);
    assert.equal(await index(table(ADDING, []), effectiveAt(ADDING) + 1).openEnumerationKeys(), null);
  });

  test('describeState names the open index unless it is off', async () => {
    assert.match(describeState(await index(table(OPEN, []), 0).state()), /^sharded: sharded\(16\), open index open\(16\) \(present, version \d+\)$/);
  });
});
