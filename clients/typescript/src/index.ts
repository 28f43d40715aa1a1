// @propflow/renewal-saga-index: read and write the renewal-saga GSI4 the way the control record
// says (docs/control-contract.md), with the shard contract (docs/shard-contract.md).
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ControlStateCache, readControlState, type CacheOptions } from './control.js';
import { IncompleteEnumerationError } from './errors.js';
import { gsi4sk, person, type Person } from './keys.js';
import { layoutName } from './layout.js';
import { quoted } from './person.js';
import {
  boundedAll,
  orderRows,
  queryPartition,
  sortKeyPerson,
  tableKey,
  type QueryTarget,
  type RawItem,
} from './reads.js';
import { enumerationStages, readKeys, writeKey, type ControlState } from './routing.js';
import { unmarshallItem, type Row } from './unmarshall.js';

export {
  ControlItemInvalidError,
  ControlRecordInvalidError,
  IncompleteEnumerationError,
  InvalidKeyError,
  InvalidPersonIdError,
  InvalidShardCountError,
  RecordUnavailableError,
  SagaIndexError,
  type RefusalKind,
} from './errors.js';
export { shardOf, validateShardCount, DEFAULT_SHARD_COUNT, MAX_SHARD_COUNT } from './shard.js';
export { validatePersonId, MAX_SORT_KEY_BYTES } from './person.js';
export { LEGACY_GSI4PK, gsi4sk, parseGsi4pk, parseGsi4sk, shardedGsi4pk } from './keys.js';
export { layoutName, type Layout, type Phase } from './layout.js';
export { parseStateItem, parseHistoryItem, type Transition, type StateRecord, type Item } from './record.js';
export {
  enumerationStages,
  missingState,
  presentState,
  readKeys,
  writeLayout,
  NEVER_MIGRATED,
  type ControlState,
  type RecordCondition,
} from './routing.js';
export {
  CACHE_SECONDS,
  STALE_GRACE_SECONDS,
  EFFECTIVE_DELAY_SECONDS,
  RETRY_AFTER_SECONDS,
  ControlStateCache,
  readControlState,
} from './control.js';
export type { Row } from './unmarshall.js';

/** The saga states that count as open (docs/data-model.md). */
export const OPEN_STATES: readonly string[] = Object.freeze([
  'OPENED',
  'PREPARING',
  'PREPARE_FAILED',
  'OFFER_SENT',
  'NEGOTIATING',
  'AWAITING_SIGNATURE',
]);

export const INDEX_NAME = 'renewal-saga-person-index';
export const DEFAULT_MAX_CONCURRENCY = 16;

export interface SagaIndexOptions extends CacheOptions {
  /** A DynamoDBClient (its own retry settings apply to every request). */
  readonly client: Pick<DynamoDBClient, 'send'>;
  readonly tableName: string;
  readonly indexName?: string;
  /** Queries in flight at once, per call (default 16). */
  readonly maxConcurrency?: number;
  /** Limit of each Query page (tests only). */
  readonly pageSize?: number;
  /** Epoch milliseconds of the wall clock the writers' switch is judged by (tests only). */
  readonly wallClock?: () => number;
}

/** The keys a writer stamps on a saga row now. */
export interface WriteKeys {
  readonly GSI4PK: string;
  readonly GSI4SK: string;
}

// One cache per process for each (client, table): several SagaIndex instances over the same
// client share one read per T, as the contract's per-process cache asks. Test options (a T or a
// clock of their own) get a private cache.
const SHARED = new WeakMap<object, Map<string, ControlStateCache>>();

export class SagaIndex {
  private readonly target: QueryTarget;
  private readonly cache: ControlStateCache;
  private readonly limit: number;
  private readonly wallClock: () => number;

