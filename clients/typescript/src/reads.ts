// Reading GSI4 along the routing (docs/control-contract.md, "Routing"), as the Python repository
// (lambdas/saga_index/store/repository.py) does: every page of every partition, the keys of one
// stage in parallel, merged on the table key (PK, SK) with the later read winning. Reads stream
// page by page, so an enumeration holds a page per partition in flight rather than the history.
import { QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { RequestScope } from './abort.js';
import { asConfigurationError } from './configuration.js';
import { IncompleteEnumerationError } from './errors.js';
import { parseGsi4sk } from './keys.js';
import { OPEN_STATES } from './states.js';

export type RawItem = Record<string, AttributeValue>;
type Send = Pick<DynamoDBClient, 'send'>;

export interface QueryTarget {
  readonly client: Send;
  readonly tableName: string;
  readonly indexName: string;
  /** The index's partition key attribute: GSI4PK (the default), or the open index's OpenSagaPK. */
  readonly partitionKey?: string | undefined;
  /** Limit of each Query page (tests; DynamoDB's own 1 MB page otherwise). */
  readonly pageSize?: number | undefined;
}

export interface PartitionQuery {
  /** The partition key's value: a GSI4PK, or an OpenSagaPK on the open index. */
  readonly partition: string;
  /** Only GSI4SK values starting with this (a person's reads). */
  readonly prefix?: string;
  /** Only rows in an open state, filtered by DynamoDB (it still charges for what it filters). */
  readonly openOnly?: boolean;
}

export function queryInput(target: QueryTarget, query: PartitionQuery): QueryCommand['input'] {
  const names: Record<string, string> = { '#pk': target.partitionKey ?? 'GSI4PK' };
  const values: Record<string, AttributeValue> = { ':pk': { S: query.partition } };
  let condition = '#pk = :pk';
  if (query.prefix !== undefined) {
    names['#sk'] = 'GSI4SK';
    values[':prefix'] = { S: query.prefix };
    condition += ' AND begins_with(#sk, :prefix)';
  }
  let filter: string | undefined;
  if (query.openOnly === true) {
    names['#state'] = 'state';
    OPEN_STATES.forEach((state, n) => {
      values[`:s${n}`] = { S: state };
    });
    filter = `#state IN (${OPEN_STATES.map((_, n) => `:s${n}`).join(', ')})`;
  }
  return {
    TableName: target.tableName,
    IndexName: target.indexName,
    KeyConditionExpression: condition,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
    ...(filter === undefined ? {} : { FilterExpression: filter }),
    ...(target.pageSize === undefined ? {} : { Limit: target.pageSize }),
  };
}

/** One partition of GSI4, page by page to its last page (empty pages included). */
export async function* partitionPages(
  target: QueryTarget,
  query: PartitionQuery,
  scope?: RequestScope,
): AsyncGenerator<RawItem[], void, undefined> {
  const input = queryInput(target, query);
  let start: RawItem | undefined;
  do {
    const command = new QueryCommand(start === undefined ? input : { ...input, ExclusiveStartKey: start });
    const page = await (scope === undefined
      ? target.client.send(command)
      : scope.run((abortSignal) => target.client.send(command, { abortSignal })));
    yield page.Items ?? [];
    start = page.LastEvaluatedKey;
  } while (start !== undefined && Object.keys(start).length > 0);
}

/** One partition to its last page, as one array. */
export async function queryPartition(
  target: QueryTarget,
  query: PartitionQuery,
  scope?: RequestScope,
): Promise<RawItem[]> {
  const items: RawItem[] = [];
  for await (const page of partitionPages(target, query, scope)) items.push(...page);
  return items;
}

/**
 * The error a read that lost `failures` (partition name -> error) throws: the caller's abort
 * reason when it aborted; a SagaIndexConfigurationError when any failure is one no retry fixes;
 * otherwise IncompleteEnumerationError naming every failed partition.
 */
export function readFailure(
  failures: ReadonlyMap<string, unknown>,
  target: QueryTarget,
  signal: AbortSignal | undefined,
): unknown {
  if (signal?.aborted === true) return signal.reason;
  for (const err of failures.values()) {
    const configuration = asConfigurationError(err, target);
    if (configuration !== null) return configuration;
  }
  return new IncompleteEnumerationError(failures);
}

/**
 * Run `work` over `inputs` with at most `limit` running at once. Resolves to every result in
 * input order, or rejects (readFailure) once every started task has settled; after a failure or
 * an abort no new task starts.
 */
export async function boundedAll<I, O>(
  inputs: readonly I[],
  limit: number,
  work: (input: I) => Promise<O>,
  nameOf: (input: I) => string,
  target: QueryTarget,
  signal?: AbortSignal,
): Promise<O[]> {
  const results: O[] = new Array<O>(inputs.length);
  const failures = new Map<string, unknown>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < inputs.length && failures.size === 0 && signal?.aborted !== true) {
      const at = next++;
      const input = inputs[at] as I;
      try {
        results[at] = await work(input);
      } catch (err) {
        if (err instanceof IncompleteEnumerationError) {
          for (const [name, e] of err.failures) failures.set(`${nameOf(input)}: ${name}`, e);
        } else {
          failures.set(nameOf(input), err);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, inputs.length) }, worker));
  if (failures.size > 0 || signal?.aborted === true) throw readFailure(failures, target, signal);
  return results;
}

