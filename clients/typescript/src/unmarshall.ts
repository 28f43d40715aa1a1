// Attribute values to plain JavaScript values, so callers get rows as objects. Numbers become
// `number`, except an integer beyond Number.MAX_SAFE_INTEGER, which becomes a `bigint` rather
// than silently losing digits; sets become Set, binary Uint8Array, NULL null.
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
