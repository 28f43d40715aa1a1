// An outside reader of the index: imports the built package by its name (Node resolves a
// package's own name through its `exports`, so this is the entry a service gets) as a service
// would, reads through it, writes rows stamped by writeKeys, and prints what it saw as JSON.
// tests/conformance/test_typescript_client.py compares that with the Python repository.
//
//   node conformance/reader.mjs --endpoint URL --table NAME < request.json
//
// request.json: {"persons": [personId...], "writes": [{"sagaId", "personId", "openedAt",
// "state"}...], "stampOnly": TABLE, "pageLimit": N}: each write goes to --table and, when stampOnly names a
// second table in the same state, to that table too (its own SagaIndex); prints {"state",
// "openReadKeys", "openPages" (pageOfOpenSagas's pages of pageLimit rows, when given), "all",
// "open", "pagedAll", "pagedOpen" (the page iterators' rows, in read order), "byPerson",
// "byPersons", "written"}. Or {"routes": {"tables": [...], "persons": [...],
// "now"}}: the routing each table's record gives those persons (at `now`, else the clock),
// with the open-saga index's keys (`openWriteKey`, `openReadKeys`). Exits 0; 1 with
// the error on stderr when a read fails, 2 on a usage error.
import { readFileSync } from 'node:fs';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import {
  ControlItemInvalidError,
  SagaIndex,
  SagaIndexError,
  layoutName,
  openIndexName,
} from '@propflow/renewal-saga-index';

function args(argv) {
  const options = { endpoint: undefined, table: undefined };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]?.replace(/^--/, '');
    if (!(name in options) || argv[i + 1] === undefined) {
      console.error('usage: reader.mjs --endpoint URL --table NAME < request.json');
      process.exit(2);
    }
    options[name] = argv[i + 1];
  }
  if (!options.endpoint || !options.table) {
    console.error('usage: reader.mjs --endpoint URL --table NAME < request.json');
    process.exit(2);
  }
  return options;
}

// Rows hold only JSON-compatible values here except sets and big integers.
const plain = (_key, value) => {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Set) return [...value].sort();
  return value;
};

const options = args(process.argv.slice(2));
const request = JSON.parse(readFileSync(0, 'utf8'));
const client = new DynamoDBClient({
  region: 'us-east-1',
  endpoint: options.endpoint,
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
const index = new SagaIndex({ client, tableName: options.table });

// A writer's PutItem of a new saga row, with the keys writeKeys gives now for its state (the
// GSI4 keys, and OpenSagaPK when an open saga gets one).
async function open(table, writer, w) {
  const keys = await writer.writeKeys(w.personId, w.openedAt, { sagaState: w.state });
  await client.send(
    new PutItemCommand({
      TableName: table,
        Item: {
        PK: { S: `RSAGA#${w.sagaId}` },
        SK: { S: 'META' },
        entityType: { S: 'RenewalSaga' },
        sagaId: { S: w.sagaId },
        personId: { S: w.personId },
        leaseId: { S: `lease-${w.sagaId}` },
        openedAt: { S: w.openedAt },
        updatedAt: { S: w.openedAt },
        state: { S: w.state },
        GSI4PK: { S: keys.GSI4PK },
        GSI4SK: { S: keys.GSI4SK },
        ...(keys.OpenSagaPK === undefined ? {} : { OpenSagaPK: { S: keys.OpenSagaPK } }),
      },
      ConditionExpression: 'attribute_not_exists(PK)',
    }),
  );
  return keys;
}

// The routing of each table's record, for every person asked: {table: {state, persons,
// stages} or {error, refusal}}.
async function routes({ tables, persons, now }) {
  const out = {};
  for (const tableName of tables) {
    // `now` (ISO UTC) fixes the writers' wall clock, the test-only option, as Python's
    // routing_for(state, now) does.
    const clock = now === undefined ? {} : { wallClock: () => Date.parse(now) };
    const reader = new SagaIndex({ client, tableName, ...clock });
    try {
      const state = await reader.state();
      out[tableName] = {
        state: describeState(state),
        persons: await Promise.all(
          persons.map(async (personId) => ({ personId, ...(await reader.keysFor(personId)) })),
        ),
        stages: await reader.enumerationStages(),
        openReadKeys: await reader.openEnumerationKeys(),
      };
    } catch (err) {
      // A refused item: the kind and attribute the Python decoder reports for it.
      const refused = err.cause instanceof ControlItemInvalidError ? err.cause : null;
      out[tableName] = {
        error: err.name,
        refusal: refused && { kind: refused.kind, attribute: refused.attribute },
      };
    }
  }
  return out;
}

const describeState = (s) => ({
  condition: s.condition,
  phase: s.phase,
  version: s.version,
  layout: layoutName(s.layout),
  movingTo: s.movingTo === null ? null : layoutName(s.movingTo),
  source: layoutName(s.source),
  target: layoutName(s.target),
  openIndex: openIndexName(s.openIndex),
});

try {
  process.stdout.write(JSON.stringify(request.routes ? { routes: await routes(request.routes) } : await readAndWrite(), plain));
} catch (err) {
  console.error(err instanceof SagaIndexError ? `${err.name}: ${err.message}` : String(err?.stack ?? err));
  process.exitCode = 1;
} finally {
  client.destroy();
}

async function readAndWrite() {
  const written = [];
  const other = request.stampOnly ? new SagaIndex({ client, tableName: request.stampOnly }) : null;
  for (const w of request.writes ?? []) {
    written.push({ sagaId: w.sagaId, ...(await open(options.table, index, w)) });
    if (other !== null) await open(request.stampOnly, other, w);
  }
  const state = await index.state();
  const byPerson = {};
  for (const p of request.persons ?? []) byPerson[p] = await index.getSagasByPerson(p);
  const byPersons = Object.fromEntries(await index.getSagasByPersons(request.persons ?? []));
  const flat = async (pages) => {
    const rows = [];
    for await (const page of pages) rows.push(...page);
    return rows;
  };
  // pageOfOpenSagas to the end, `pageLimit` rows a page: each page's sagaIds and next cursor.
  const openPages = [];
  if (request.pageLimit !== undefined) {
    let cursor = null;
    do {
      const page = await index.pageOfOpenSagas({ limit: request.pageLimit, cursor });
      openPages.push({ sagaIds: page.rows.map((r) => r.sagaId), cursor: page.cursor });
      cursor = page.cursor;
    } while (cursor !== null);
  }
  return {
    state: describeState(state),
    openReadKeys: await index.openEnumerationKeys(),
    openPages,
    all: await index.getAllSagas(),
    open: await index.getAllOpenSagas(),
    pagedAll: await flat(index.pagesOfAllSagas()),
    pagedOpen: await flat(index.pagesOfOpenSagas()),
    byPerson,
    byPersons,
    written,
  };
}
