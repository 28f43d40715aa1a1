// The package's side of bench/ts_vs_python.py: the same reads the Python side times, through the
// built package imported by its name, on the same table. Prints JSON and exits 0; 1 on a failure.
//
//   node bench/runner.mjs --endpoint URL --table NAME < request.json
//
// request.json: {"persons": [personId...], "rounds": N}. Each round reads every person once
// (getSagasByPerson), then enumerates the open sagas once (getAllOpenSagas); a first round is
// read untimed, as the Python side does (the control record's read, the connections, the JIT).
// Printed: {"byPerson": {"ms": [...], "requests": n, "rcu": x, "rows": n}, "open": {...}}, where
// requests and RCU are the index Queries' (ReturnConsumedCapacity TOTAL) summed over the rounds.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SagaIndex } from '@propflow/renewal-saga-index';

const argv = process.argv.slice(2);
const option = (name) => {
  const at = argv.indexOf(`--${name}`);
  if (at < 0 || argv[at + 1] === undefined) {
    console.error('usage: runner.mjs --endpoint URL --table NAME < request.json');
    process.exit(2);
  }
  return argv[at + 1];
};
const request = JSON.parse(readFileSync(0, 'utf8'));
const client = new DynamoDBClient({
  region: 'us-east-1',
  endpoint: option('endpoint'),
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
const meter = { requests: 0, rcu: 0 };
client.middlewareStack.add(
  (next, context) => async (args) => {
    const indexQuery = context.commandName === 'QueryCommand' && args.input.IndexName !== undefined;
    if (indexQuery) args.input.ReturnConsumedCapacity = 'TOTAL';
    const result = await next(args);
    if (indexQuery) {
      meter.requests += 1;
      meter.rcu += result.output.ConsumedCapacity?.CapacityUnits ?? 0;
    }
    return result;
  },
  { step: 'initialize', name: 'benchMeter' },
);
const index = new SagaIndex({ client, tableName: option('table') });

async function timed(call) {
  const before = { ...meter };
  const started = performance.now();
  const rows = await call();
  return { ms: performance.now() - started, requests: meter.requests - before.requests, rcu: meter.rcu - before.rcu, rows };
}

function add(total, one) {
  total.ms.push(one.ms);
  total.requests += one.requests;
  total.rcu += one.rcu;
  total.rows += one.rows;
}

try {
  const persons = request.persons;
  for (const p of persons) await index.getSagasByPerson(p);
  await index.getAllOpenSagas();
  const byPerson = { ms: [], requests: 0, rcu: 0, rows: 0 };
  const open = { ms: [], requests: 0, rcu: 0, rows: 0 };
  for (let round = 0; round < request.rounds; round++) {
    for (const p of persons) add(byPerson, await timed(async () => (await index.getSagasByPerson(p)).length));
    add(open, await timed(async () => (await index.getAllOpenSagas()).length));
  }
  process.stdout.write(JSON.stringify({ byPerson, open }));
} catch (err) {
  console.error(String(err?.stack ?? err));
  process.exitCode = 1;
} finally {
  client.destroy();
}
