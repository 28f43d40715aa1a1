// Pages and cursors (pageOfAllSagas / pageOfOpenSagas) against the fake client: the pages of
// generated tables concatenate to the full read under any limit and N, a cursor is refused after
// a switch and while rows move, a cursor that does not parse is refused before any request, and
// the Python library's cursors (docs/cursor-vectors.json) are read and written byte for byte.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CursorLayoutChangedError,
  InvalidCursorError,
  PagingDuringMoveError,
  SagaIndex,
  shardOf,
  type Item,
  type SagaPage,
  type SagaRow,
} from '../src/internal.js';
import { decodeCursor, encodeCursor, planFingerprint, type Enumeration } from '../src/cursor.js';
import { FakeDynamo, sagaRow } from './fake.js';
import { docsJson } from './vectors.js';

const routing = new Map(
  docsJson<{ routing: { name: string; item: Item }[] }>('contract-vectors.json').routing.map((v) => [v.name, v.item]),
);
const LEGACY_AT_REST = routing.get('legacy after a rollback: from effectiveAt') as Item;
const SHARDED = routing.get('sharded(16): from effectiveAt') as Item;
const SPLIT = routing.get('resharding 16 -> 32 (split): from effectiveAt') as Item;
const MIGRATING = routing.get('migrating(16): from effectiveAt') as Item;
const STATES = ['OPENED', 'NEGOTIATING', 'SIGNED', 'DECLINED', 'EXPIRED'];

function index(fake: FakeDynamo, pageSize?: number): SagaIndex {
  // A private cache per index (a test option), so a new state item is read at once.
  return new SagaIndex({ client: fake, tableName: 'sagas', cacheSeconds: 30, ...(pageSize ? { pageSize } : {}) });
}

async function allPages(
  read: (o: { limit: number; cursor: string | null }) => Promise<SagaPage>,
  limit: number,
): Promise<SagaPage[]> {
  const pages: SagaPage[] = [];
  let cursor: string | null = null;
  do {
    const page: SagaPage = await read({ limit, cursor });
    pages.push(page);
    cursor = page.cursor;
  } while (cursor !== null);
  return pages;
}

const keyOf = (r: SagaRow): string => `${r.PK}|${r.SK}`;

// A small deterministic generator (mulberry32), so a failing case is reproduced by its seed.
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('pages and cursors', () => {
  test('any rows, N and limit: the pages concatenate to the full read, each saga once', async () => {
    const persons = ['p-1', 'alice', 'José', 'tenant#42', 'bob', 'p-2', '\u{1f600}'];
    for (let seed = 1; seed <= 120; seed++) {
      const next = random(seed);
      const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T;
      const fake = new FakeDynamo();
      fake.put(pick([LEGACY_AT_REST, SHARDED]));
      const legacy = fake.items[0] === LEGACY_AT_REST;
      const count = Math.floor(next() * 50);
      for (let n = 0; n < count; n++) {
        const person = pick(persons);
        const gsi4pk = legacy ? 'RenewalSaga' : `RenewalSaga#${shardOf(person, 16)}`;
        // Equal GSI4SK values on purpose: the table key orders them.
        fake.put(sagaRow(`s-${n}`, person, gsi4pk, pick(STATES)));
      }
      const limit = 1 + Math.floor(next() * 20);
      const reader = index(fake, next() < 0.5 ? undefined : 1 + Math.floor(next() * 6));
      for (const [of, full, page] of [
        ['all', () => reader.getAllSagas(), (o: { limit: number; cursor: string | null }) => reader.pageOfAllSagas(o)],
        ['open', () => reader.getAllOpenSagas(), (o: { limit: number; cursor: string | null }) => reader.pageOfOpenSagas(o)],
      ] as const) {
        const pages = await allPages(page, limit);
        const paged = pages.flatMap((p) => p.rows).map(keyOf);
        const where = `seed ${seed}, ${of}, limit ${limit}`;
        assert.equal(new Set(paged).size, paged.length, `${where}: a saga repeated`);
        assert.deepEqual([...paged].sort(), (await full()).map(keyOf).sort(), `${where}: pages != full read`);
        for (const p of pages) if (p.cursor !== null) assert.equal(p.rows.length, limit, where);
      }
    }
  });

  test('a cursor taken under one layout is refused after a switch, and while rows move', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    for (let n = 0; n < 10; n++) fake.put(sagaRow(`s-${n}`, `p-${n}`, `RenewalSaga#${shardOf(`p-${n}`, 16)}`));
    const first = await index(fake).pageOfAllSagas({ limit: 4 });
    assert.notEqual(first.cursor, null);

    fake.put(SPLIT);
    fake.sent = [];
    await assert.rejects(index(fake).pageOfAllSagas({ limit: 4, cursor: first.cursor }), PagingDuringMoveError);
    await assert.rejects(index(fake).pageOfOpenSagas({ limit: 4 }), /use the full enumeration/i);
    assert.equal(fake.queriesOf().length, 0, 'no index read while refusing');
    fake.put(MIGRATING);
    await assert.rejects(index(fake).pageOfAllSagas({ limit: 4 }), PagingDuringMoveError);

    fake.put(LEGACY_AT_REST);
    await assert.rejects(
      index(fake).pageOfAllSagas({ limit: 4, cursor: first.cursor }),
      (err: unknown) => err instanceof CursorLayoutChangedError && /another key plan/.test(err.message),
    );
  });

  test('a cursor that does not parse, or of the other enumeration, is refused before any request', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    fake.put(sagaRow('s-1', 'p-1', `RenewalSaga#${shardOf('p-1', 16)}`));
    fake.put(sagaRow('s-2', 'p-2', `RenewalSaga#${shardOf('p-2', 16)}`));
    for (const bad of ['', 'not a cursor!', 'e30', 'eyJ2IjoyfQ', 'x'.repeat(40_000), 'AAAA', 'A']) {
      fake.sent = [];
      await assert.rejects(index(fake).pageOfAllSagas({ limit: 5, cursor: bad }), InvalidCursorError, bad.slice(0, 20));
      assert.equal(fake.sent.length, 0, `${bad.slice(0, 20)}: a request was sent`);
    }
    const open = await index(fake).pageOfOpenSagas({ limit: 1 });
    assert.notEqual(open.cursor, null);
    await assert.rejects(index(fake).pageOfAllSagas({ limit: 1, cursor: open.cursor }), /'open' enumeration/);
    for (const limit of [0, -1, 1001, 2.5, Number.NaN]) {
      await assert.rejects(index(fake).pageOfAllSagas({ limit }), /limit must be an integer from 1 to 1000/);
    }
  });
});

