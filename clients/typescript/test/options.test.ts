// Configuration errors, the state-change callback, typed rows, and the public surface.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as publicEntry from '../src/index.js';
import {
  IncompleteEnumerationError,
  RecordUnavailableError,
  SagaIndex,
  SagaIndexConfigurationError,
  layoutName,
  shardOf,
  type Item,
  type SagaRow,
  type StateChange,
} from '../src/internal.js';
import { FakeDynamo, sagaRow, serviceError } from './fake.js';
import { docsJson } from './vectors.js';

const routing = new Map(
  docsJson<{ routing: { name: string; item: Item }[] }>('contract-vectors.json').routing.map((v) => [v.name, v.item]),
);
const MIGRATING = routing.get('migrating(16): from effectiveAt') as Item;
const SHARDED = routing.get('sharded(16): from effectiveAt') as Item;

describe('configuration errors', () => {
  test('a missing index is a configuration error naming the fix, not a transient one', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    const missing = serviceError('ValidationException', 'The table does not have the specified index: wrong');
    for (let s = 0; s < 16; s++) fake.failQueryOf.set(`RenewalSaga#${s}`, missing);
    const reader = new SagaIndex({ client: fake, tableName: 'sagas', indexName: 'wrong', cacheSeconds: 30 });
    for (const call of [() => reader.getAllOpenSagas(), () => reader.getSagasByPerson('p-1'), () => reader.getSagasByPersons(['p-1'])]) {
      await assert.rejects(call(), (err: unknown) => {
        assert.ok(err instanceof SagaIndexConfigurationError);
        assert.ok(!(err instanceof IncompleteEnumerationError));
        assert.equal(err.errorName, 'ValidationException');
        assert.match(err.message, /check indexName \(default renewal-saga-person-index\)/);
        assert.match(err.message, /The table does not have the specified index: wrong/);
        return true;
      });
    }
  });

  test('a missing open index names openIndexName and its keys, not GSI4\'s', async () => {
    const fake = new FakeDynamo();
    const open = docsJson<{ openIndex: { name: string; state: Item | null }[] }>('contract-vectors.json').openIndex.find(
      (v) => v.name === 'sharded(16), open index open(16): from effectiveAt',
    )?.state;
    assert.ok(open !== undefined && open !== null);
    fake.put(open);
    const missing = serviceError('ValidationException', 'The table does not have the specified index: gone');
    for (let s = 0; s < 16; s++) fake.failQueryOf.set(`RenewalSagaOpen#${s}`, missing);
    const reader = new SagaIndex({ client: fake, tableName: 'sagas', openIndexName: 'gone', cacheSeconds: 30 });
    await assert.rejects(reader.getAllOpenSagas(), (err: unknown) => {
      assert.ok(err instanceof SagaIndexConfigurationError);
      assert.match(err.message, /refused the query of index "gone": check openIndexName \(default renewal-saga-open-index\)/);
      assert.match(err.message, /keyed OpenSagaPK \/ GSI4SK/);
      return true;
    });
    // By-person reads stay on GSI4, which is there.
    assert.deepEqual(await reader.getSagasByPerson('p-1'), []);
  });

  test('a missing table or a denied record read is a configuration error', async () => {
    for (const [name, fix] of [
      ['ResourceNotFoundException', /table "sagas" does not exist where the client looks/],
      ['AccessDeniedException', /grant the caller dynamodb:GetItem and dynamodb:Query/],
    ] as const) {
      const fake = new FakeDynamo();
      fake.failGetItem = serviceError(name, 'refused');
      const reader = new SagaIndex({ client: fake, tableName: 'sagas', cacheSeconds: 30 });
      await assert.rejects(reader.getAllSagas(), (err: unknown) => {
        assert.ok(err instanceof SagaIndexConfigurationError, String(err));
        assert.match(err.message, fix);
        assert.ok(err.cause instanceof Error && err.cause.name === name);
        return true;
      });
    }
  });

  test('a throttled record read stays RecordUnavailableError (transient)', async () => {
    const fake = new FakeDynamo();
    fake.failGetItem = serviceError('ProvisionedThroughputExceededException', 'slow down');
    const reader = new SagaIndex({ client: fake, tableName: 'sagas', cacheSeconds: 30 });
    await assert.rejects(reader.getAllSagas(), RecordUnavailableError);
  });
});

