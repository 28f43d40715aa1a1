// @propflow/renewal-saga-index: read and write the renewal-saga GSI4 the way the control record
// says (docs/control-contract.md), with the shard contract (docs/shard-contract.md). This module
// is the package's whole public surface; test/surface.test.ts pins its names.
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { checkSignal, RequestScope, untilAborted } from './abort.js';
import { asConfigurationError } from './configuration.js';
import {
  ControlStateCache,
  readControlState,
  type CacheOptions,
  type StateChange,
  type StateChangeListener,
} from './control.js';
import { RecordUnavailableError } from './errors.js';
import { gsi4sk, OPEN_INDEX_NAME, OPEN_INDEX_PARTITION_KEY, person, type Person } from './keys.js';
import { keyFor, layoutName } from './layout.js';
import { openIndexName } from './open-index.js';
import { quoted } from './person.js';
import {
  boundedAll,
  enumerationPages,
  orderRows,
  queryPartition,
  readFailure,
  sortKeyPerson,
  tableKey,
  type EnumerationPlan,
  type QueryTarget,
  type RawItem,
} from './reads.js';
import {
  enumerationStages,
  openEnumerationKeys,
  openWriteKey,
  readKeys,
  writeKey,
  type ControlState,
} from './routing.js';
import { OPEN_STATES } from './states.js';
import { parseCursor, readPage, validateLimit } from './paging.js';
import type { Enumeration } from './cursor.js';
import type { SagaRow } from './rows.js';
import { unmarshallItem } from './unmarshall.js';

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
export { SagaIndexConfigurationError } from './configuration.js';
export {
  CursorLayoutChangedError,
  InvalidCursorError,
  PagingDuringMoveError,
  MAX_PAGE_LIMIT,
} from './cursor.js';
export { shardOf, DEFAULT_SHARD_COUNT, MAX_SHARD_COUNT } from './shard.js';
export { validatePersonId, MAX_SORT_KEY_BYTES } from './person.js';
export { layoutName, type Layout, type Phase } from './layout.js';
export { openIndexName, type OpenIndex, type OpenIndexState } from './open-index.js';
export { OPEN_INDEX_NAME, OPEN_INDEX_PARTITION_KEY } from './keys.js';
export type { Transition, StateRecord, Lease } from './record.js';
export type { ControlState, RecordCondition } from './routing.js';
export type { StateChange } from './control.js';
export {
  CACHE_SECONDS,
  STALE_GRACE_SECONDS,
  EFFECTIVE_DELAY_SECONDS,
  RETRY_AFTER_SECONDS,
} from './control.js';
export { OPEN_STATES } from './states.js';
export type { SagaRow } from './rows.js';

export const INDEX_NAME = 'renewal-saga-person-index';
export const DEFAULT_MAX_CONCURRENCY = 16;

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call: its requests are aborted and it rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

export interface SagaIndexOptions<Row extends SagaRow = SagaRow> extends CacheOptions {
  /** A DynamoDBClient (its own retry settings apply to every request). */
  readonly client: Pick<DynamoDBClient, 'send'>;
  readonly tableName: string;
  readonly indexName?: string;
  /** The sparse open-saga index (default `renewal-saga-open-index`), read while the record says `open`. */
  readonly openIndexName?: string;
  /** Queries in flight at once, per call (default 16). */
  readonly maxConcurrency?: number;
  /**
   * Turns each row into the service's row type (a schema's parse, say); it may throw, which
   * fails the call. Without it rows are returned as unmarshalled.
   */
  readonly parseRow?: (row: SagaRow) => Row;
  /**
   * Called when a read of the control record finds a state other than the one this process
   * routed by (the first read too, with `previous: null`): the layouts before and after. Writers
   * then switch at `current.effectiveAt`. It must not throw (an error it throws becomes a
   * process warning) and should return quickly.
   */
  readonly onStateChange?: (change: StateChange) => void;
  /** Limit of each Query page (tests only). */
  readonly pageSize?: number;
  /** Epoch milliseconds of the wall clock the writers' switch is judged by (tests only). */
  readonly wallClock?: () => number;
}

/** Options of a page: at most `limit` rows (1-1000), after `cursor` (the previous page's). */
export interface PageOptions extends CallOptions {
  readonly limit: number;
  /** The `cursor` of the previous page as given; absent or null for the first page. */
  readonly cursor?: string | null;
}

