// A page of an enumeration: at most `limit` rows and the cursor of the next page, as the Python
// library's page (lambdas/saga_index/store/paging.py). The partitions are read one after the
// other in the plan's order, each from where the cursor stopped, with a Query `Limit` of the rows
// still missing; a partition is left only when a Query answers without a LastEvaluatedKey, so
// the pages of one enumeration concatenate to every row of a full read, each once.
//
// At rest only (one stage). While rows move, the full enumeration holds the first stage's rows
// until the second is read so that a row seen under both keys counts once; a cursor handed to a
// caller between two requests cannot hold them, so a row moved between two pages would come back
// twice. PagingDuringMoveError says so instead.
import { QueryCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import {
  CursorLayoutChangedError,
  decodeCursor,
  encodeCursor,
  InvalidCursorError,
  MAX_PAGE_LIMIT,
  PagingDuringMoveError,
  planFingerprint,
  positionOf,
  startKey,
  type Cursor,
  type Enumeration,
} from './cursor.js';
import { queryInput, readFailure, type QueryTarget, type RawItem } from './reads.js';

export interface RawPage {
  readonly rows: RawItem[];
  readonly cursor: string | null;
}

/** `limit` when it is an integer from 1 to MAX_PAGE_LIMIT; otherwise a RangeError. */
export function validateLimit(limit: unknown): number {
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) {
    throw new RangeError(`limit must be an integer from 1 to ${MAX_PAGE_LIMIT}, got ${String(limit)}`);
  }
  return limit;
}

/** The parsed cursor (null: the first page); InvalidCursorError before any request. */
export function parseCursor(cursor: string | null | undefined): Cursor | null {
  return cursor === undefined || cursor === null ? null : decodeCursor(cursor);
}

export async function readPage(
  target: QueryTarget,
  stages: readonly (readonly string[])[],
  of: Enumeration,
  options: { readonly limit: number; readonly cursor: Cursor | null; readonly signal?: AbortSignal | undefined },
): Promise<RawPage> {
  const { limit, cursor, signal } = options;
  if (stages.length !== 1) {
    throw new PagingDuringMoveError(
      `paging is refused while rows move between layouts (${stages.length} enumeration stages): a row ` +
        'moved between two pages would be returned twice. Use the full enumeration (getAllSagas / ' +
        'getAllOpenSagas, or pagesOfAllSagas / pagesOfOpenSagas) until the move completes',
    );
  }
  const partitions = stages[0] as readonly string[];
  const fingerprint = planFingerprint(stages);
  let index = 0;
  let after: Record<string, AttributeValue> | undefined;
  if (cursor !== null) {
    if (cursor.plan !== fingerprint) {
      throw new CursorLayoutChangedError(
        `the cursor was taken under another key plan (fingerprint ${cursor.plan}, now ${fingerprint}): ` +
          'the layout changed since, and resuming could skip or repeat sagas. Start the enumeration again without a cursor',
      );
    }
    if (cursor.of !== of) throw new InvalidCursorError(`the cursor is one of the '${cursor.of}' enumeration, not of '${of}'`);
    index = partitions.indexOf(cursor.position.at);
    if (index < 0) throw new InvalidCursorError(`the cursor's partition '${cursor.position.at}' is not one this plan reads`);
    after = cursor.position.after === null ? undefined : startKey(cursor.position.after, target.partitionKey);
  }
  const rows: RawItem[] = [];
  const requestOptions = signal === undefined ? undefined : { abortSignal: signal };
  while (index < partitions.length && rows.length < limit) {
    const partition = partitions[index] as string;
    const wanted = limit - rows.length;
    const input = {
      ...queryInput(target, { partition, openOnly: of === 'open' }),
      Limit: Math.min(wanted, target.pageSize ?? wanted),
      ...(after === undefined ? {} : { ExclusiveStartKey: after }),
    };
    let page;
    try {
      page = await target.client.send(new QueryCommand(input), requestOptions);
    } catch (err) {
      throw readFailure(new Map([[partition, err]]), target, signal);
    }
    rows.push(...(page.Items ?? []));
    const last = page.LastEvaluatedKey;
    if (last !== undefined && Object.keys(last).length > 0) {
      after = last;
    } else {
      index += 1;
      after = undefined;
    }
  }
  if (index === partitions.length) return { rows, cursor: null };
  const at = partitions[index] as string;
  return { rows, cursor: encodeCursor(of, fingerprint, { at, after: after === undefined ? null : positionOf(after, target.partitionKey) }) };
}
