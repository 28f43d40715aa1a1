// A fake DynamoDBClient: send() answers GetItem and Query (table, GSI4, open index) from items in
// memory, pages by Limit (then applies the open-state FilterExpression, as DynamoDB does), honours
// the abortSignal option, and lets a test fail, hold or count requests.
import { GetItemCommand, QueryCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';

export type Item = Record<string, AttributeValue>;

/** The sparse open-saga index's name (the package's default). */
export const OPEN_INDEX = 'renewal-saga-open-index';

export class FakeDynamo {
  items: Item[] = [];
  sent: { command: string; input: Record<string, unknown>; signal: AbortSignal | undefined }[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Every send, answered or not (an aborted request is never answered). */
  attempts = 0;
  /** Throw this from the Query of a GSI4PK (all its pages) or from GetItem. */
  failQueryOf = new Map<string, Error>();
  failGetItem: Error | null = null;
  /** While set, every GSI Query waits for this promise before it answers. */
  hold: Promise<void> | null = null;

  put(item: Item): void {
    const key = (i: Item): string => `${i.PK?.S}\u0000${i.SK?.S}`;
    this.items = this.items.filter((i) => key(i) !== key(item));
    this.items.push(item);
  }

  // `options` is the SDK's HttpHandlerOptions (or a callback, in the SDK's other overload).
  async send(command: unknown, options?: unknown): Promise<unknown> {
    this.attempts += 1;
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const given = typeof options === 'object' && options !== null ? (options as { abortSignal?: unknown }) : {};
    const signal = given.abortSignal instanceof AbortSignal ? given.abortSignal : undefined;
    try {
      // A turn of the event loop, so concurrent requests really overlap.
      await new Promise((resolve) => setImmediate(resolve));
      if (command instanceof QueryCommand && command.input.IndexName !== undefined && this.hold !== null) {
        await Promise.race([this.hold, aborted(signal)]);
      }
      if (signal?.aborted === true) throw abortError();
      if (command instanceof GetItemCommand) return this.getItem(command, signal);
      if (command instanceof QueryCommand) return this.query(command, signal);
      throw new Error(`the fake answers GetItem and Query only, got ${String(command)}`);
    } finally {
      this.inFlight -= 1;
    }
  }

  private getItem(command: GetItemCommand, signal: AbortSignal | undefined): unknown {
    const input = command.input;
    this.sent.push({ command: 'GetItem', input: { ...input }, signal });
    if (this.failGetItem !== null) throw this.failGetItem;
    if (input.ConsistentRead !== true) throw new Error('the record must be read strongly consistently');
    const item = this.items.find((i) => i.PK?.S === input.Key?.PK?.S && i.SK?.S === input.Key?.SK?.S);
    return item === undefined ? {} : { Item: item };
  }

  private query(command: QueryCommand, signal: AbortSignal | undefined): unknown {
    const input = command.input;
    this.sent.push({ command: 'Query', input: { ...input }, signal });
    const values = input.ExpressionAttributeValues ?? {};
    const pk = values[':pk']?.S ?? '';
    const prefix = values[':prefix']?.S;
    let rows: Item[];
    // Each index's partition key: GSI4PK, or OpenSagaPK on the sparse open index (a row without
    // the attribute is not in that index at all, as in DynamoDB).
    const pkName = input.IndexName === OPEN_INDEX ? 'OpenSagaPK' : 'GSI4PK';
    if (input.IndexName !== undefined) {
      const failure = this.failQueryOf.get(pk);
      if (failure !== undefined) throw failure;
      if (input.ConsistentRead === true) throw new Error('a GSI cannot be read consistently');
      const named = input.ExpressionAttributeNames?.['#pk'];
      if (named !== pkName) throw new Error(`index ${input.IndexName} is keyed on ${pkName}, the Query names ${named}`);
      rows = this.items
        .filter((i) => i[pkName]?.S === pk && (prefix === undefined || (i.GSI4SK?.S ?? '').startsWith(prefix)))
        .sort((a, b) => compareTuples(gsiOrder(a), gsiOrder(b)));
    } else {
      rows = this.items
        .filter((i) => i.PK?.S === pk && (prefix === undefined || (i.SK?.S ?? '').startsWith(prefix)))
        .sort((a, b) => compareTuples(tableOrder(a), tableOrder(b)));
      if (input.ScanIndexForward === false) rows.reverse();
    }
    // Like DynamoDB, a page resumes after the key ExclusiveStartKey names (the row itself may be
    // gone), and LastEvaluatedKey is the key of the last row the page evaluated.
    const orderOf = input.IndexName !== undefined ? gsiOrder : tableOrder;
    const direction = input.IndexName === undefined && input.ScanIndexForward === false ? -1 : 1;
    const esk = input.ExclusiveStartKey;
    const found = esk === undefined ? 0 : rows.findIndex((r) => direction * compareTuples(orderOf(r), orderOf(esk)) > 0);
    const start = found < 0 ? rows.length : found;
    const limit = input.Limit ?? rows.length;
    let page = rows.slice(start, start + limit);
    const more = start + limit < rows.length;
    const lastEvaluated = page[page.length - 1];
    if (input.FilterExpression !== undefined) {
      if (!/^#state IN \((:s\d+(, )?)+\)$/.test(input.FilterExpression)) {
        throw new Error(`the fake applies the open-state filter only, got ${input.FilterExpression}`);
      }
      const states = Object.entries(values)
        .filter(([name]) => name.startsWith(':s'))
        .map(([, value]) => value.S);
      page = page.filter((i) => states.includes(i.state?.S));
    }
    if (!more || lastEvaluated === undefined) return { Items: page };
    const names = input.IndexName !== undefined ? [pkName, 'GSI4SK', 'PK', 'SK'] : ['PK', 'SK'];
    const lastKey = Object.fromEntries(names.map((n) => [n, lastEvaluated[n] ?? { S: '' }]));
    return { Items: page, LastEvaluatedKey: lastKey };
  }

  queriesOf(pk?: string): Record<string, unknown>[] {
    return this.sent
      .filter((s) => s.command === 'Query' && (s.input.IndexName !== undefined))
      .map((s) => s.input)
      .filter((i) => pk === undefined || (i.ExpressionAttributeValues as Item)[':pk']?.S === pk);
  }
}

const gsiOrder = (i: Item): string[] => [i.GSI4SK?.S ?? '', i.PK?.S ?? '', i.SK?.S ?? ''];
const tableOrder = (i: Item): string[] => [i.SK?.S ?? ''];

function compareTuples(a: readonly string[], b: readonly string[]): number {
  for (let n = 0; n < a.length; n++) {
    const x = a[n] ?? '';
    const y = b[n] ?? '';
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

function abortError(): Error {
  const err = new Error('Request aborted');
  err.name = 'AbortError';
  return err;
}

function aborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal === undefined) return;
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** An error as the SDK throws a service exception: its `name` is the error code. */
export function serviceError(name: string, message: string): Error {
  const err = new Error(message);
  err.name = name;
  return err;
}

export function sagaRow(
  sagaId: string,
  personId: string,
  gsi4pk: string,
  state = 'OPENED',
  extra: Item = {},
): Item {
  return {
    PK: { S: `RSAGA#${sagaId}` },
    SK: { S: 'META' },
    entityType: { S: 'RenewalSaga' },
    sagaId: { S: sagaId },
    personId: { S: personId },
    state: { S: state },
    openedAt: { S: '2026-07-10T12:00:00.000Z' },
    GSI4PK: { S: gsi4pk },
    GSI4SK: { S: `${personId}#2026-07-10T12:00:00.000Z` },
    ...extra,
  };
}
