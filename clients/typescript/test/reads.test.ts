import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  IncompleteEnumerationError,
  InvalidPersonIdError,
  SagaIndex,
  shardOf,
  validatePersonId,
  type Item,
} from '../src/internal.js';
import { docsJson } from './vectors.js';
import { FakeDynamo, sagaRow } from './fake.js';

interface RoutingVector {
  name: string;
  item: Item;
}
const stateItems = new Map(
  docsJson<{ routing: RoutingVector[] }>('contract-vectors.json').routing.map((v) => [v.name, v.item]),
);
function stateItem(name: string): Item {
  const item = stateItems.get(name);
  assert.ok(item, `no routing vector named ${name}`);
  return item;
}
const MIGRATING = stateItem('migrating(16): from effectiveAt');
const SHARDED = stateItem('sharded(16): from effectiveAt');
const EFFECTIVE_AT = Date.parse(MIGRATING.effectiveAt?.S ?? '');
const key = (p: string): string => `RenewalSaga#${shardOf(p, 16)}`;

function index(fake: FakeDynamo, options: { pageSize?: number; maxConcurrency?: number; now?: number } = {}): SagaIndex {
  return new SagaIndex({
    client: fake,
    tableName: 'sagas',
    cacheSeconds: 30,
    wallClock: () => options.now ?? EFFECTIVE_AT + 1,
    ...(options.pageSize === undefined ? {} : { pageSize: options.pageSize }),
    ...(options.maxConcurrency === undefined ? {} : { maxConcurrency: options.maxConcurrency }),
  });
}

describe('reads against a fake DynamoDB', () => {
  test('every page of every partition, as plain objects', async () => {
    const fake = new FakeDynamo();
    for (let n = 0; n < 5; n++) fake.put(sagaRow(`s-${n}`, `p-${n}`, 'RenewalSaga', 'OPENED', { amount: { N: '12.5' } }));
    const rows = await index(fake, { pageSize: 2 }).getAllSagas();
    assert.equal(rows.length, 5);
    assert.equal(fake.queriesOf('RenewalSaga').length, 3);
    assert.deepEqual(rows[0], {
      PK: 'RSAGA#s-0',
      SK: 'META',
      entityType: 'RenewalSaga',
      sagaId: 's-0',
      personId: 'p-0',
      state: 'OPENED',
      openedAt: '2026-07-10T12:00:00.000Z',
      GSI4PK: 'RenewalSaga',
      GSI4SK: 'p-0#2026-07-10T12:00:00.000Z',
      amount: 12.5,
    });
  });

  test('a row without a usable personId comes back as stored, typed unknown', async () => {
    const fake = new FakeDynamo();
    const { personId: _dropped, ...missing } = sagaRow('s-missing', 'p-1', 'RenewalSaga');
    fake.put(missing);
    fake.put(sagaRow('s-number', 'p-2', 'RenewalSaga', 'OPENED', { personId: { N: '42' } }));
    fake.put(sagaRow('s-ok', 'p-3', 'RenewalSaga'));
    const rows = await index(fake).getAllSagas();
    assert.deepEqual(
      rows.map((r) => [r.sagaId, r.personId]),
      [['s-missing', undefined], ['s-number', 42], ['s-ok', 'p-3']],
    );
    const [row] = rows;
    assert.ok(row !== undefined);
    // @ts-expect-error the type says what the row may hold: not necessarily a string
    const unchecked: string = row.personId;
    assert.equal(unchecked, undefined);
    assert.throws(() => validatePersonId(row.personId), InvalidPersonIdError);
  });

  test('migrating: the legacy stage is read to its end before any shard key', async () => {
    const fake = new FakeDynamo();
    fake.put(MIGRATING);
    for (let n = 0; n < 3; n++) fake.put(sagaRow(`old-${n}`, `p-${n}`, 'RenewalSaga'));
    fake.put(sagaRow('new', 'alice', key('alice'), 'NEGOTIATING'));
    const rows = await index(fake, { pageSize: 1 }).getAllSagas();
    assert.deepEqual(rows.map((r) => r.sagaId).sort(), ['new', 'old-0', 'old-1', 'old-2']);
    const order = fake.queriesOf().map((q) => (q.ExpressionAttributeValues as Item)[':pk']?.S);
    assert.deepEqual(order.slice(0, 3), ['RenewalSaga', 'RenewalSaga', 'RenewalSaga']);
    assert.deepEqual(new Set(order.slice(3)).size, 16);
    assert.ok(!order.slice(3).includes('RenewalSaga'));
  });

  test('the open filter applies after the merge: a row closed under its new key is not open', async () => {
    const fake = new FakeDynamo();
    fake.put(MIGRATING);
    const legacyCopy = sagaRow('s-1', 'p-1', 'RenewalSaga', 'OPENED');
    const movedCopy = sagaRow('s-1', 'p-1', key('p-1'), 'SIGNED');
    // GSI propagation: the index can still show the old copy under the old key while the new
    // one is visible under the new key. The fake holds both (same PK, SK) on purpose.
    fake.items.push(legacyCopy, movedCopy);
    const reader = index(fake);
    const all = await reader.getAllSagas();
    assert.deepEqual(all.map((r) => [r.PK, r.state]), [['RSAGA#s-1', 'SIGNED']]);
    assert.deepEqual(await reader.getAllOpenSagas(), []);
    const byPerson = await reader.getSagasByPerson('p-1');
    assert.deepEqual(byPerson.map((r) => r.state), ['SIGNED']);
    assert.ok(fake.queriesOf().every((q) => q.FilterExpression === undefined));
  });

  test('by person: source key then target key, only that exact person', async () => {
    const fake = new FakeDynamo();
    fake.put(MIGRATING);
    fake.put(sagaRow('a', 'tenant', 'RenewalSaga'));
    fake.put(sagaRow('b', 'tenant#42', 'RenewalSaga'));
    fake.put(sagaRow('c', 'tenant', key('tenant')));
    const rows = await index(fake).getSagasByPerson('tenant');
    assert.deepEqual(rows.map((r) => r.sagaId).sort(), ['a', 'c']);
    const asked = fake.queriesOf().map((q) => (q.ExpressionAttributeValues as Item)[':pk']?.S);
    assert.deepEqual(asked, ['RenewalSaga', key('tenant')]);
    assert.ok(fake.queriesOf().every((q) => (q.ExpressionAttributeValues as Item)[':prefix']?.S === 'tenant#'));
  });

  test('a failing partition throws IncompleteEnumerationError naming it, and returns nothing', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    fake.put(sagaRow('s-1', 'p-1', key('p-1')));
    fake.failQueryOf.set('RenewalSaga#3', new Error('ProvisionedThroughputExceededException'));
    fake.failQueryOf.set('RenewalSaga#9', new Error('ThrottlingException'));
    await assert.rejects(index(fake, { maxConcurrency: 16 }).getAllOpenSagas(), (err: unknown) => {
      assert.ok(err instanceof IncompleteEnumerationError);
      assert.deepEqual(err.partitions, ['RenewalSaga#3', 'RenewalSaga#9']);
      assert.match(err.message, /RenewalSaga#3: Error: ProvisionedThroughputExceededException/);
      return true;
    });
  });

  test('a failing source stage stops before the target stage', async () => {
    const fake = new FakeDynamo();
    fake.put(MIGRATING);
    fake.failQueryOf.set('RenewalSaga', new Error('timeout'));
    await assert.rejects(index(fake).getAllSagas(), IncompleteEnumerationError);
    assert.deepEqual(fake.queriesOf().map((q) => (q.ExpressionAttributeValues as Item)[':pk']?.S), ['RenewalSaga']);
  });

  test('bounded concurrency: enumerations and the by-persons fan-out', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    const persons = Array.from({ length: 40 }, (_, n) => `person-${n}`);
    for (const p of persons) fake.put(sagaRow(`s-${p}`, p, key(p)));
    const reader = index(fake, { maxConcurrency: 4 });
    assert.equal((await reader.getAllSagas()).length, 40);
    assert.ok(fake.maxInFlight <= 4 && fake.maxInFlight > 1, `max in flight ${fake.maxInFlight}`);
    fake.maxInFlight = 0;
    const byPerson = await reader.getSagasByPersons([...persons, persons[0] as string]);
    assert.equal(byPerson.size, 40);
    assert.deepEqual(byPerson.get('person-7')?.map((r) => r.sagaId), ['s-person-7']);
    assert.ok(fake.maxInFlight <= 4 && fake.maxInFlight > 1, `max in flight ${fake.maxInFlight}`);
  });

  test('by persons: one failed person fails the call, naming the person and the key', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    fake.failQueryOf.set(key('alice'), new Error('ThrottlingException'));
    await assert.rejects(index(fake).getSagasByPersons(['p-1', 'alice']), (err: unknown) => {
      assert.ok(err instanceof IncompleteEnumerationError);
      assert.deepEqual(err.partitions, [`personId 'alice': ${key('alice')}`]);
      return true;
    });
  });

  test('unusable person ids are refused before any request', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    const reader = index(fake);
    await assert.rejects(reader.getSagasByPersons(['p-1', '']), InvalidPersonIdError);
    await assert.rejects(reader.getSagasByPerson('\ud800'), /surrogates not allowed/);
    await assert.rejects(reader.writeKeys('p-1', ''), /openedAt must be a non-empty ISO-8601 string/);
    assert.deepEqual(fake.sent, []);
  });
});