type Step =
  | { readonly slot: number; readonly key: string; readonly result: IteratorResult<RawItem[], void> }
  | { readonly slot: number; readonly key: string; readonly error: unknown };

interface Reader {
  readonly pages: AsyncGenerator<RawItem[], void, undefined>;
  readonly pending: Promise<Step>;
}

/**
 * The pages of every partition of one stage, at most `limit` partitions read at once, each
 * reader fetching its next page while the consumer works on the last one (so at most `limit`
 * pages wait). A failed partition ends the stage: the readers in flight settle, no new page is
 * read, and the generator throws (readFailure) naming every partition that failed; nothing is
 * ever silently skipped. Stopping the iteration early aborts the requests still in flight.
 */
export async function* stagePages(
  target: QueryTarget,
  keys: readonly string[],
  options: { readonly limit: number; readonly openOnly: boolean; readonly signal?: AbortSignal | undefined },
): AsyncGenerator<RawItem[], void, undefined> {
  const scope = new RequestScope(options.signal);
  const readers = new Map<number, Reader>();
  const failures = new Map<string, unknown>();
  let next = 0;
  const advance = (slot: number, key: string, pages: AsyncGenerator<RawItem[], void, undefined>): void => {
    const pending = pages.next().then(
      (result): Step => ({ slot, key, result }),
      (error: unknown): Step => ({ slot, key, error }),
    );
    readers.set(slot, { pages, pending });
  };
  const start = (slot: number): void => {
    const key = keys[next++] as string;
    advance(slot, key, partitionPages(target, { partition: key, openOnly: options.openOnly }, scope));
  };
  try {
    for (let slot = 0; slot < Math.min(options.limit, keys.length); slot++) start(slot);
    while (readers.size > 0) {
      const step = await Promise.race([...readers.values()].map((r) => r.pending));
      const reader = readers.get(step.slot) as Reader;
      readers.delete(step.slot);
      if ('error' in step) {
        failures.set(step.key, step.error);
      } else if (step.result.done === true) {
        if (failures.size === 0 && next < keys.length) start(step.slot);
      } else if (failures.size > 0) {
        await reader.pages.return(undefined);
      } else {
        advance(step.slot, step.key, reader.pages);
        yield step.result.value;
      }
    }
    if (failures.size > 0 || options.signal?.aborted === true) {
      throw readFailure(failures, target, options.signal);
    }
  } finally {
    // Only reached with readers left when the consumer stopped early or a read threw.
    scope.abort();
    for (const reader of readers.values()) {
      await reader.pending;
      await reader.pages.return(undefined).catch(() => undefined);
    }
    scope.dispose();
  }
}

/** What an enumeration reads: its stages, and the key a row's person has in the target layout. */
export interface EnumerationPlan {
  readonly stages: readonly (readonly string[])[];
  /** The GSI4PK writers move this row to, or null when the row names no usable person. */
  readonly targetKeyOf: (item: RawItem) => string | null;
}