describe('onStateChange', () => {
  test('reports the first state, then each change with the old and new layout', async () => {
    const fake = new FakeDynamo();
    fake.put(MIGRATING);
    let now = 0;
    const changes: StateChange[] = [];
    const reader = new SagaIndex({
      client: fake,
      tableName: 'sagas',
      monotonicClock: () => now,
      onStateChange: (change) => changes.push(change),
    });
    await reader.state();
    now += 10_000;
    await reader.state();
    now += 30_000;
    await reader.state();
    assert.equal(changes.length, 1);
    fake.put(SHARDED);
    now += 30_000;
    await reader.writeKeys('p-1', '2026-07-10T12:00:00.000Z');
    assert.equal(changes.length, 2);
    const [first, second] = changes;
    assert.equal(first?.previous, null);
    assert.equal(first?.current.phase, 'migrating');
    assert.equal(second?.previous?.phase, 'migrating');
    assert.equal(layoutName(second?.previous?.movingTo ?? { kind: 'legacy' }), 'sharded(16)');
    assert.equal(second?.current.phase, 'sharded');
    assert.equal(layoutName(second?.current.layout ?? { kind: 'legacy' }), 'sharded(16)');
  });

  test('a callback that throws does not fail the read', async () => {
    const fake = new FakeDynamo();
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const reader = new SagaIndex({
        client: fake,
        tableName: 'sagas',
        cacheSeconds: 30,
        onStateChange: () => {
          throw new Error('logger down');
        },
      });
      assert.equal((await reader.state()).condition, 'never-migrated');
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(warnings, ['onStateChange listener threw: Error: logger down']);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('typed rows', () => {
  interface Saga extends SagaRow {
    readonly leaseId: string;
  }

  test('parseRow turns every row into the service type, and its errors fail the call', async () => {
    const fake = new FakeDynamo();
    fake.put(SHARDED);
    const key = `RenewalSaga#${shardOf('p-1', 16)}`;
    fake.put(sagaRow('s-1', 'p-1', key, 'OPENED', { leaseId: { S: 'lease-1' } }));
    const reader = new SagaIndex({
      client: fake,
      tableName: 'sagas',
      cacheSeconds: 30,
      parseRow: (row): Saga => {
        if (typeof row.leaseId !== 'string') throw new TypeError(`${row.PK} has no leaseId`);
        return { ...row, leaseId: row.leaseId };
      },
    });
    const [saga] = await reader.getSagasByPerson('p-1');
    assert.equal(saga?.leaseId, 'lease-1');
    fake.put(sagaRow('s-2', 'p-1', key, 'OPENED'));
    await assert.rejects(reader.getAllSagas(), /RSAGA#s-2 has no leaseId/);
  });

  test('options are checked', () => {
    const fake = new FakeDynamo();
    assert.throws(
      () => new SagaIndex({ client: fake, tableName: 't', parseRow: 'no' as unknown as (r: SagaRow) => SagaRow }),
      /parseRow must be a function/,
    );
    assert.throws(() => new SagaIndex({ client: fake, tableName: 't', indexName: '' }), /indexName must be a non-empty string/);
  });
});

describe('the public surface', () => {
  test('exactly these names are exported (internals stay inside the package)', () => {
    assert.deepEqual(Object.keys(publicEntry).sort(), [
      'CACHE_SECONDS',
      'ControlItemInvalidError',
      'ControlRecordInvalidError',
      'CursorLayoutChangedError',
      'DEFAULT_MAX_CONCURRENCY',
      'DEFAULT_SHARD_COUNT',
      'EFFECTIVE_DELAY_SECONDS',
      'INDEX_NAME',
      'IncompleteEnumerationError',
      'InvalidCursorError',
      'InvalidKeyError',
      'InvalidPersonIdError',
      'InvalidShardCountError',
      'MAX_PAGE_LIMIT',
      'MAX_SHARD_COUNT',
      'MAX_SORT_KEY_BYTES',
      'OPEN_INDEX_NAME',
      'OPEN_INDEX_PARTITION_KEY',
      'OPEN_STATES',
      'PagingDuringMoveError',
      'RETRY_AFTER_SECONDS',
      'RecordUnavailableError',
      'STALE_GRACE_SECONDS',
      'SagaIndex',
      'SagaIndexConfigurationError',
      'SagaIndexError',
      'describeState',
      'layoutName',
      'openIndexName',
      'shardOf',
      'validatePersonId',
    ]);
  });
});