  constructor(options: SagaIndexOptions) {
    const { client, tableName } = options;
    if (typeof tableName !== 'string' || tableName.length === 0) {
      throw new TypeError('tableName is required (a non-empty string)');
    }
    if (client === null || typeof client !== 'object' || typeof client.send !== 'function') {
      throw new TypeError('client is required (a DynamoDBClient)');
    }
    const limit = options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY;
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`maxConcurrency must be an integer >= 1, got ${limit}`);
    }
    if (options.pageSize !== undefined && (!Number.isInteger(options.pageSize) || options.pageSize < 1)) {
      throw new RangeError(`pageSize must be an integer >= 1, got ${options.pageSize}`);
    }
    this.target = {
      client,
      tableName,
      indexName: options.indexName ?? INDEX_NAME,
      pageSize: options.pageSize,
    };
    this.limit = limit;
    this.wallClock = options.wallClock ?? Date.now;
    const read = (): Promise<ControlState> => readControlState(client, tableName);
    const custom =
      options.cacheSeconds !== undefined ||
      options.staleGraceSeconds !== undefined ||
      options.monotonicClock !== undefined ||
      options.retryAfterSeconds !== undefined;
    if (custom) {
      this.cache = new ControlStateCache(read, options);
    } else {
      const perClient = SHARED.get(client) ?? new Map<string, ControlStateCache>();
      SHARED.set(client, perClient);
      const shared = perClient.get(tableName) ?? new ControlStateCache(read);
      perClient.set(tableName, shared);
      this.cache = shared;
    }
  }

  /** The control state this process follows now (read at most T ago). */
  async state(): Promise<ControlState> {
    return this.cache.get();
  }

  /** The keys a writer adds to its PutItem / UpdateItem of a saga row opened at `openedAt`. */
  async writeKeys(personId: string, openedAt: string): Promise<WriteKeys> {
    const sortKey = gsi4sk(personId, openedAt);
    const p = person(personId);
    const state = await this.cache.get();
    return { GSI4PK: writeKey(state, p, this.wallClock()), GSI4SK: sortKey };
  }

  /** The keys of one person now: the GSI4PK a writer stamps, the GSI4PKs a read queries in order. */
  async keysFor(personId: string): Promise<{ writeKey: string; readKeys: string[] }> {
    const p = person(personId);
    const state = await this.cache.get();
    return { writeKey: writeKey(state, p, this.wallClock()), readKeys: readKeys(state, p) };
  }

  /** The GSI4PKs an enumeration reads now, stage by stage. */
  async enumerationStages(): Promise<string[][]> {
    return enumerationStages(await this.cache.get());
  }

  /** That person's saga rows (unmarshalled): source key, then target key, exact person only. */
  async getSagasByPerson(personId: string): Promise<Row[]> {
    const p = person(personId);
    const state = await this.cache.get();
    return (await this.readPerson(state, p)).map(unmarshallItem);
  }

  /**
   * Every person's rows, keyed by personId, at most maxConcurrency Queries at once. Every id is
   * checked before any request; one failed read fails the whole call (nothing partial).
   */
  async getSagasByPersons(personIds: Iterable<string>): Promise<Map<string, Row[]>> {
    const ids = [...new Set(personIds)];
    const people = ids.map((id) => person(id));
    const state = await this.cache.get();
    const rows = await boundedAll(
      people,
      // Each person's Queries run one after the other, so this bounds the Queries in flight.
      this.limit,
      (p) => this.readPerson(state, p),
      (p) => `personId ${quoted(p.id)}`,
    );
    return new Map(ids.map((id, n) => [id, (rows[n] ?? []).map(unmarshallItem)]));
  }

  /** Every saga whose state is open; complete or IncompleteEnumerationError. */
  async getAllOpenSagas(): Promise<Row[]> {
    const rows = await this.enumerate();
    return rows.filter((r) => OPEN_STATES.includes(r.state?.S ?? '')).map(unmarshallItem);
  }

  /** Every saga; complete or IncompleteEnumerationError. */
  async getAllSagas(): Promise<Row[]> {
    return (await this.enumerate()).map(unmarshallItem);
  }

  private async readPerson(state: ControlState, p: Person): Promise<RawItem[]> {
    const merged = new Map<string, RawItem>();
    // Sequential on purpose: the key rows move away from is read to its end first.
    for (const key of readKeys(state, p)) {
      let items: RawItem[];
      try {
        items = await queryPartition(this.target, key, `${p.id}#`);
      } catch (err) {
        throw new IncompleteEnumerationError(new Map([[key, err]]));
      }
      for (const item of items) {
        // begins_with(personId + "#") also matches a person whose id extends this one.
        if (sortKeyPerson(item) === p.id) merged.set(tableKey(item), item);
      }
    }
    return orderRows([...merged.values()]);
  }

  private async enumerate(): Promise<RawItem[]> {
    const state = await this.cache.get();
    const merged = new Map<string, RawItem>();
    // Each stage is read to its end before the next starts; within a stage, in parallel.
    for (const stage of enumerationStages(state)) {
      const reads = await boundedAll(
        stage,
        this.limit,
        (key) => queryPartition(this.target, key),
        (key) => key,
      );
      // The later read wins: stage order, then key order within the stage.
      for (const items of reads) for (const item of items) merged.set(tableKey(item), item);
    }
    return orderRows([...merged.values()]);
  }
}

/** A short description of a state: its phase and layouts ("migrating: legacy -> sharded(16)"). */
export function describeState(state: ControlState): string {
  const moving = state.movingTo === null ? '' : ` -> ${layoutName(state.movingTo)}`;
  return `${state.phase}: ${layoutName(state.layout)}${moving} (${state.condition}, version ${state.version})`;
}

