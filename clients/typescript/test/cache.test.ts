import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ControlItemInvalidError,
  ControlRecordInvalidError,
  ControlStateCache,
  NEVER_MIGRATED,
  RecordUnavailableError,
  SagaIndex,
  type ControlState,
} from '../src/internal.js';
import { FakeDynamo } from './fake.js';

class Clock {
  ms = 1_000;
  now = (): number => this.ms;
  advance(seconds: number): void {
    this.ms += seconds * 1000;
  }
}

function reader(): { read: () => Promise<ControlState>; calls: () => number; fail: (e: Error | null) => void } {
  let calls = 0;
  let failure: Error | null = null;
  return {
    read: async () => {
      calls += 1;
      if (failure !== null) throw failure;
      return NEVER_MIGRATED;
    },
    calls: () => calls,
    fail: (e) => {
      failure = e;
    },
  };
}

describe('the control record cache', () => {
  test('one read per T: served while younger than T, re-read at T', async () => {
    const clock = new Clock();
    const r = reader();
    const cache = new ControlStateCache(r.read, { monotonicClock: clock.now });
    await cache.get();
    clock.advance(29.999);
    await cache.get();
    assert.equal(r.calls(), 1);
    clock.advance(0.001);
    await cache.get();
    assert.equal(r.calls(), 2);
  });

  test('one read in flight: concurrent callers await the same read', async () => {
    let release: (s: ControlState) => void = () => undefined;
    let calls = 0;
    const cache = new ControlStateCache(() => {
      calls += 1;
      return new Promise<ControlState>((resolve) => {
        release = resolve;
      });
    });
    const waiting = Array.from({ length: 10 }, () => cache.get());
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(calls, 1);
    release(NEVER_MIGRATED);
    const states = await Promise.all(waiting);
    assert.ok(states.every((s) => s === NEVER_MIGRATED));
    assert.equal(calls, 1);
  });

  test('a failed re-read serves the last good state until T + grace, then throws', async () => {
    const clock = new Clock();
    const r = reader();
    const cache = new ControlStateCache(r.read, { monotonicClock: clock.now });
    await cache.get();
    r.fail(new ControlRecordInvalidError('phase disagrees'));
    clock.advance(31);
    assert.equal(await cache.get(), NEVER_MIGRATED);
    clock.advance(28.9);
    assert.equal(await cache.get(), NEVER_MIGRATED);
    clock.advance(0.1);
    await assert.rejects(cache.get(), (err: unknown) => {
      assert.ok(err instanceof RecordUnavailableError);
      assert.match(err.message, /RSAGA_INDEX#CONTROL \/ STATE/);
      assert.match(err.message, /60\.0 s old \(limit 60 s\): ControlRecordInvalidError: phase disagrees/);
      return true;
    });
    r.fail(null);
    clock.advance(1);
    assert.equal(await cache.get(), NEVER_MIGRATED);
    assert.equal(cache.ageSeconds, 0);
  });

  test('a failed read is retried after a second, not by every call', async () => {
    const clock = new Clock();
    const r = reader();
    const cache = new ControlStateCache(r.read, { monotonicClock: clock.now });
    await cache.get();
    r.fail(new Error('throttled'));
    clock.advance(30);
    await cache.get();
    await cache.get();
    clock.advance(0.5);
    await cache.get();
    assert.equal(r.calls(), 2);
    clock.advance(0.5);
    await cache.get();
    assert.equal(r.calls(), 3);
  });

  test('no state read before: the failure throws at once, naming the record', async () => {
    const r = reader();
    r.fail(new Error('AccessDenied'));
    const cache = new ControlStateCache(r.read);
    await assert.rejects(cache.get(), {
      name: 'RecordUnavailableError',
      message:
        'the control record (RSAGA_INDEX#CONTROL / STATE) could not be read and no state was ' +
        'read before: Error: AccessDenied',
    });
  });

  test('T and the grace are options (tests only), and must be >= 0', async () => {
    const clock = new Clock();
    const r = reader();
    const cache = new ControlStateCache(r.read, { cacheSeconds: 1, monotonicClock: clock.now });
    await cache.get();
    clock.advance(1);
    await cache.get();
    assert.equal(r.calls(), 2);
    assert.throws(() => new ControlStateCache(r.read, { cacheSeconds: -1 }), /cacheSeconds must be a number >= 0/);
  });

  test('SagaIndex instances over one client and table share one read per T', async () => {
    const fake = new FakeDynamo();
    const a = new SagaIndex({ client: fake, tableName: 't' });
    const b = new SagaIndex({ client: fake, tableName: 't' });
    await a.state();
    await b.state();
    await b.writeKeys('p-1', '2026-07-10T12:00:00.000Z');
    assert.equal(fake.sent.filter((s) => s.command === 'GetItem').length, 1);
  });

  test('an unparseable STATE item with nothing to serve fails the read and queries nothing', async () => {
    const fake = new FakeDynamo();
    fake.put({
      PK: { S: 'RSAGA_INDEX#CONTROL' },
      SK: { S: 'STATE' },
      entityType: { S: 'RenewalSagaIndexControl' },
      layout: { S: 'diagonal' },
    });
    const index = new SagaIndex({ client: fake, tableName: 't', cacheSeconds: 30 });
    await assert.rejects(index.getAllSagas(), (err: unknown) => {
      assert.ok(err instanceof RecordUnavailableError);
      assert.ok(err.cause instanceof ControlItemInvalidError);
      assert.deepEqual([err.cause.kind, err.cause.attribute], ['invalid-value', 'layout']);
      assert.match(err.message, /layout must be 'legacy' or 'sharded', got \{"S":"diagonal"\}/);
      return true;
    });
    assert.deepEqual(fake.queriesOf(), []);
  });
});
