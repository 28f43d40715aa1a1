// Reading GSI4 along the routing (docs/control-contract.md, "Routing"): every page of every
// partition, merged on the table key (PK, SK) with the later read winning.
import { QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IncompleteEnumerationError } from './errors.js';
import { parseGsi4sk } from './keys.js';

export type RawItem = Record<string, AttributeValue>;
type Send = Pick<DynamoDBClient, 'send'>;

export interface QueryTarget {
  readonly client: Send;
  readonly tableName: string;
  readonly indexName: string;
  /** Limit of each Query page (tests; DynamoDB's own 1 MB page otherwise). */
  readonly pageSize?: number | undefined;
}

/** One partition of GSI4 to its last page, optionally only GSI4SK values starting with `prefix`. */
export async function queryPartition(
  target: QueryTarget,
  gsi4pk: string,
  prefix?: string,
): Promise<RawItem[]> {
  const names: Record<string, string> = { '#pk': 'GSI4PK' };
  const values: Record<string, AttributeValue> = { ':pk': { S: gsi4pk } };
  let condition = '#pk = :pk';
  if (prefix !== undefined) {
    names['#sk'] = 'GSI4SK';
    values[':prefix'] = { S: prefix };
    condition += ' AND begins_with(#sk, :prefix)';
  }
  const items: RawItem[] = [];
  let start: RawItem | undefined;
  do {
    const page = await target.client.send(
      new QueryCommand({
        TableName: target.tableName,
        IndexName: target.indexName,
        KeyConditionExpression: condition,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ...(target.pageSize === undefined ? {} : { Limit: target.pageSize }),
        ...(start === undefined ? {} : { ExclusiveStartKey: start }),
      }),
    );
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start !== undefined && Object.keys(start).length > 0);
  return items;
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
 * Run `work` over `inputs` with at most `limit` running at once. Resolves to every result in
 * input order, or rejects with IncompleteEnumerationError naming each input that failed (under
 * `nameOf`) once every started task has settled; after a failure no new task starts.
 */
export async function boundedAll<I, O>(
  inputs: readonly I[],
  limit: number,
  work: (input: I) => Promise<O>,
  nameOf: (input: I) => string,
): Promise<O[]> {
  const results: O[] = new Array<O>(inputs.length);
  const failures = new Map<string, unknown>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < inputs.length && failures.size === 0) {
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
  if (failures.size > 0) throw new IncompleteEnumerationError(failures);
  return results;
}

/** Compare strings by code point, as Python does (JavaScript compares UTF-16 code units). */
export function compareCodePoints(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = (x[i] as string).codePointAt(0)! - (y[i] as string).codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** Rows in the Python repository's order: by GSI4SK, then PK, then SK. */
export function orderRows(items: RawItem[]): RawItem[] {
  const key = (i: RawItem): string[] => [i.GSI4SK?.S ?? '', i.PK?.S ?? '', i.SK?.S ?? ''];
  return items.sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    for (let n = 0; n < 3; n++) {
      const d = compareCodePoints(ka[n] as string, kb[n] as string);
      if (d !== 0) return d;
    }
    return 0;
  });
}