/** A page of an enumeration, and the cursor of the next one (null after the last page). */
export interface SagaPage<Row extends SagaRow = SagaRow> {
  readonly rows: Row[];
  readonly cursor: string | null;
}

/**
 * The keys a writer stamps on a saga row now: only attributes to SET, so the object can be
 * spread into a PutItem's item as it is.
 */
export interface WriteKeys {
  readonly GSI4PK: string;
  readonly GSI4SK: string;
  /**
   * The sparse open-saga index's key, present only when the row gets one: its saga is open
   * (`sagaState`) and the record says writers stamp it now. A row written without it must not
   * keep one: a PutItem leaves it out; an UpdateItem REMOVEs it (`keyUpdate` says so).
   */
  readonly OpenSagaPK?: string;
}

/** What an UpdateItem of a saga row does with the index keys: SET `set`, REMOVE `remove`. */
export interface KeyUpdate {
  readonly set: WriteKeys;
  /** `['OpenSagaPK']` when `set` holds none (a closed saga, or no open index being stamped). */
  readonly remove: readonly string[];
}

/** Options of writeKeys. */
export interface WriteKeysOptions extends CallOptions {
  /**
   * The saga state the write leaves the row in. A closed state (not in OPEN_STATES) gets no
   * OpenSagaPK whatever the record says: a closed saga never stays in the open index. Absent:
   * the row is taken to be open (a new saga); a writer that closes a saga must pass it.
   */
  readonly sagaState?: string;
}

// One cache per process for each (client, table): several SagaIndex instances over the same
// client share one read per T, as the contract's per-process cache asks. Test options (a T or a
// clock of their own) get a private cache.
const SHARED = new WeakMap<object, Map<string, ControlStateCache>>();

export class SagaIndex<Row extends SagaRow = SagaRow> {
  private readonly target: QueryTarget;
  private readonly openTarget: QueryTarget;
  private readonly cache: ControlStateCache;
  private readonly limit: number;
  private readonly wallClock: () => number;
  private readonly toRow: (item: RawItem) => Row;

  constructor(options: SagaIndexOptions<Row>) {
    const { client, tableName, parseRow, onStateChange } = options;
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
    for (const name of ['indexName', 'openIndexName'] as const) {
      const value = options[name];
      if (value !== undefined && (typeof value !== 'string' || value === '')) {
        throw new TypeError(`${name} must be a non-empty string`);
      }
    }
    for (const [name, value] of [
      ['parseRow', parseRow],
      ['onStateChange', onStateChange],
    ] as const) {
      if (value !== undefined && typeof value !== 'function') throw new TypeError(`${name} must be a function`);
    }
    this.target = {
      client,
      tableName,
      indexName: options.indexName ?? INDEX_NAME,
      pageSize: options.pageSize,
    };
    this.openTarget = {
      client,
      tableName,
      indexName: options.openIndexName ?? OPEN_INDEX_NAME,
      partitionKey: OPEN_INDEX_PARTITION_KEY,
      pageSize: options.pageSize,
    };
    this.limit = limit;
    this.wallClock = options.wallClock ?? Date.now;
    // Without parseRow, Row is SagaRow (the default) or a type the caller declared for the rows.
    this.toRow =
      parseRow === undefined
        ? (item) => unmarshallItem(item) as Row
        : (item) => parseRow(unmarshallItem(item) as SagaRow);
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
    if (onStateChange !== undefined) this.cache.subscribe(onStateChange as StateChangeListener);
  }

  /** The control state this process follows now (read at most T ago). */
  async state(options: CallOptions = {}): Promise<ControlState> {
    return this.current(checkSignal(options.signal));
  }

  /**
   * The keys a writer adds to its PutItem / UpdateItem of a saga row opened at `openedAt`, in
   * `sagaState` (absent: a new saga, open): GSI4PK and GSI4SK, and OpenSagaPK when the row gets one.
   */
  async writeKeys(personId: string, openedAt: string, options: WriteKeysOptions = {}): Promise<WriteKeys> {
    const signal = checkSignal(options.signal);
    const sortKey = gsi4sk(personId, openedAt);
    const p = person(personId);
    const open = sagaIsOpen(options.sagaState);
    const state = await this.current(signal);
    const now = this.wallClock();
    const openKey = open ? openWriteKey(state, p, now) : null;
    const keys = { GSI4PK: writeKey(state, p, now), GSI4SK: sortKey };
    return openKey === null ? keys : { ...keys, OpenSagaPK: openKey };
  }

