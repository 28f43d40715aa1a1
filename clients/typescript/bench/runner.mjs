// The package's side of bench/ts_vs_python.py: the same reads the Python side times, through the
// built package imported by its name, on the same table. It answers one JSON line per line read:
//
//   node bench/runner.mjs --endpoint URL --table NAME
//   > {"persons": [personId...]}   reads one round untimed (the control record's read, the
//   < {"ready": true}              connections, the JIT's first compilations), as Python does
//   > {"round": true}              reads every person once (getSagasByPerson), then enumerates
//   < {"byPerson": {...}, "open": {...}}   the open sagas once (getAllOpenSagas), timed
//
// so the bench can alternate the two sides round by round and a change in the machine's load
// falls on both. Each result: {"ms": [...], "requests": n, "rcu": x, "rows": n}, requests and
// RCU being the index Queries' (ReturnConsumedCapacity TOTAL). Exits 1 on a failure, with the
// error on stderr; 0 when its input ends.
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SagaIndex } from '@propflow/renewal-saga-index';

const argv = process.argv.slice(2);
const option = (name) => {
  const at = argv.indexOf(`--${name}`);
  if (at < 0 || argv[at + 1] === undefined) {
    console.error('usage: runner.mjs --endpoint URL --table NAME (then JSON lines on stdin)');
    process.exit(2);
  }
  return argv[at + 1];
};
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

async function round(persons) {
  const byPerson = { ms: [], requests: 0, rcu: 0, rows: 0 };
  const open = { ms: [], requests: 0, rcu: 0, rows: 0 };
  for (const p of persons) add(byPerson, await timed(async () => (await index.getSagasByPerson(p)).length));
  add(open, await timed(async () => (await index.getAllOpenSagas()).length));
  return { byPerson, open };
}

let persons = null;
try {
  for await (const line of createInterface({ input: process.stdin })) {
    const request = JSON.parse(line);
    if (Array.isArray(request.persons)) {
      persons = request.persons;
      await round(persons);
      process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
    } else if (request.round === true && persons !== null) {
      process.stdout.write(`${JSON.stringify(await round(persons))}\n`);
    } else {
      throw new Error(`expected {"persons": [...]} first, then {"round": true}; got ${line}`);
    }
  }
} catch (err) {
  console.error(String(err?.stack ?? err));
  process.exitCode = 1;
} finally {
  client.destroy();
}
