// docs/contract-corpus.json: control records mutated at random from valid ones (another type,
// NULL, nothing, Unicode digits, year 0000, numbers with spaces or past 2^53, words in capitals)
// with what the Python reader makes of each. This package must make the same of every one:
// route it alike, or refuse it with the same kind and attribute, or refuse it as naming more
// than two layouts. One test per base record, each listing every case it disagrees on.
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { describe, test } from 'node:test';
import {
  ControlItemInvalidError,
  ControlRecordInvalidError,
  writeLayout,
  type Item,
} from '../src/internal.js';
import { followedState } from '../src/control.js';
import { layoutName } from '../src/layout.js';
import { openIndexName } from '../src/open-index.js';
import { openEnumerationKeys, openWriteIndex } from '../src/routing.js';
import { docsJson } from './vectors.js';

type Outcome =
  | {
      route: {
        condition: string;
        version: number;
        phase: string;
        source: string;
        target: string;
        writes: string;
        // The open-saga index's cases only: its state, the one writers stamp, the one read.
        openIndex?: string;
        openWrites?: string | null;
        openReads?: string | null;
      };
    }
  | { refusal: { kind: string; attribute: string } }
  | { error: string };

interface Base {
  name: string;
  state: Item | null;
  history: Item[];
}
interface Case {
  base: number;
  item: 'state' | number;
  set: Record<string, Item[string] | null>;
  now: string;
  expect: Outcome;
}
interface Corpus {
  bases: Base[];
  cases: Case[];
  // Mutations of records in each open-saga index state, routed with the open index too.
  openIndexBases: Base[];
  openIndexCases: Case[];
}

const corpus = docsJson<Corpus>('contract-corpus.json');

function mutated(bases: readonly Base[], c: Case): { state: Item | null; history: Item[] } {
  const base = bases[c.base];
  assert.ok(base !== undefined, `no base ${c.base}`);
  const history = [...base.history];
  const original = c.item === 'state' ? base.state : history[c.item];
  assert.ok(original !== null && original !== undefined, `no item ${String(c.item)}`);
  const item: Item = { ...original };
  for (const [name, value] of Object.entries(c.set)) {
    if (value === null || value === undefined) delete item[name];
    else item[name] = value;
  }
  if (c.item === 'state') return { state: item, history };
  history[c.item] = item;
  return { state: base.state, history };
}

function outcome(bases: readonly Base[], c: Case, withOpenIndex: boolean): Outcome {
  const { state, history } = mutated(bases, c);
  try {
    const followed = followedState(state, history);
    const nowMs = Date.parse(c.now);
    const route = {
      condition: followed.condition,
      version: followed.version,
      phase: followed.phase,
      source: layoutName(followed.source),
      target: layoutName(followed.target),
      writes: layoutName(writeLayout(followed, nowMs)),
    };
    if (!withOpenIndex) return { route };
    const writes = openWriteIndex(followed, nowMs);
    const reads = openEnumerationKeys(followed) === null ? null : followed.openIndex;
    return {
      route: {
        ...route,
        openIndex: openIndexName(followed.openIndex),
        openWrites: writes === null ? null : openIndexName(writes),
        openReads: reads === null ? null : openIndexName(reads),
      },
    };
  } catch (err) {
    if (err instanceof ControlItemInvalidError) {
      return { refusal: { kind: err.kind, attribute: err.attribute } };
    }
    if (err instanceof ControlRecordInvalidError && err.message.includes('more than two layouts')) {
      return { error: 'more than two layouts' };
    }
    throw err;
  }
}

function suite(bases: readonly Base[], all: readonly Case[], withOpenIndex: boolean): void {
  bases.forEach((base, index) => {
    const cases = all.filter((c) => c.base === index);
    test(`${base.name} (${cases.length} mutations)`, () => {
      const disagreements = cases
        .map((c) => ({ c, got: outcome(bases, c, withOpenIndex) }))
        .filter(({ c, got }) => !isDeepStrictEqual(got, c.expect))
        .map(
          ({ c, got }) =>
            `${JSON.stringify(c.set)} on ${String(c.item)}: ${JSON.stringify(got)}, ` +
            `Python ${JSON.stringify(c.expect)}`,
        );
      assert.deepEqual(disagreements, [], `${disagreements.length} of ${cases.length} disagree`);
    });
  });
}

describe('contract corpus: every mutated record read as the Python reader reads it', () => {
  assert.ok(corpus.cases.length >= 1000, 'the corpus is a few thousand cases');
  suite(corpus.bases, corpus.cases, false);
});

describe("contract corpus: every mutated record of the open-saga index's states", () => {
  assert.ok(corpus.openIndexCases.length >= 500, 'the open index has its own cases');
  suite(corpus.openIndexBases, corpus.openIndexCases, true);
});