const DEFERRED_PAGE_ROWS = 1000;

export function isOpen(item: RawItem): boolean {
  return OPEN_STATES.includes(item.state?.S ?? '');
}

/**
 * Every row of the enumeration, page by page, with the Python repository's semantics: stages in
 * order, each read to its end before the next starts, rows de-duplicated on (PK, SK) with the
 * later read winning, and the open filter (when `openOnly`) applied to the merged rows.
 *
 * At rest (one stage) no row can be read twice (a layout gives a person one key), so pages pass
 * through as read and the open filter runs on the server, as the Python library's does. While
 * rows move (two stages), a row of the first stage whose target key the second stage reads may
 * come back newer from it: such rows (the ones that have not moved yet) are held until the
 * second stage ends, the rest pass through; the open filter then runs here, after the merge, so
 * a saga closed under its new key is never reported open from its stale copy.
 */
export async function* enumerationPages(
  target: QueryTarget,
  plan: EnumerationPlan,
  options: { readonly limit: number; readonly openOnly: boolean; readonly signal?: AbortSignal | undefined },
): AsyncGenerator<RawItem[], void, undefined> {
  const [first = [], second] = plan.stages;
  const read = { limit: options.limit, signal: options.signal };
  if (second === undefined) {
    for await (const page of stagePages(target, first, { ...read, openOnly: options.openOnly })) {
      if (page.length > 0) yield page;
    }
    return;
  }
  const keep = (item: RawItem): boolean => !options.openOnly || isOpen(item);
  const readLater = new Set(second);
  const held = new Map<string, RawItem>();
  for await (const page of stagePages(target, first, { ...read, openOnly: false })) {
    const ready: RawItem[] = [];
    for (const item of page) {
      const moveTo = plan.targetKeyOf(item);
      if (moveTo === null || readLater.has(moveTo)) held.set(tableKey(item), item);
      else if (keep(item)) ready.push(item);
    }
    if (ready.length > 0) yield ready;
  }
  for await (const page of stagePages(target, second, { ...read, openOnly: false })) {
    const ready: RawItem[] = [];
    for (const item of page) {
      held.delete(tableKey(item));
      if (keep(item)) ready.push(item);
    }
    if (ready.length > 0) yield ready;
  }
  const rest = [...held.values()].filter(keep);
  held.clear();
  const size = target.pageSize ?? DEFERRED_PAGE_ROWS;
  for (let at = 0; at < rest.length; at += size) yield rest.slice(at, at + size);
}

/** The identity a row is de-duplicated on: its table key. */
export function tableKey(item: RawItem): string {
  return JSON.stringify([item.PK?.S ?? '', item.SK?.S ?? '']);
}

/** The personId a row's GSI4SK names, or null when it has none that parses. */
export function sortKeyPerson(item: RawItem): string | null {
  const value = item.GSI4SK?.S;
  if (value === undefined) return null;
  try {
    return parseGsi4sk(value).personId;
  } catch {
    return null;
  }
}

/**
 * Compare strings by code point, as Python does. JavaScript compares UTF-16 code units, which
 * puts a code point above U+FFFF (a surrogate pair, 0xD800-0xDFFF) before U+E000-U+FFFF; moving
 * the surrogates above that range at the first differing unit gives code-point order without
 * decoding either string.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

function codePointRank(unit: number): number {
  if (unit >= 0xd800 && unit <= 0xdfff) return unit + 0x2000;
  if (unit >= 0xe000) return unit - 0x800;
  return unit;
}

/** Rows in the Python repository's order: by GSI4SK, then PK, then SK. */
export function orderRows(items: RawItem[]): RawItem[] {
  return items.sort(
    (a, b) =>
      compareCodePoints(a.GSI4SK?.S ?? '', b.GSI4SK?.S ?? '') ||
      compareCodePoints(a.PK?.S ?? '', b.PK?.S ?? '') ||
      compareCodePoints(a.SK?.S ?? '', b.SK?.S ?? ''),
  );
}
