// A fake DynamoDBClient: send() answers GetItem and Query (table and GSI4) from items in
// memory, pages by Limit, and lets a test fail, delay or count requests.
import { GetItemCommand, QueryCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';

export type Item = Record<string, AttributeValue>;

export class FakeDynamo {
  items: Item[] = [];
  sent: { command: string; input: Record<string, unknown> }[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Throw this from the Query of a GSI4PK (all its pages) or from GetItem. */
  failQueryOf = new Map<string, Error>();
  failGetItem: Error | null = null;

  put(item: Item): void {
    const key = (i: Item): string => `${i.PK?.S}\u0000${i.SK?.S}`;
    this.items = this.items.filter((i) => key(i) !== key(item));
    this.items.push(item);
  }

  async send(command: unknown): Promise<unknown> {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      // A turn of the event loop, so concurrent requests really overlap.
      await new Promise((resolve) => setImmediate(resolve));
      if (command instanceof GetItemCommand) return this.getItem(command);
      if (command instanceof QueryCommand) return this.query(command);
      throw new Error(`the fake answers GetItem and Query only, got ${String(command)}`);
    } finally {
      this.inFlight -= 1;
    }
  }

  private getItem(command: GetItemCommand): unknown {
    const input = command.input;
    this.sent.push({ command: 'GetItem', input: { ...input } });
    if (this.failGetItem !== null) throw this.failGetItem;
    if (input.ConsistentRead !== true) throw new Error('the record must be read strongly consistently');
    const item = this.items.find((i) => i.PK?.S === input.Key?.PK?.S && i.SK?.S === input.Key?.SK?.S);
    return item === undefined ? {} : { Item: item };
  }

  private query(command: QueryCommand): unknown {
    const input = command.input;
    this.sent.push({ command: 'Query', input: { ...input } });
    const values = input.ExpressionAttributeValues ?? {};
    const pk = values[':pk']?.S ?? '';
    const prefix = values[':prefix']?.S;
    let rows: Item[];
    if (input.IndexName !== undefined) {
      const failure = this.failQueryOf.get(pk);
      if (failure !== undefined) throw failure;
      if (input.ConsistentRead === true) throw new Error('a GSI cannot be read consistently');
      rows = this.items
        .filter((i) => i.GSI4PK?.S === pk && (prefix === undefined || (i.GSI4SK?.S ?? '').startsWith(prefix)))
        .sort((a, b) => ((a.GSI4SK?.S ?? '') < (b.GSI4SK?.S ?? '') ? -1 : 1));
    } else {
      rows = this.items
        .filter((i) => i.PK?.S === pk && (prefix === undefined || (i.SK?.S ?? '').startsWith(prefix)))
        .sort((a, b) => ((a.SK?.S ?? '') < (b.SK?.S ?? '') ? -1 : 1));
      if (input.ScanIndexForward === false) rows.reverse();
    }
    const start = Number(input.ExclusiveStartKey?.offset?.N ?? '0');
    const limit = input.Limit ?? rows.length;
    const page = rows.slice(start, start + limit);
    const more = start + limit < rows.length;
    return { Items: page, ...(more ? { LastEvaluatedKey: { offset: { N: String(start + limit) } } } : {}) };
  }

  queriesOf(pk?: string): Record<string, unknown>[] {
    return this.sent
      .filter((s) => s.command === 'Query' && (s.input.IndexName !== undefined))
      .map((s) => s.input)
      .filter((i) => pk === undefined || (i.ExpressionAttributeValues as Item)[':pk']?.S === pk);
  }
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
