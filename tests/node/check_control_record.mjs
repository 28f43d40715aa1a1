// Read the control record with the AWS SDK for JavaScript v3 and derive the routing it asks
// for, following docs/control-contract.md only (no Python involved), for every person of
// docs/shard-vectors.json. The Python conformance test compares this with saga_index.layout_change.record.
//
//   node tests/node/check_control_record.mjs --endpoint URL --table NAME [--region R]
//        [--vectors path/to/shard-vectors.json]
//
// --endpoint defaults to AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL (unset: AWS itself);
// --table defaults to SAGA_TABLE_NAME; --region to AWS_REGION, else us-east-1.
// Prints one JSON object on stdout and exits 0; exits 1 naming the problem when the record
// does not follow the contract, 2 on a usage error.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DynamoDBClient, GetItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';

const CONTROL_PK = 'RSAGA_INDEX#CONTROL';
const STATE_SK = 'STATE';
const HISTORY_PREFIX = 'HISTORY#';
const LEGACY_GSI4PK = 'RenewalSaga';

class ContractError extends Error {}

function parseArgs(argv) {
  const options = {
    endpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB ?? process.env.AWS_ENDPOINT_URL,
    table: process.env.SAGA_TABLE_NAME,
    region: process.env.AWS_REGION ?? 'us-east-1',
    vectors: fileURLToPath(new URL('../../docs/shard-vectors.json', import.meta.url)),
  };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (!(name in options) || argv[i + 1] === undefined) {
      console.error(
        'usage: check_control_record.mjs --endpoint URL --table NAME [--region R] [--vectors PATH]',
      );
      process.exit(2);
    }
    options[name] = argv[i + 1];
  }
  if (!options.table) {
    console.error('no table: pass --table NAME or set SAGA_TABLE_NAME');
    process.exit(2);
  }
  return options;
}

// ---- the shard contract (docs/shard-contract.md), as tests/node/check_shard_vectors.mjs ----
const shard = (personId, n) =>
  createHash('sha256').update(personId, 'utf8').digest().readUInt32BE(0) % n;

// ---- attribute values: the record is flat (S, N, BOOL, L of S) ------------------------------
const str = (item, name) => {
  const value = item[name];
  if (value === undefined) return undefined;
  if (typeof value.S !== 'string') throw new ContractError(`${name} must be a string`);
  return value.S;
};
const num = (item, name) => {
  const value = item[name];
  if (value === undefined) return undefined;
  if (typeof value.N !== 'string' || !/^-?\d+$/.test(value.N)) {
    throw new ContractError(`${name} must be an integer number`);
  }
  return Number(value.N);
};

// ---- layouts ---------------------------------------------------------------------------------
function layout(item, kindName, countName) {
  const kind = str(item, kindName);
  const count = num(item, countName);
  if (kind === undefined) {
    if (count !== undefined) throw new ContractError(`${countName} set without ${kindName}`);
    return null;
  }
  if (kind === 'legacy') {
    if (count !== undefined) throw new ContractError(`${countName} must be absent for legacy`);
    return { kind, shardCount: null };
  }
  if (kind === 'sharded') {
    if (!(count >= 1 && count <= 1024 && (count & (count - 1)) === 0)) {
      throw new ContractError(`${countName} must be a power of two from 1 to 1024, got ${count}`);
    }
    return { kind, shardCount: count };
  }
  throw new ContractError(`${kindName} must be 'legacy' or 'sharded', got ${kind}`);
}
const same = (a, b) =>
  a !== null && b !== null && a.kind === b.kind && a.shardCount === b.shardCount;
const name = (l) => (l.kind === 'legacy' ? 'legacy' : `sharded(${l.shardCount})`);
const keyFor = (l, personId) =>
  l.kind === 'legacy' ? LEGACY_GSI4PK : `${LEGACY_GSI4PK}#${shard(personId, l.shardCount)}`;
const partitions = (l) =>
  l.kind === 'legacy'
    ? [LEGACY_GSI4PK]
    : Array.from({ length: l.shardCount }, (_, s) => `${LEGACY_GSI4PK}#${s}`);

function phaseOf(current, movingTo) {
  if (movingTo === null) return current.kind === 'sharded' ? 'sharded' : 'legacy';
  if (same(current, movingTo)) throw new ContractError('a state cannot move to its own layout');
  if (current.kind === 'legacy') return 'migrating';
  return movingTo.kind === 'sharded' ? 'resharding' : 'rolling-back';
}

