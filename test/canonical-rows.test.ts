/**
 * The client's canonical text of pushed rows and of committed rows with their ordinals
 * (client-web/canonical-rows.ts) is `canonicalize`'s, for every row: plain rows take the fast path, and keys the engine reorders, nested values, lone
 * surrogates and non-finite numbers must come out (or be refused) exactly as the library does.
 * Seeded, so every run checks the same cases.
 */
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalCommittedText, canonicalRowsText } from '../core/protocol/canonical-rows.js';
import { type PushedWireRow } from '../client-web/outbox.js';
import { jsonValue } from './support/json-arbitrary.js';

const SEED = 20261126;

const char = fc.constantFrom('a', 'b', 'Z', '_', '"', '\\', '\n', '\u0001', '\u00e9', '\u2028', '\uffff', '\ud83d\ude00', '1', '0');
const text = fc.array(char, { maxLength: 5 }).map((cs) => cs.join(''));
/** Rarely a lone surrogate, which both must refuse. */
const anyText = fc.oneof({ weight: 20, arbitrary: text }, { weight: 1, arbitrary: fc.constantFrom('\ud800', 'x\udc00') });
const number = fc.oneof(
  fc.constantFrom(0, -0, 1, 0.1, 1e21, 1e-7, 2 ** 53, 5e-324, 4.35),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  { weight: 1, arbitrary: fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY) },
);
const plainValue = fc.oneof(fc.constant(null), fc.boolean(), number, anyText);
const nested = jsonValue(text, number, { arrays: 2, keys: 2 });
/** Column names, among them array indices and `__proto__`, which an object does not keep in insertion order. */
const column = fc.oneof({ weight: 6, arbitrary: text.filter((t) => t.length > 0) }, fc.constantFrom('2', '10', '0', '01', '__proto__', 'id'));
const payload = fc.dictionary(column, fc.oneof({ weight: 8, arbitrary: plainValue }, { weight: 1, arbitrary: nested }), { maxKeys: 5 });
const fields = {
  schema: fc.constantFrom('app', 'é'),
  table: fc.constantFrom('notes', 'a"b'),
  key: fc.tuple(column, text).map(([k, v]) => ({ [k]: v })),
  op: fc.constantFrom('INSERT', 'UPDATE', 'DELETE'),
  payload: fc.oneof(fc.constant(null), payload),
};
const row = fc.record({ ...fields, base_row_version: fc.nat() });
const committedRow = fc.record({ ...fields, row_version: fc.nat() });

type Outcome = { readonly text: string } | { readonly refused: string };

function outcome(write: () => string | undefined): Outcome {
  try {
    return { text: String(write()) };
  } catch (error) {
    return { refused: error instanceof Error ? error.message : String(error) };
  }
}

describe('canonical text of pushed rows', () => {
  it('is the library\'s text, or the library\'s refusal, for any rows', () => {
    let written = 0;
    fc.assert(
      fc.property(fc.array(row, { maxLength: 6 }), (rows) => {
        const mine = outcome(() => canonicalRowsText(rows));
        expect(mine).toEqual(outcome(() => canonicalize(rows) ?? '[]'));
        if ('text' in mine) written++;
      }),
      { seed: SEED, numRuns: 2000 },
    );
    expect(written).toBeGreaterThan(1000);
  });

  it("is the library's text of committed rows with their ordinals, or the library's refusal, for any rows", () => {
    let written = 0;
    fc.assert(
      fc.property(fc.array(committedRow, { maxLength: 6 }), (rows) => {
        const mine = outcome(() => canonicalCommittedText(rows));
        expect(mine).toEqual(outcome(() => canonicalize(rows.map((r, i) => ({ ...r, row_ordinal: i }))) ?? '[]'));
        if ('text' in mine) written++;
      }),
      { seed: SEED, numRuns: 2000 },
    );
    expect(written).toBeGreaterThan(1000);
  });

  it('sorts keys by UTF-16 code units and writes values as RFC 8785 does', () => {
    const rows: PushedWireRow[] = [{
      schema: 'app', table: 'notes', key: { id: 'k1' }, op: 'UPDATE', base_row_version: 7,
      payload: { title: 'é "q"', b: 1e21, a: -0, '\ud83d\ude00': true, '\uffff': null, A: 0.000001 },
    }];
    expect(canonicalRowsText(rows)).toBe(
      '[{"base_row_version":7,"key":{"id":"k1"},"op":"UPDATE","payload":{"A":0.000001,"a":0,"b":1e+21,"title":"é \\"q\\"","\ud83d\ude00":true,"\uffff":null},"schema":"app","table":"notes"}]',
    );
  });

  it('keeps array-index keys and __proto__ in code-unit order', () => {
    const rows: PushedWireRow[] = [{ schema: 's', table: 't', key: { id: 'x' }, op: 'INSERT', base_row_version: 0, payload: JSON.parse('{"9":1,"10":2,"__proto__":3,"a":4}') }];
    expect(canonicalRowsText(rows)).toBe('[{"base_row_version":0,"key":{"id":"x"},"op":"INSERT","payload":{"10":2,"9":1,"__proto__":3,"a":4},"schema":"s","table":"t"}]');
  });
});