interface CursorVectors {
  fingerprints: { name: string; stages: string[][]; fingerprint: string }[];
  cursors: {
    name: string;
    of: Enumeration;
    plan: string;
    at: string;
    after: { GSI4PK: string; GSI4SK: string; PK: string; SK: string } | null;
    cursor: string;
  }[];
  invalid: { name: string; cursor: string }[];
  pages: {
    name: string;
    stateItem: Item;
    items: Item[];
    of: Enumeration;
    limit: number;
    pages: { cursor: string | null; sagaIds: string[]; next: string | null }[];
  }[];
}

describe('the cursor format (docs/cursor-vectors.json, written by the Python library)', () => {
  const vectors = docsJson<CursorVectors>('cursor-vectors.json');

  test('the same fingerprint for the same stages', () => {
    for (const v of vectors.fingerprints) assert.equal(planFingerprint(v.stages), v.fingerprint, v.name);
  });

  test('every cursor decodes to its fields and encodes back to the same string', () => {
    assert.ok(vectors.cursors.length > 0);
    for (const v of vectors.cursors) {
      const decoded = decodeCursor(v.cursor);
      assert.deepEqual(decoded, { of: v.of, plan: v.plan, position: { at: v.at, after: v.after } }, v.name);
      assert.equal(encodeCursor(v.of, v.plan, { at: v.at, after: v.after }), v.cursor, v.name);
    }
  });

  test('every cursor the Python library refuses, this package refuses', () => {
    for (const v of vectors.invalid) assert.throws(() => decodeCursor(v.cursor), InvalidCursorError, v.name);
  });

  test("the Python library's pages, resumed here from its cursors, are the same pages", async () => {
    assert.ok(vectors.pages.length > 0);
    for (const v of vectors.pages) {
      const fake = new FakeDynamo();
      fake.put(v.stateItem);
      for (const item of v.items) fake.put(item);
      for (const expected of v.pages) {
        const options = { limit: v.limit, cursor: expected.cursor };
        const page = v.of === 'all' ? await index(fake).pageOfAllSagas(options) : await index(fake).pageOfOpenSagas(options);
        assert.deepEqual(page.rows.map((r) => r.sagaId), expected.sagaIds, v.name);
        assert.equal(page.cursor, expected.next, v.name);
      }
    }
  });
});
