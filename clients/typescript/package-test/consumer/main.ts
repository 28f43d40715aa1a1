// A service's use of the package, compiled by package-test/pack.test.mjs as an ES module and as
// CommonJS (NodeNext) and under Bundler resolution, then run as ESM and as CommonJS against a
// DynamoDBClient whose requests are answered in process: it prints what it saw as JSON.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import * as saga from '@propflow/renewal-saga-index';
import {
  IncompleteEnumerationError,
  OPEN_STATES,
  SagaIndex,
  SagaIndexConfigurationError,
  SagaIndexError,
  shardOf,
  type SagaRow,
  type StateChange,
} from '@propflow/renewal-saga-index';

interface Lease extends SagaRow {
  readonly leaseId: string;
}

const ROW = {
  PK: { S: 'RSAGA#s-1' },
  SK: { S: 'META' },
  entityType: { S: 'RenewalSaga' },
  sagaId: { S: 's-1' },
  personId: { S: 'p-1' },
  leaseId: { S: 'lease-1' },
  openedAt: { S: '2026-07-10T12:00:00.000Z' },
  state: { S: 'OPENED' },
  GSI4PK: { S: 'RenewalSaga' },
  GSI4SK: { S: 'p-1#2026-07-10T12:00:00.000Z' },
};

async function main(): Promise<void> {
  const client = new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });
  const commands: string[] = [];
  // Answers every request before it leaves the process: no STATE item, no history (a table
  // never migrated), one saga row under the legacy key and none on a shard key.
  client.middlewareStack.add(
    () => async (args) => {
      const input = args.input as {
        IndexName?: string;
        ExpressionAttributeValues?: Record<string, { S?: string }>;
      };
      const name = input.IndexName === undefined ? 'control' : 'index';
      commands.push(name);
      const keys = Object.values(input.ExpressionAttributeValues ?? {}).map((v) => v.S);
      const items = name === 'index' && keys.includes(ROW.GSI4PK.S) ? [ROW] : [];
      return { output: { $metadata: {}, Items: items }, response: {} } as never;
    },
    { step: 'initialize', name: 'answerInProcess' },
  );
  const changes: StateChange[] = [];
  const index = new SagaIndex({
    client,
    tableName: 'sagas',
    parseRow: (row): Lease => {
      if (typeof row.leaseId !== 'string') throw new TypeError(`${row.PK} has no leaseId`);
      return { ...row, leaseId: row.leaseId };
    },
    onStateChange: (change) => changes.push(change),
  });
  const controller = new AbortController();
  const open: Lease[] = await index.getAllOpenSagas({ signal: controller.signal });
  const pages: string[][] = [];
  for await (const page of index.pagesOfAllSagas({ signal: controller.signal })) {
    pages.push(page.map((row) => `${row.personId}:${row.leaseId}`));
  }
  const keys = await index.writeKeys('p-1', '2026-07-10T12:00:00.000Z');
  const error: SagaIndexError = new SagaIndexConfigurationError('x', 'AccessDeniedException', null);
  process.stdout.write(
    JSON.stringify({
      exports: Object.keys(saga).sort(),
      shard: shardOf('p-1', 16),
      open: open.map((row) => [row.sagaId, row.state, OPEN_STATES.includes(row.state)]),
      pages,
      keys,
      layouts: changes.map((c) => [c.previous?.phase ?? null, c.current.phase]),
      classes: [error instanceof SagaIndexError, error instanceof IncompleteEnumerationError],
      commands,
    }),
  );
  client.destroy();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
