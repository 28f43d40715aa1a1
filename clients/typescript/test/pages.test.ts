// Enumerations page by page, the open filter's place (on the server at rest, after the merge
// while rows move) and cancellation, against the fake client.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { IncompleteEnumerationError, SagaIndex, shardOf, validatePersonId, type Item, type SagaRow } from '../src/internal.js';
import { FakeDynamo, sagaRow } from './fake.js';
import { docsJson } from './vectors.js';

const routing = new Map(
  docsJson<{ routing: { name: string; item: Item }[] }>('contract-vectors.json').routing.map((v) => [v.name, v.item]),
);
const MIGRATING = routing.get('migrating(16): from effectiveAt') as Item;
const SHARDED = routing.get('sharded(16): from effectiveAt') as Item;
const SPLIT = routing.get('resharding 16 -> 32 (split): from effectiveAt') as Item;
const key = (p: string): string => `RenewalSaga#${shardOf(p, 16)}`;

function index(fake: FakeDynamo, options: { pageSize?: number; maxConcurrency?: number } = {}): SagaIndex {
  return new SagaIndex({ client: fake, tableName: 'sagas', cacheSeconds: 30, ...options });
}

async function collect(pages: AsyncIterable<SagaRow[]>): Promise<SagaRow[][]> {
  const out: SagaRow[][] = [];
  for await (const page of pages) out.push(page);
  return out;
}

const ids = (rows: readonly SagaRow[]): string[] => rows.map((r) => r.sagaId).sort();

function sharded(fake: FakeDynamo, count: number, state = (n: number) => (n % 3 === 0 ? 'SIGNED' : 'OPENED')): void {
  fake.put(SHARDED);
  for (let n = 0; n < count; n++) fake.put(sagaRow(`s-${n}`, `p-${n}`, key(`p-${n}`), state(n)));
}