  /**
   * writeKeys as an UpdateItem applies them: the attributes to SET, and OpenSagaPK to REMOVE
   * when the row gets none (a saga closing leaves the open index by losing it).
   */
  async keyUpdate(personId: string, openedAt: string, options: WriteKeysOptions = {}): Promise<KeyUpdate> {
    const set = await this.writeKeys(personId, openedAt, options);
    return { set, remove: set.OpenSagaPK === undefined ? [OPEN_INDEX_PARTITION_KEY] : [] };
  }

  /**
   * The keys of one person now: the GSI4PK a writer stamps, the GSI4PKs a read queries in order,
   * the OpenSagaPK a writer stamps on an open saga (null: none).
   */
  async keysFor(
    personId: string,
    options: CallOptions = {},
  ): Promise<{ writeKey: string; readKeys: string[]; openWriteKey: string | null }> {
    const signal = checkSignal(options.signal);
    const p = person(personId);
    const state = await this.current(signal);
    const now = this.wallClock();
    return { writeKey: writeKey(state, p, now), readKeys: readKeys(state, p), openWriteKey: openWriteKey(state, p, now) };
  }

  /** The GSI4PKs an enumeration reads now, stage by stage. */
  async enumerationStages(options: CallOptions = {}): Promise<string[][]> {
    return enumerationStages(await this.current(checkSignal(options.signal)));
  }

  /** The OpenSagaPKs an enumeration of open sagas reads now; null: it reads GSI4 (enumerationStages). */
  async openEnumerationKeys(options: CallOptions = {}): Promise<string[] | null> {
    return openEnumerationKeys(await this.current(checkSignal(options.signal)));
  }

  /** That person's saga rows: source key, then target key, exact person only. */
  async getSagasByPerson(personId: string, options: CallOptions = {}): Promise<Row[]> {
    const signal = checkSignal(options.signal);
    const p = person(personId);
    const state = await this.current(signal);
    const scope = new RequestScope(signal);
    try {
      return (await this.readPerson(state, p, scope)).map(this.toRow);
    } finally {
      scope.dispose();
    }
  }

  /**
   * Every person's rows, keyed by personId, at most maxConcurrency Queries at once. Every id is
   * checked before any request; one failed read fails the whole call (nothing partial).
   */
  async getSagasByPersons(personIds: Iterable<string>, options: CallOptions = {}): Promise<Map<string, Row[]>> {
    const signal = checkSignal(options.signal);
    const ids = [...new Set(personIds)];
    const people = ids.map((id) => person(id));
    const state = await this.current(signal);
    const scope = new RequestScope(signal);
    let rows: RawItem[][];
    try {
      rows = await boundedAll(
        people,
        // Each person's Queries run one after the other, so this bounds the Queries in flight.
        this.limit,
        (p) => this.readPerson(state, p, scope),
        (p) => `personId ${quoted(p.id)}`,
        this.target,
        signal,
      );
    } finally {
      scope.dispose();
    }
    return new Map(ids.map((id, n) => [id, (rows[n] ?? []).map(this.toRow)]));
  }

  /** Every saga whose state is open, sorted; complete or it throws. */
  async getAllOpenSagas(options: CallOptions = {}): Promise<Row[]> {
    return (await this.enumerate(true, checkSignal(options.signal))).map(this.toRow);
  }

  /** Every saga, sorted; complete or it throws. */
  async getAllSagas(options: CallOptions = {}): Promise<Row[]> {
    return (await this.enumerate(false, checkSignal(options.signal))).map(this.toRow);
  }

  /**
   * getAllOpenSagas page by page (`for await (const page of ...)`), in read order rather than
   * sorted. An iteration that ends without throwing has seen every open saga; a read that fails
   * throws from the loop (the pages before it were real rows, the enumeration is incomplete).
   */
  pagesOfOpenSagas(options: CallOptions = {}): AsyncGenerator<Row[], void, undefined> {
    return this.pages(true, checkSignal(options.signal));
  }

  /** getAllSagas page by page, as pagesOfOpenSagas. */
  pagesOfAllSagas(options: CallOptions = {}): AsyncGenerator<Row[], void, undefined> {
    return this.pages(false, checkSignal(options.signal));
  }

  /**
   * At most `limit` open sagas in read order, and the cursor of the next page (null after the
   * last one): "the next 50" of a list page. At rest only: while rows move it throws
   * PagingDuringMoveError (use getAllOpenSagas); a cursor taken under another layout throws
   * CursorLayoutChangedError, one that does not parse InvalidCursorError (before any request).
   */
  async pageOfOpenSagas(options: PageOptions): Promise<SagaPage<Row>> {
    return this.page('open', options);
  }