describe('writeKeys', () => {
  const opened = '2026-07-10T12:00:00.000Z';
  const before = stateItem('migrating(16): before effectiveAt');

  test('before effectiveAt the prior layout, from effectiveAt the target', async () => {
    const at = Date.parse(before.effectiveAt?.S ?? '');
    const fake = new FakeDynamo();
    fake.put(before);
    let now = at - 1;
    const writer = new SagaIndex({ client: fake, tableName: 'sagas', cacheSeconds: 30, wallClock: () => now });
    assert.deepEqual(await writer.writeKeys('p-1', opened), { GSI4PK: 'RenewalSaga', GSI4SK: `p-1#${opened}` });
    now = at;
    // The same cached state switches at effectiveAt, without a re-read.
    assert.deepEqual(await writer.writeKeys('p-1', opened), { GSI4PK: 'RenewalSaga#14', GSI4SK: `p-1#${opened}` });
    assert.equal(fake.sent.filter((s) => s.command === 'GetItem').length, 1);
  });

  test('never migrated: the legacy key, after one history Query of the newest two', async () => {
    const fake = new FakeDynamo();
    const writer = index(fake);
    assert.deepEqual(await writer.writeKeys('alice', opened), { GSI4PK: 'RenewalSaga', GSI4SK: `alice#${opened}` });
    assert.equal((await writer.state()).condition, 'never-migrated');
    const history = fake.sent.filter((s) => s.command === 'Query' && s.input.IndexName === undefined);
    assert.equal(history.length, 1);
    assert.equal(history[0]?.input.ConsistentRead, true);
    assert.equal(history[0]?.input.ScanIndexForward, false);
    assert.equal(history[0]?.input.Limit, 2); // the newest two: an abandoned intent is skipped
  });
});
