import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  InvalidKeyError,
  InvalidPersonIdError,
  InvalidShardCountError,
  LEGACY_GSI4PK,
  allOpenIndexPks,
  gsi4sk,
  openIndexKeyFor,
  openIndexPk,
  person,
  parseGsi4pk,
  parseGsi4sk,
  shardOf,
  shardedGsi4pk,
  validatePersonId,
  validateShardCount,
} from '../src/internal.js';
import { docsJson } from './vectors.js';

interface ShardVector {
  personId: string;
  shardCount: number;
  shard: number;
  gsi4pk: string;
  utf8Hex: string;
  note: string;
}

const { vectors } = docsJson<{ vectors: ShardVector[] }>('shard-vectors.json');

describe('the shard contract (docs/shard-vectors.json)', () => {
  test('every vector: the hashed bytes, the shard and the key', () => {
    assert.ok(vectors.length >= 200, `expected the full vector file, got ${vectors.length}`);
    for (const v of vectors) {
      assert.equal(Buffer.from(v.personId, 'utf8').toString('hex'), v.utf8Hex, v.note);
      assert.equal(shardOf(v.personId, v.shardCount), v.shard, v.note);
      assert.equal(shardedGsi4pk(shardOf(v.personId, v.shardCount)), v.gsi4pk, v.note);
      assert.equal(parseGsi4pk(v.gsi4pk), v.shard);
    }
  });

  test("every vector: the open index's key is GSI4's shard under the open index's N", () => {
    for (const v of vectors) {
      const key = openIndexKeyFor(person(v.personId), v.shardCount);
      assert.equal(key, `RenewalSagaOpen#${v.shard}`, v.note);
      assert.equal(key.slice('RenewalSagaOpen#'.length), v.gsi4pk.slice('RenewalSaga#'.length), v.note);
    }
  });

  test("the open index's keys: one per shard, shard 0 first; bad N and shards refused", () => {
    assert.deepEqual(allOpenIndexPks(4), ['RenewalSagaOpen#0', 'RenewalSagaOpen#1', 'RenewalSagaOpen#2', 'RenewalSagaOpen#3']);
    assert.equal(allOpenIndexPks(1024).length, 1024);
    assert.equal(openIndexPk(1023), 'RenewalSagaOpen#1023');
    assert.throws(() => openIndexPk(1024), InvalidKeyError);
    assert.throws(() => openIndexPk(-1), InvalidKeyError);
    assert.throws(() => allOpenIndexPks(12), InvalidShardCountError);
    assert.throws(() => openIndexKeyFor(person('p-1'), 3), InvalidShardCountError);
  });

  test('NFC and NFD are different people', () => {
    assert.equal(shardOf('Jos\u00e9', 16), 5);
    assert.equal(shardOf('Jose\u0301', 16), 14);
  });

  test('shard counts other than powers of two from 1 to 1024 are refused', () => {
    for (const bad of [0, -1, 3, 12, 2048, 16.5, Number.NaN]) {
      assert.throws(() => validateShardCount(bad), InvalidShardCountError, String(bad));
    }
    assert.throws(() => validateShardCount('16'), /got '16'/);
    assert.throws(() => validateShardCount(true), /got True/);
    assert.throws(() => shardOf('p-1', 3), /power of two from 1 to 1024, got 3/);
    assert.equal(validateShardCount(1024), 1024);
  });
});

describe('personId: the Python library rules and messages', () => {
  test('not a string, empty', () => {
    assert.throws(() => validatePersonId(42), {
      name: 'InvalidPersonIdError',
      message: 'personId must be a string, got int: 42',
    });
    assert.throws(() => validatePersonId(null), { message: 'personId must be a string, got NoneType: None' });
    assert.throws(() => validatePersonId(''), {
      message: 'personId must be a non-empty string',
    });
  });

  test('a lone surrogate is refused, not hashed as U+FFFD', () => {
    assert.throws(() => shardOf('ab\ud800', 16), {
      message:
        "personId is not valid Unicode text: 'utf-8' codec can't encode character '\\ud800' " +
        'in position 2: surrogates not allowed',
    });
    assert.throws(() => validatePersonId('\ud83d\ude00\udc00'), /in position 1/);
  });

  test('the 1,024-byte sort-key limit counts UTF-8 bytes', () => {
    const opened = '2026-07-10T12:00:00.000Z';
    assert.equal(gsi4sk('a'.repeat(999), opened).length, 1024);
    assert.throws(() => gsi4sk('a'.repeat(1000), opened), {
      message:
        "personId is too long: its GSI4SK would be 1025 bytes of UTF-8, over DynamoDB's " +
        '1024-byte sort-key limit',
    });
    assert.equal(validatePersonId('\u4e2d'.repeat(333), opened), '\u4e2d'.repeat(333));
    assert.throws(() => validatePersonId('\u4e2d'.repeat(334), opened), InvalidPersonIdError);
    assert.equal(validatePersonId('a'.repeat(1023)).length, 1023);
    assert.throws(() => validatePersonId('a'.repeat(1024)), /1025 bytes/);
  });
});

describe('keys', () => {
  test('one shard has exactly one key', () => {
    assert.equal(parseGsi4pk(LEGACY_GSI4PK), null);
    assert.equal(parseGsi4pk('RenewalSaga#0'), 0);
    assert.equal(parseGsi4pk('RenewalSaga#1023'), 1023);
    for (const bad of ['RenewalSaga#01', 'RenewalSaga#-1', 'RenewalSaga#x', 'RenewalSaga#', 'RenewalSaga#1024']) {
      assert.throws(() => parseGsi4pk(bad), InvalidKeyError, bad);
    }
  });

  test('GSI4SK splits on the last "#"', () => {
    assert.deepEqual(parseGsi4sk('a#b#2026-01-01T00:00:00.000Z'), {
      personId: 'a#b',
      openedAt: '2026-01-01T00:00:00.000Z',
    });
    assert.throws(() => parseGsi4sk('no-separator'), InvalidKeyError);
    assert.throws(() => parseGsi4sk('#2026'), InvalidKeyError);
    assert.throws(() => gsi4sk('p-1', '2026#x'), /openedAt must be a non-empty ISO-8601 string, got '2026#x'/);
    assert.throws(() => gsi4sk('p-1', ''), InvalidKeyError);
  });
});
