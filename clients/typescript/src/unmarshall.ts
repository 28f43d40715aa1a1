// Attribute values to plain JavaScript values, so callers get rows as objects. Numbers become
// `number`, except an integer beyond Number.MAX_SAFE_INTEGER, which becomes a `bigint` rather
// than silently losing digits; sets become Set, binary Uint8Array, NULL null.
//
// Why not @aws-sdk/util-dynamodb's `unmarshall`: it gives the same values (test/unmarshall.test.ts
// holds the two equal on every attribute type; it throws on a non-integer beyond 2^53, where this
// returns the nearest number), but it would be a second peer dependency, and each
// of its releases accepts only a narrow band of clients: 3.972.0 wants client-dynamodb 3.972.0
// exactly (the release Node 20 services need, see the README), 3.996.2 wants ^3.1003.0, 3.996.9
// ^3.1111.0; npm refuses the install (ERESOLVE) when a service's two SDK packages disagree,
// so every service would have to pair them by hand. These 25 lines need none of that.
import type { AttributeValue } from '@aws-sdk/client-dynamodb';

export type Row = Record<string, unknown>;

export function unmarshallItem(item: Record<string, AttributeValue>): Row {
  const row: Row = {};
  for (const [name, value] of Object.entries(item)) row[name] = unmarshallValue(value);
  return row;
}

export function unmarshallValue(value: AttributeValue): unknown {
  if (value.S !== undefined) return value.S;
  if (value.N !== undefined) return number(value.N);
  if (value.BOOL !== undefined) return value.BOOL;
  if (value.NULL !== undefined) return null;
  if (value.M !== undefined) return unmarshallItem(value.M);
  if (value.L !== undefined) return value.L.map(unmarshallValue);
  if (value.SS !== undefined) return new Set(value.SS);
  if (value.NS !== undefined) return new Set(value.NS.map(number));
  if (value.B !== undefined) return value.B;
  if (value.BS !== undefined) return new Set(value.BS);
  throw new TypeError(`unknown DynamoDB attribute value: ${Object.keys(value).join(', ')}`);
}

function number(text: string): number | bigint {
  const n = Number(text);
  if (Number.isInteger(n) && !Number.isSafeInteger(n) && /^-?\d+$/.test(text)) return BigInt(text);
  return n;
}
