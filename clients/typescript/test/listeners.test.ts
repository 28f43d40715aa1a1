import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

test('an enumeration over 64 shards given an AbortSignal adds one listener to it, removes it, and prints no warning', () => {
  const child = join(import.meta.dirname, 'listeners-child.js');
  const run = spawnSync(process.execPath, [child, '64'], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(run.status, 0, run.stderr);
  // MaxListenersExceededWarning (or any other) is printed to stderr.
  assert.equal(run.stderr, '');
  const { requests, seen } = JSON.parse(run.stdout) as {
    requests: number;
    seen: Record<string, { rows: number; mostListeners: number; listenersAfter: number }>;
  };
  assert.ok(requests > 8 * 64, `${requests} requests`);
  const expected: Record<string, { rows: number; mostListeners: number; listenersAfter: number }> = {};
  for (const name of ['getAllOpenSagas', 'getAllSagas', 'pagesOfOpenSagas', 'pageOfOpenSagas', 'getSagasByPersons']) {
    for (const kind of ['AbortController', 'AbortSignal.timeout']) {
      expected[`${name} ${kind}`] = { rows: 64, mostListeners: 1, listenersAfter: 0 };
    }
  }
  assert.deepEqual(seen, expected);
});
