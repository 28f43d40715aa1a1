// Reading the control record (docs/control-contract.md, "Missing or unreadable record") and
// the per-process cache every read and write of the index goes through ("T and effectiveAt").
import { GetItemCommand, QueryCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ControlRecordInvalidError, describeError, RecordUnavailableError } from './errors.js';
import { sameLayout } from './layout.js';
import { sameOpenIndex } from './open-index.js';
import {
  CONTROL_PK,
  HISTORY_SK_PREFIX,
  parseHistoryFlags,
  parseHistoryItem,
  parseStateItem,
  STATE_SK,
  type Item,
  type Transition,
} from './record.js';
import { missingState, NEVER_MIGRATED, presentState, type ControlState } from './routing.js';

/** T: every process re-reads the record at least this often. */
export const CACHE_SECONDS = 30;
/** When a re-read fails, the last good state is served for at most this much longer. */
export const STALE_GRACE_SECONDS = 30;
/** changedAt + this = effectiveAt (T + grace + the 15 s in-flight margin). */
export const EFFECTIVE_DELAY_SECONDS = 75;
/** A failed read is not retried sooner than this: a failing record is not hammered per call. */
export const RETRY_AFTER_SECONDS = 1;

type Send = Pick<DynamoDBClient, 'send'>;

/** A HISTORY item as the missing-record rule reads it: its transition, and whether a STATE
 * write of it was confirmed (`applied`; items written before intents existed lack it and count
 * as applied) or seen to fail (`abandoned`). */
interface HistoryEntry {
  readonly transition: Transition;
  readonly applied: boolean;
  readonly abandoned: boolean;
}

function historyEntry(item: Item): HistoryEntry {
  // The transition first, then the flags: the record's parts in the Python reader's order.
  return { transition: parseHistoryItem(item), ...parseHistoryFlags(item) };
}

/**
 * The HISTORY item a missing STATE is followed from, given the newest items first (as
 * record/history.py `restore_point`): an abandoned intent is skipped (never applied); the
 * newest applied item is followed; an undecided newest intent is followed unless it completes
 * a move (a completing intent is skipped for the state before it, which reads both layouts).
 */
export function restorePoint(newestFirst: readonly Item[]): Transition | null {
  const entries = newestFirst.map(historyEntry).filter((e) => e.applied || !e.abandoned);
  const newest = entries[0];
  if (newest === undefined) return null;
  const t = newest.transition;
  if (newest.applied || !completes(t) || entries.length < 2) return t;
  return entries[1]?.transition ?? t;
}

/**
 * A completing move: it stops reading a layout (the state it left was moving, the new one is
 * not), or completes the open index's addition (`adding` -> `open`: reads switch to it) or its
 * removal (`removing` -> `off`). An unconfirmed intent must never make a restore do that.
 */
function completes(t: Transition): boolean {
  if (!sameOpenIndex(t.openIndex, t.previousOpenIndex)) {
    const step = `${t.previousOpenIndex.state}->${t.openIndex.state}`;
    return step === 'adding->open' || step === 'removing->off';
  }
  return t.previousMovingTo !== null && t.movingTo === null;
}

/**
 * The one missing-record rule (docs/control-contract.md, "Missing or unreadable record"),
 * from the items as stored: the STATE item when there is one; else the HISTORY item
 * `restorePoint` picks from the newest two, as a missing state; else never migrated. The
 * contract vectors' `missingRecord` cases hold it to the Python rule.
 */
export function followedState(
  stateItem: Item | null | undefined,
  newestHistory: readonly Item[],
): ControlState {
  if (stateItem !== null && stateItem !== undefined) return presentState(parseStateItem(stateItem));
  const point = restorePoint(newestHistory.slice(0, 2));
  return point === null ? NEVER_MIGRATED : missingState(point);
}

/**
 * The lost-record rule (docs/control-contract.md, "A lost record"; record/history.py
 * `needs_lost_record_probe`): with no STATE item, a state that reads only the legacy key
 * (never migrated, an abandoned first intent, a legacy state from history) is believed only
 * after the shard keys are probed. A STATE write whose answer was lost can leave its applied
 * move's intent marked abandoned: once STATE is gone, the history alone would send every reader
 * to an empty legacy key. The contract vectors' `missingRecord` cases (`expect.probe`) hold it
 * to the Python rule.
 */
export function needsLostRecordProbe(state: ControlState): boolean {
  return state.condition !== 'present' && state.movingTo === null && state.layout.kind === 'legacy';
}