// The transition attributes shared by the STATE item and every HISTORY item.
function transition(item) {
  const current = layout(item, 'layout', 'shardCount');
  if (current === null) throw new ContractError('layout is missing');
  const movingTo = layout(item, 'movingToLayout', 'movingToShardCount');
  const previous = layout(item, 'previousLayout', 'previousShardCount');
  const previousMovingTo = layout(item, 'previousMovingToLayout', 'previousMovingToShardCount');
  const phase = phaseOf(current, movingTo);
  if (str(item, 'phase') !== phase) {
    throw new ContractError(`phase ${str(item, 'phase')} disagrees with its layouts (${phase})`);
  }
  const version = num(item, 'version');
  if (!(version >= 1)) throw new ContractError(`version must be >= 1, got ${version}`);
  return {
    version,
    phase,
    current,
    movingTo,
    previous,
    previousMovingTo,
    effectiveAt: str(item, 'effectiveAt') ?? null,
  };
}

// ---- the routing rule (docs/control-contract.md, "Routing") ----------------------------------
function routing(source, target) {
  const moving = !same(source, target);
  const writeKey = (p) => keyFor(target, p);
  const readKeys = (p) => [...new Set([keyFor(source, p), keyFor(target, p)])];
  const sourceKeys = partitions(source);
  let stages = [sourceKeys];
  if (moving) {
    const targetKeys = partitions(target);
    const shared = new Set(sourceKeys.filter((k) => targetKeys.includes(k)));
    // A shared key is read with the source when the target is finer (rows only leave it),
    // with the target when the target is coarser (rows only enter it).
    const targetFiner = (target.shardCount ?? 0) > (source.shardCount ?? 0);
    const first =
      shared.size > 0 && !targetFiner ? sourceKeys.filter((k) => !shared.has(k)) : sourceKeys;
    const second = targetKeys.filter((k) => !first.includes(k));
    stages = [first, second].filter((stage) => stage.length > 0);
  }
  return { source, target, writeKey, readKeys, stages };
}

async function readRecord(client, table) {
  const key = { PK: { S: CONTROL_PK }, SK: { S: STATE_SK } };
  const got = await client.send(
    new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }),
  );
  if (got.Item) {
    if (str(got.Item, 'entityType') !== 'RenewalSagaIndexControl') {
      throw new ContractError(`STATE entityType is ${str(got.Item, 'entityType')}`);
    }
    const t = transition(got.Item);
    return { condition: 'present', t, route: routing(t.current, t.movingTo ?? t.current) };
  }
  const newest = await client.send(
    new QueryCommand({
      TableName: table,
      KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :prefix)',
      ExpressionAttributeNames: { '#pk': 'PK', '#sk': 'SK' },
      ExpressionAttributeValues: { ':pk': { S: CONTROL_PK }, ':prefix': { S: HISTORY_PREFIX } },
      ScanIndexForward: false,
      Limit: 1,
      ConsistentRead: true,
    }),
  );
  if (!newest.Items || newest.Items.length === 0) {
    const legacy = { kind: 'legacy', shardCount: null };
    const t = { version: 0, phase: 'legacy', current: legacy, movingTo: null, effectiveAt: null };
    return { condition: 'never-migrated', t, route: routing(legacy, legacy) };
  }
  // Deleted after a migration began: writers follow the newest transition's result, readers
  // read every layout it names, the side that is not the writers' first.
  const t = transition(newest.Items[0]);
  const target = t.movingTo ?? t.current;
  const others = [t.current, t.movingTo, t.previous, t.previousMovingTo].filter(
    (l) => l !== null && !same(l, target),
  );
  const distinct = others.filter((l, i) => others.findIndex((o) => same(o, l)) === i);
  if (distinct.length > 1) throw new ContractError('history names more than two layouts');
  return { condition: 'missing', t, route: routing(distinct[0] ?? target, target) };
}

const options = parseArgs(process.argv.slice(2));
const { vectors } = JSON.parse(readFileSync(options.vectors, 'utf8'));
const persons = [...new Set(vectors.map((v) => v.personId))];
const client = new DynamoDBClient({
  region: options.region,
  ...(options.endpoint ? { endpoint: options.endpoint } : {}),
});
try {
  const { condition, t, route } = await readRecord(client, options.table);
  const output = {
    condition,
    phase: t.phase,
    version: t.version,
    layout: name(t.current),
    movingTo: t.movingTo === null ? null : name(t.movingTo),
    effectiveAt: t.effectiveAt,
    routing: {
      source: name(route.source),
      target: name(route.target),
      enumerationStages: route.stages,
      persons: persons.map((personId) => ({
        personId,
        writeKey: route.writeKey(personId),
        readKeys: route.readKeys(personId),
      })),
    },
  };
  console.log(JSON.stringify(output));
} catch (err) {
  console.error(
    err instanceof ContractError
      ? `control record breaks the contract: ${err.message}`
      : String(err),
  );
  process.exit(1);
} finally {
  client.destroy();
}
