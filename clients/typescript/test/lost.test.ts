// A lost record fails loudly (docs/control-contract.md, "A lost record"): with no STATE and no
// HISTORY item, a few shard keys are probed before "never migrated" is believed, so a table
// whose control partition was deleted after a migration is never read as an empty legacy key.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ControlRecordLostError, LOST_RECORD_PROBE_KEYS, readControlState } from '../src/control.js';
import { RecordUnavailableError, SagaIndex } from '../src/index.js';
import type { Item } from '../src/record.js';
import { FakeDynamo, sagaRow } from './fake.js';
import { docsJson } from './vectors.js';

describe('a lost control partition', () => {
  test('never migrated: the probe reads each key once, Limit 1, and finds nothing', async () => {
    const fake = new FakeDynamo();
    fake.put(sagaRow('l1', 'p-1', 'RenewalSaga'));
    const state = await readControlState(fake, 'sagas');
    assert.equal(state.condition, 'never-migrated');
    const probes = fake.queriesOf();
    assert.deepEqual(
      probes.map((q) => (q.ExpressionAttributeValues as Record<string, { S: string }>)[':pk']?.S),
      [...LOST_RECORD_PROBE_KEYS],
    );
    assert.ok(probes.every((q) => q.Limit === 1));
  });

  test('rows on a shard key and no control item: the read is refused, naming the row', async () => {
    const fake = new FakeDynamo();
    fake.put(sagaRow('s1', 'p-1', 'RenewalSaga#2'));
    await assert.rejects(readControlState(fake, 'sagas'), (err: unknown) => {
      assert.ok(err instanceof ControlRecordLostError);
      assert.match(err.message, /RenewalSaga#2 \(RSAGA#s1\)/);
      assert.match(err.message, /phase restore/);
      return true;
    });
    assert.equal(fake.queriesOf().length, 3); // stopped at the first row
  });

  test('a reader fails instead of answering an empty list from the legacy key', async () => {
    const fake = new FakeDynamo();
    for (const [n, key] of ['RenewalSaga#0', 'RenewalSaga#5', 'RenewalSaga#9'].entries()) {
      fake.put(sagaRow(`s${n}`, `p-${n}`, key));
    }
    const reader = new SagaIndex({ client: fake, tableName: 'sagas' });
    await assert.rejects(reader.getAllSagas(), (err: unknown) => {
      assert.ok(err instanceof RecordUnavailableError);
      assert.ok(err.cause instanceof ControlRecordLostError);
      return true;
    });
    await assert.rejects(reader.writeKeys('p-1', '2026-07-10T12:00:00.000Z'), RecordUnavailableError);
  });
});

interface RecordCase {
  name: string;
  state: Item | null;
  history: Item[];
  // The state followed, or the refusal of an item no reader follows (refused before any probe).
  expect: { version: number; probe: boolean } | { refusal: unknown };
}

// The lost-record rule from the shared vectors: with no STATE item, a state that reads only the
// legacy key is believed only after the shard keys are probed, history or not. A STATE write
// whose answer was lost can leave its applied move's intent marked abandoned: once STATE is gone,
// following the history must not send the reader to an empty legacy key.
describe('the lost-record rule over the contract vectors (rows on every shard key)', () => {
  const cases = docsJson<{ missingRecord: RecordCase[] }>('contract-vectors.json').missingRecord;
  assert.ok(cases.some((c) => 'probe' in c.expect && c.expect.probe && c.history.length > 0));
  for (const v of cases) {
    const expect = v.expect;
    if (!('probe' in expect)) continue;
    test(v.name, async () => {
      const fake = new FakeDynamo();
      if (v.state !== null) fake.put(v.state);
      for (const item of v.history) fake.put(item);
      for (const [n, key] of LOST_RECORD_PROBE_KEYS.entries()) fake.put(sagaRow(`s${n}`, `p-${n}`, key));
      if (expect.probe) {
        await assert.rejects(readControlState(fake, 'sagas'), (err: unknown) => {
          assert.ok(err instanceof ControlRecordLostError);
          assert.match(err.message, /RenewalSaga#0/);
          if (v.history.length > 0) assert.match(err.message, /the history \(newest: version \d+\)/);
          return true;
        });
        assert.equal(fake.queriesOf().length, 1);
      } else {
        assert.equal((await readControlState(fake, 'sagas')).version, expect.version);
        assert.equal(fake.queriesOf().length, 0);
      }
    });
  }
});