/** The index the lost-record probe reads (the package's INDEX_NAME). */
const DEFAULT_INDEX_NAME = 'renewal-saga-person-index';
/**
 * When the control partition holds nothing at all, these shard keys are probed before "never
 * migrated" is believed (as record/store.py LOST_RECORD_PROBE_KEYS): #0 is a key of every
 * sharded(N), and the first few keys of any N carry rows unless the table has very few
 * persons for its N.
 */
export const LOST_RECORD_PROBE_KEYS: readonly string[] = [0, 1, 2, 3].map((n) => `RenewalSaga#${n}`);

/**
 * No STATE item, and what the history leaves to follow reads only the legacy key (no HISTORY
 * item, an abandoned first intent, a completed rollback), but saga rows on shard keys: a move
 * was applied and its record lost. Reading the legacy key would answer from it as if that were
 * right, so the record is unreadable until `saga-index phase restore`.
 */
export class ControlRecordLostError extends ControlRecordInvalidError {}

async function refuseALostRecord(
  client: Send,
  tableName: string,
  indexName: string,
  historyVersion: number,
): Promise<void> {
  const seen =
    historyVersion === 0
      ? 'no STATE and no HISTORY item'
      : `no STATE item, and the history (newest: version ${historyVersion}) confirms no move ` +
        'away from the legacy key';
  let requests = 0;
  for (const key of LOST_RECORD_PROBE_KEYS) {
    requests += 1;
    const found = await client.send(
      new QueryCommand({
        TableName: tableName,
        IndexName: indexName,
        KeyConditionExpression: '#pk = :pk',
        ProjectionExpression: '#pk, #tpk',
        ExpressionAttributeNames: { '#pk': 'GSI4PK', '#tpk': 'PK' },
        ExpressionAttributeValues: { ':pk': { S: key } },
        Limit: 1,
      }),
    );
    const row = found.Items?.[0];
    if (row !== undefined) {
      throw new ControlRecordLostError(
        `the control record is lost: ${seen}, but 1 shard key(s) carry rows: ${key} ` +
          `(${row.PK?.S ?? '?'}) (${requests} queries read). A move was applied and its STATE ` +
          `item lost: reading the legacy key would miss every saga on the shard keys, so reads ` +
          `and writes fail until it is restored (saga-index phase restore)`,
      );
    }
  }
}

/**
 * One read of the record: a strongly consistent GetItem of the STATE item; when there is none,
 * one strongly consistent Query of the newest two HISTORY items decides, by `followedState`,
 * "never migrated" (none followed) or "missing" (someone deleted the STATE item). When the
 * state followed reads only the legacy key (`needsLostRecordProbe`), one Query (Limit 1) per
 * LOST_RECORD_PROBE_KEYS key, stopping at the first row, tells a legacy table from a lost
 * record (ControlRecordLostError).
 * Throws when a read fails or an item does not parse (ControlRecordInvalidError).
 */
export async function readControlState(
  client: Send,
  tableName: string,
  indexName: string = DEFAULT_INDEX_NAME,
): Promise<ControlState> {
  const got = await client.send(
    new GetItemCommand({
      TableName: tableName,
      Key: { PK: { S: CONTROL_PK }, SK: { S: STATE_SK } },
      ConsistentRead: true,
    }),
  );
  if (got.Item !== undefined) return presentState(parseStateItem(got.Item));
  const newest = await client.send(
    new QueryCommand({
      TableName: tableName,
      KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :prefix)',
      ExpressionAttributeNames: { '#pk': 'PK', '#sk': 'SK' },
      ExpressionAttributeValues: { ':pk': { S: CONTROL_PK }, ':prefix': { S: HISTORY_SK_PREFIX } },
      ScanIndexForward: false,
      Limit: 2,
      ConsistentRead: true,
    }),
  );
  const history = newest.Items ?? [];
  const state = followedState(null, history);
  if (needsLostRecordProbe(state)) {
    const newestVersion = history[0] === undefined ? 0 : historyEntry(history[0]).transition.version;
    await refuseALostRecord(client, tableName, indexName, newestVersion);
  }
  return state;
}

export interface CacheOptions {
  /** T in seconds (tests only; the contract's T is 30). */
  readonly cacheSeconds?: number;
  /** The stale grace in seconds (tests only; the contract's is 30). */
  readonly staleGraceSeconds?: number;
  /** Milliseconds of a monotonic clock (tests only; default performance.now). */
  readonly monotonicClock?: () => number;
  /** Seconds between a failed read and the next attempt (tests only; default 1). */
  readonly retryAfterSeconds?: number;
}

type Outcome = { ok: true } | { ok: false; error: unknown };

