// Run by listeners.test.ts in a process of its own, so that its stderr holds every warning Node
// printed: a real DynamoDBClient (the SDK's own HTTP handler, which adds an abort listener to
// the signal of every request) against an HTTP server in this process that answers a STATE item
// of sharded(N) and one open saga row per shard. It prints what it saw as JSON.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getEventListeners } from 'node:events';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SagaIndex } from '../src/index.js';
import { docsJson } from './vectors.js';
import type { Item } from './fake.js';

const N = Number(process.argv[2] ?? '64');
const sharded = docsJson<{ routing: { name: string; item: Item }[] }>('contract-vectors.json').routing.find(
  (v) => v.name === 'sharded(16): from effectiveAt',
)?.item;
if (sharded === undefined) throw new Error('no sharded(16) routing vector');
const count = { N: String(N) };
const STATE: Item = { ...sharded, shardCount: count, previousMovingToShardCount: count, priorWriteShardCount: count };

let watched: AbortSignal | undefined;
let mostListeners = 0;
let requests = 0;

function answer(req: IncomingMessage, res: ServerResponse): void {
  let body = '';
  req.on('data', (chunk: Buffer) => (body += chunk.toString()));
  req.on('end', () => {
    requests += 1;
    if (watched !== undefined) mostListeners = Math.max(mostListeners, getEventListeners(watched, 'abort').length);
    const input = JSON.parse(body) as { IndexName?: string; ExpressionAttributeValues?: Record<string, { S: string }> };
    const pk = input.ExpressionAttributeValues?.[':pk']?.S ?? '';
    // A person's read asks for its own rows; an enumeration gets person p-<shard> of each shard.
    const prefix = input.ExpressionAttributeValues?.[':prefix']?.S;
    let output: unknown = { Items: [], Count: 0, ScannedCount: 0 };
    if (String(req.headers['x-amz-target']).endsWith('.GetItem')) output = { Item: STATE };
    else if (input.IndexName !== undefined && pk.startsWith('RenewalSaga#')) {
      const personId = prefix === undefined ? `p-${pk.slice('RenewalSaga#'.length)}` : prefix.slice(0, -1);
      const row = {
        PK: { S: `RSAGA#s-${personId}` },
        SK: { S: 'META' },
        entityType: { S: 'RenewalSaga' },
        sagaId: { S: `s-${personId}` },
        personId: { S: personId },
        openedAt: { S: '2026-07-10T12:00:00.000Z' },
        state: { S: 'OPENED' },
        GSI4PK: { S: pk },
        GSI4SK: { S: `${personId}#2026-07-10T12:00:00.000Z` },
      };
      output = { Items: [row], Count: 1, ScannedCount: 1 };
    }
    // A little latency, so the requests of a call are really in flight together.
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(output));
    }, 2);
  });
}

async function main(): Promise<void> {
  const server = createServer(answer);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const client = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: `http://127.0.0.1:${port}`,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const index = new SagaIndex({ client, tableName: 'sagas' });
  const seen: Record<string, { rows: number; mostListeners: number; listenersAfter: number }> = {};
  const calls: [string, (signal: AbortSignal) => Promise<number>][] = [
    ['getAllOpenSagas', async (signal) => (await index.getAllOpenSagas({ signal })).length],
    ['getAllSagas', async (signal) => (await index.getAllSagas({ signal })).length],
    [
      'pagesOfOpenSagas',
      async (signal) => {
        let rows = 0;
        for await (const page of index.pagesOfOpenSagas({ signal })) rows += page.length;
        return rows;
      },
    ],
    [
      'pageOfOpenSagas',
      async (signal) => {
        let rows = 0;
        let cursor: string | null = null;
        do {
          const page: { rows: unknown[]; cursor: string | null } = await index.pageOfOpenSagas({ limit: 50, cursor, signal });
          rows += page.rows.length;
          cursor = page.cursor;
        } while (cursor !== null);
        return rows;
      },
    ],
    [
      'getSagasByPersons',
      async (signal) => {
        const ids = Array.from({ length: N }, (_, n) => `p-${n}`);
        return [...(await index.getSagasByPersons(ids, { signal })).values()].flat().length;
      },
    ],
  ];
  for (const [name, call] of calls) {
    for (const [kind, signal] of [
      ['AbortController', new AbortController().signal],
      ['AbortSignal.timeout', AbortSignal.timeout(60_000)],
    ] as const) {
      watched = signal;
      mostListeners = 0;
      const rows = await call(signal);
      seen[`${name} ${kind}`] = { rows, mostListeners, listenersAfter: getEventListeners(signal, 'abort').length };
    }
  }
  watched = undefined;
  client.destroy();
  server.close();
  process.stdout.write(JSON.stringify({ requests, seen }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