describe('pages', () => {
  test('at rest: the pages hold every row once, the open ones filtered by the server', async () => {
    const fake = new FakeDynamo();
    sharded(fake, 30);
    const reader = index(fake, { pageSize: 2 });
    const all = await collect(reader.pagesOfAllSagas());
    assert.deepEqual(ids(all.flat()), ids(await reader.getAllSagas()));
    assert.equal(all.flat().length, 30);
    assert.ok(all.every((page) => page.length > 0 && page.length <= 2));
    fake.sent = [];
    const open = (await collect(reader.pagesOfOpenSagas())).flat();
    assert.deepEqual(ids(open), ids(await reader.getAllOpenSagas()));
    assert.equal(open.length, 20);
    assert.ok(fake.queriesOf().length > 0);
    for (const q of fake.queriesOf()) assert.match(String(q.FilterExpression), /^#state IN \(:s0, :s1, :s2, :s3, :s4, :s5\)$/);
  });

  test('memory is bounded: a page per partition reader waits, no more', async () => {
    const fake = new FakeDynamo();
    sharded(fake, 60);
    const reader = index(fake, { pageSize: 1, maxConcurrency: 2 });
    const pages = reader.pagesOfAllSagas();
    await pages.next();
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Two readers: the page handed out, and at most one more page fetched by each reader.
    assert.ok(fake.queriesOf().length <= 3, `${fake.queriesOf().length} pages read ahead`);
    await pages.return(undefined);
    assert.equal(fake.inFlight, 0);
  });

  test('mid-move: the later read wins and the open filter runs after the merge', async () => {
    const fake = new FakeDynamo();
    fake.put(MIGRATING);
    // The index still shows the row under the legacy key (open) and already under its shard key
    // (closed): the merge must keep the closed copy and report nothing open.
    fake.items.push(sagaRow('moving', 'p-1', 'RenewalSaga', 'OPENED'), sagaRow('moving', 'p-1', key('p-1'), 'SIGNED'));
    fake.put(sagaRow('waiting', 'p-2', 'RenewalSaga', 'NEGOTIATING'));
    fake.put(sagaRow('moved', 'p-3', key('p-3'), 'OPENED'));
    const reader = index(fake, { pageSize: 1 });
    const all = (await collect(reader.pagesOfAllSagas())).flat();
    assert.deepEqual(all.map((r) => [r.sagaId, r.state]).sort(), [
      ['moved', 'OPENED'],
      ['moving', 'SIGNED'],
      ['waiting', 'NEGOTIATING'],
    ]);
    assert.deepEqual(ids((await collect(reader.pagesOfOpenSagas())).flat()), ['moved', 'waiting']);
    assert.deepEqual(ids(await reader.getAllOpenSagas()), ['moved', 'waiting']);
    assert.ok(fake.queriesOf().every((q) => q.FilterExpression === undefined));
  });

  test('a split holds only the rows still to move; rows already home pass through at once', async () => {
    const fake = new FakeDynamo();
    fake.put(SPLIT);
    const people = Array.from({ length: 40 }, (_, n) => `p-${n}`);
    // Every row still under its sharded(16) key: those whose shard under 32 is the upper one
    // will move (and may come back newer from the target's read); the others are home.
    for (const p of people) fake.put(sagaRow(`s-${p}`, p, key(p)));
    const home = people.filter((p) => shardOf(p, 32) === shardOf(p, 16));
    assert.ok(home.length > 0 && home.length < people.length);
    const reader = index(fake, { maxConcurrency: 16 });
    const pages = reader.pagesOfAllSagas();
    const seenBeforeUpperKeys: string[] = [];
    for await (const page of pages) {
      const upperRead = fake.queriesOf().some((q) => Number((q.ExpressionAttributeValues as Item)[':pk']?.S?.split('#')[1]) >= 16);
      if (upperRead) break;
      seenBeforeUpperKeys.push(...page.map((r) => validatePersonId(r.personId)));
    }
    assert.deepEqual(seenBeforeUpperKeys.sort(), [...home].sort());
    assert.deepEqual(ids(await reader.getAllSagas()), people.map((p) => `s-${p}`).sort());
  });

  test('a failed partition throws from the loop: the iteration never ends quietly', async () => {
    const fake = new FakeDynamo();
    sharded(fake, 40);
    fake.failQueryOf.set('RenewalSaga#5', new Error('ThrottlingException'));
    const reader = index(fake, { pageSize: 1, maxConcurrency: 4 });
    let rows = 0;
    await assert.rejects(
      (async () => {
        for await (const page of reader.pagesOfAllSagas()) rows += page.length;
      })(),
      (err: unknown) => {
        assert.ok(err instanceof IncompleteEnumerationError);
        assert.deepEqual(err.partitions, ['RenewalSaga#5']);
        return true;
      },
    );
    assert.ok(rows < 40);
    assert.equal(fake.inFlight, 0);
  });
});

describe('cancellation', () => {
  test('every request carries the call signal', async () => {
    const fake = new FakeDynamo();
    sharded(fake, 5);
    const reader = index(fake);
    const { signal } = new AbortController();
    await reader.getAllSagas({ signal });
    await reader.getSagasByPerson('p-1', { signal });
    await reader.getSagasByPersons(['p-1', 'p-2'], { signal });
    for await (const page of reader.pagesOfOpenSagas({ signal })) assert.ok(page.length > 0);
    const queries = fake.sent.filter((s) => s.command === 'Query');
    assert.ok(queries.length > 16);
    // Every request has a signal of its own (the call's abort aborts it), never the caller's:
    // the SDK adds a listener to each request's signal.
    assert.ok(queries.every((s) => s.signal !== undefined && s.signal !== signal));
    assert.equal(new Set(queries.map((s) => s.signal)).size, queries.length);
  });

  test('an aborted signal rejects with its reason before any request', async () => {
    const fake = new FakeDynamo();
    sharded(fake, 5);
    const reader = index(fake);
    const controller = new AbortController();
    controller.abort(new Error('page closed'));
    for (const call of [
      () => reader.getAllSagas({ signal: controller.signal }),
      () => reader.getSagasByPerson('p-1', { signal: controller.signal }),
      () => reader.writeKeys('p-1', '2026-07-10T12:00:00.000Z', { signal: controller.signal }),
    ]) {
      await assert.rejects(call(), /page closed/);
    }
    assert.deepEqual(fake.sent, []);
    await assert.rejects(reader.getAllSagas({ signal: 'stop' as unknown as AbortSignal }), /signal must be an AbortSignal/);
  });

  test('an abort mid-enumeration aborts the requests in flight and rejects with the reason', async () => {
    const fake = new FakeDynamo();
    sharded(fake, 40);
    const reader = index(fake, { maxConcurrency: 4 });
    await reader.state();
    let release: () => void = () => undefined;
    fake.hold = new Promise((resolve) => {
      release = resolve;
    });
    const controller = new AbortController();
    const call = reader.getAllOpenSagas({ signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(fake.inFlight, 4);
    const sentBefore = fake.attempts;
    controller.abort(new Error('deadline'));
    await assert.rejects(call, /deadline/);
    assert.equal(fake.inFlight, 0);
    release();
    await new Promise((resolve) => setTimeout(resolve, 10));
    // The four held requests were aborted unanswered, and no partition was started after.
    assert.equal(fake.attempts, sentBefore);
    assert.equal(fake.queriesOf().length, 0);
  });

  test('breaking out of the loop stops the reads', async () => {
    const fake = new FakeDynamo();
    sharded(fake, 40);
    const reader = index(fake, { pageSize: 1, maxConcurrency: 4 });
    for await (const page of reader.pagesOfAllSagas()) {
      assert.equal(page.length, 1);
      break;
    }
    const read = fake.queriesOf().length;
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(fake.queriesOf().length, read);
    assert.ok(read < 40);
    assert.equal(fake.inFlight, 0);
  });
});