/** A read of the record found a state other than the one served before. */
export interface StateChange {
  /** The state served before; null on the first read. */
  readonly previous: ControlState | null;
  /** The state served from now on. */
  readonly current: ControlState;
}

export type StateChangeListener = (change: StateChange) => void;

/** Whether two states route alike and are the same record version. */
export function sameState(a: ControlState, b: ControlState): boolean {
  return (
    a.condition === b.condition &&
    a.version === b.version &&
    a.phase === b.phase &&
    sameLayout(a.layout, b.layout) &&
    sameLayout(a.movingTo, b.movingTo) &&
    sameOpenIndex(a.openIndex, b.openIndex)
  );
}

/**
 * The cached state of one table's record. Its age is measured on a monotonic clock, so a
 * wall-clock step can neither extend nor cut it. One read is in flight at a time and every
 * caller that arrives meanwhile awaits that read.
 */
export class ControlStateCache {
  private readonly cacheMs: number;
  private readonly maxServedMs: number;
  private readonly retryMs: number;
  private readonly now: () => number;
  private state: ControlState | null = null;
  private readAt = 0;
  private failedAt: number | null = null;
  private lastError: unknown = null;
  private inFlight: Promise<Outcome> | null = null;
  private readonly listeners = new Set<StateChangeListener>();

  constructor(
    private readonly read: () => Promise<ControlState>,
    options: CacheOptions = {},
  ) {
    const cache = options.cacheSeconds ?? CACHE_SECONDS;
    const grace = options.staleGraceSeconds ?? STALE_GRACE_SECONDS;
    const retry = options.retryAfterSeconds ?? RETRY_AFTER_SECONDS;
    for (const [name, value] of [
      ['cacheSeconds', cache],
      ['staleGraceSeconds', grace],
      ['retryAfterSeconds', retry],
    ] as const) {
      if (!Number.isFinite(value) || value < 0) {
        throw new RangeError(`${name} must be a number >= 0, got ${value}`);
      }
    }
    this.cacheMs = cache * 1000;
    this.maxServedMs = (cache + grace) * 1000;
    this.retryMs = retry * 1000;
    this.now = options.monotonicClock ?? (() => performance.now());
  }

  /** Seconds since the served state was read; null before the first good read. */
  get ageSeconds(): number | null {
    return this.state === null ? null : (this.now() - this.readAt) / 1000;
  }

  /**
   * Call `listener` after every read that finds a state different from the one served before
   * (the first read too, with `previous: null`). A listener that throws does not fail the read:
   * its error is emitted as a process warning. Returns the unsubscribe function.
   */
  subscribe(listener: StateChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The state, read at most T ago; re-read (once, shared) when older. */
  async get(): Promise<ControlState> {
    if (this.state !== null && this.now() - this.readAt < this.cacheMs) return this.state;
    if (this.inFlight === null) {
      if (this.failedAt !== null && this.now() - this.failedAt < this.retryMs) {
        return this.serveStale(this.lastError);
      }
      this.inFlight = this.refresh().finally(() => {
        this.inFlight = null;
      });
    }
    const outcome = await this.inFlight;
    if (outcome.ok && this.state !== null) return this.state;
    return this.serveStale(outcome.ok ? this.lastError : outcome.error);
  }

  private async refresh(): Promise<Outcome> {
    try {
      const state = await this.read();
      const previous = this.state;
      this.state = state;
      this.readAt = this.now();
      this.failedAt = null;
      this.lastError = null;
      if (previous === null || !sameState(previous, state)) this.notify({ previous, current: state });
      return { ok: true };
    } catch (error) {
      this.failedAt = this.now();
      this.lastError = error;
      return { ok: false, error };
    }
  }

  private notify(change: StateChange): void {
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch (err) {
        process.emitWarning(`onStateChange listener threw: ${describeError(err)}`, 'SagaIndexWarning');
      }
    }
  }

  private serveStale(error: unknown): ControlState {
    if (this.state !== null) {
      const age = this.now() - this.readAt;
      if (age < this.maxServedMs) return this.state;
      throw new RecordUnavailableError(
        `the control record (${CONTROL_PK} / ${STATE_SK}) could not be read and the last ` +
          `good state is ${(age / 1000).toFixed(1)} s old (limit ` +
          `${(this.maxServedMs / 1000).toFixed(0)} s): ${describeError(error)}`,
        { cause: error },
      );
    }
    throw new RecordUnavailableError(
      `the control record (${CONTROL_PK} / ${STATE_SK}) could not be read and no state was ` +
        `read before: ${describeError(error)}`,
      { cause: error },
    );
  }
}
