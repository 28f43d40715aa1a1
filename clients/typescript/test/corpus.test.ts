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
      };
    }
  | { refusal: { kind: string; attribute: string } }
  | { error: string };

interface Corpus {
  bases: { name: string; state: Item | null; history: Item[] }[];
  cases: {
    base: number;
    item: 'state' | number;
    set: Record<string, Item[string] | null>;
    now: string;
    expect: Outcome;
  }[];
}

const corpus = docsJson<Corpus>('contract-corpus.json');

function mutated(c: Corpus['cases'][number]): { state: Item | null; history: Item[] } {
  const base = corpus.bases[c.base];
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

function outcome(c: Corpus['cases'][number]): Outcome {
  const { state, history } = mutated(c);
  try {
    const followed = followedState(state, history);
    return {
      route: {
        condition: followed.condition,
        version: followed.version,
        phase: followed.phase,
        source: layoutName(followed.source),
        target: layoutName(followed.target),
        writes: layoutName(writeLayout(followed, Date.parse(c.now))),
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

describe('contract corpus: every mutated record read as the Python reader reads it', () => {
  assert.ok(corpus.cases.length >= 1000, 'the corpus is a few thousand cases');
  corpus.bases.forEach((base, index) => {
    const cases = corpus.cases.filter((c) => c.base === index);
    test(`${base.name} (${cases.length} mutations)`, () => {
      const disagreements = cases
        .map((c) => ({ c, got: outcome(c) }))
        .filter(({ c, got }) => !isDeepStrictEqual(got, c.expect))
        .map(
          ({ c, got }) =>
            `${JSON.stringify(c.set)} on ${String(c.item)}: ${JSON.stringify(got)}, ` +
            `Python ${JSON.stringify(c.expect)}`,
        );
      assert.deepEqual(disagreements, [], `${disagreements.length} of ${cases.length} disagree`);
    });
  });
});