  /** pageOfOpenSagas for every saga. */
  async pageOfAllSagas(options: PageOptions): Promise<SagaPage<Row>> {
    return this.page('all', options);
  }

  private async page(of: Enumeration, options: PageOptions): Promise<SagaPage<Row>> {
    const signal = checkSignal(options.signal);
    const limit = validateLimit(options.limit);
    const cursor = parseCursor(options.cursor);
    const state = await this.current(signal);
    const [target, plan] = this.route(state, of === 'open');
    const page = await readPage(target, plan.stages, of, { limit, cursor, signal });
    return { rows: page.rows.map(this.toRow), cursor: page.cursor };
  }

  private async *pages(openOnly: boolean, signal: AbortSignal | undefined): AsyncGenerator<Row[], void, undefined> {
    const state = await this.current(signal);
    const options = { limit: this.limit, openOnly, signal };
    for await (const page of enumerationPages(...this.route(state, openOnly), options)) {
      yield page.map(this.toRow);
    }
  }

  private async enumerate(openOnly: boolean, signal: AbortSignal | undefined): Promise<RawItem[]> {
    const state = await this.current(signal);
    const items: RawItem[] = [];
    const options = { limit: this.limit, openOnly, signal };
    for await (const page of enumerationPages(...this.route(state, openOnly), options)) items.push(...page);
    return orderRows(items);
  }

  /**
   * The index an enumeration reads and its plan: the open index's keys (one stage: rows never
   * move between them) when it enumerates open sagas and the record says `open`, else GSI4's.
   */
  private route(state: ControlState, openOnly: boolean): [QueryTarget, EnumerationPlan] {
    const openKeys = openOnly ? openEnumerationKeys(state) : null;
    if (openKeys !== null) return [this.openTarget, { stages: [openKeys], targetKeyOf: () => null }];
    return [this.target, this.plan(state)];
  }

  private plan(state: ControlState): EnumerationPlan {
    return {
      stages: enumerationStages(state),
      targetKeyOf: (item) => {
        const id = sortKeyPerson(item);
        if (id === null) return null;
        try {
          return keyFor(state.target, person(id));
        } catch {
          return null;
        }
      },
    };
  }

  // The cached state; a configuration failure of the record's read (a missing table, a denied
  // GetItem) is reported as one rather than as an unavailable record.
  private async current(signal: AbortSignal | undefined): Promise<ControlState> {
    try {
      return await untilAborted(this.cache.get(), signal);
    } catch (err) {
      if (err instanceof RecordUnavailableError) {
        const configuration = asConfigurationError(err.cause, { tableName: this.target.tableName });
        if (configuration !== null) throw configuration;
      }
      throw err;
    }
  }

  private async readPerson(state: ControlState, p: Person, scope: RequestScope): Promise<RawItem[]> {
    const merged = new Map<string, RawItem>();
    // Sequential on purpose: the key rows move away from is read to its end first.
    for (const key of readKeys(state, p)) {
      let items: RawItem[];
      try {
        items = await queryPartition(this.target, { partition: key, prefix: `${p.id}#` }, scope);
      } catch (err) {
        throw readFailure(new Map([[key, err]]), this.target, scope.signal);
      }
      for (const item of items) {
        // begins_with(personId + "#") also matches a person whose id extends this one.
        if (sortKeyPerson(item) === p.id) merged.set(tableKey(item), item);
      }
    }
    return orderRows([...merged.values()]);
  }
}

/** Whether a saga in `sagaState` counts as open (an absent state: a new saga, open). */
function sagaIsOpen(sagaState: string | undefined): boolean {
  if (sagaState === undefined) return true;
  if (typeof sagaState !== 'string') throw new TypeError(`sagaState must be a string, got ${typeof sagaState}`);
  return OPEN_STATES.includes(sagaState);
}

/**
 * A short description of a state: its phase and layouts ("migrating: legacy -> sharded(16)"),
 * and the open-saga index's state unless it is off (", open index adding(16)").
 */
export function describeState(state: ControlState): string {
  const moving = state.movingTo === null ? '' : ` -> ${layoutName(state.movingTo)}`;
  const open = state.openIndex.state === 'off' ? '' : `, open index ${openIndexName(state.openIndex)}`;
  return `${state.phase}: ${layoutName(state.layout)}${moving}${open} (${state.condition}, version ${state.version})`;
}
