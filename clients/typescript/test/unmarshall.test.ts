// The package's unmarshall held to the SDK's own (@aws-sdk/util-dynamodb), which it does not use
// at run time (src/unmarshall.ts says why): the same values for every attribute type, and the one
// difference written down.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshallItem } from '../src/unmarshall.js';

const bytes = new Uint8Array([0, 1, 255]);
const ITEM: Record<string, AttributeValue> = {
  s: { S: 'text' },
  empty: { S: '' },
  int: { N: '42' },
  negative: { N: '-7' },
  decimal: { N: '12.5' },
  exponent: { N: '1.5e3' },
  safe: { N: '9007199254740991' },
  big: { N: '9007199254740993' },
  bigNegative: { N: '-123456789012345678901234567890' },
  yes: { BOOL: true },
  no: { BOOL: false },
  nothing: { NULL: true },
  map: { M: { inner: { N: '1' }, deeper: { M: { list: { L: [{ S: 'a' }, { N: '2' }, { NULL: true }] } } } } },
  list: { L: [{ S: 'x' }, { BOOL: true }, { M: {} }, { L: [] }] },
  strings: { SS: ['a', 'b'] },
  numbers: { NS: ['1', '2.5', '18446744073709551617'] },
  binary: { B: bytes },
  binaries: { BS: [bytes, new Uint8Array([7])] },
};

describe('unmarshall', () => {
  test('the same values as @aws-sdk/util-dynamodb for every attribute type', () => {
    const ours = unmarshallItem(ITEM);
    assert.deepEqual(ours, unmarshall(ITEM));
    assert.equal(ours.big, 9007199254740993n);
    assert.equal(ours.safe, 9007199254740991);
  });

  test('a non-integer beyond 2^53 is a number here; the SDK throws on it', () => {
    for (const text of ['1e30', '12345678901234567890.5']) {
      assert.equal(unmarshallItem({ n: { N: text } }).n, Number(text));
      assert.throws(() => unmarshall({ n: { N: text } }), /can't be converted to BigInt/);
    }
  });

  test('an attribute value of no known type is refused, naming it', () => {
    assert.throws(() => unmarshallItem({ odd: { X: 'y' } as unknown as AttributeValue }), /unknown DynamoDB attribute value: X/);
  });
});
