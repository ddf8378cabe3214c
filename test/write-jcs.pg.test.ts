/**
 * Issue 4 (write path): the SQL canonicaliser `sync.jcs(jsonb)` that bundle and request hashes
 * rest on is RFC 8785, i.e. equal to the `canonicalize` package, for random JSON values.
 * Seed and run count come from JCS_SEED / JCS_RUNS and are printed on failure by fast-check.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import canonicalize from 'canonicalize';
import { sql } from '../core/db/index.js';
import { openAppDb, type TestDb } from './support/server-db.js';
import { jsonValue } from './support/json-arbitrary.js';

const SEED = Number(process.env['JCS_SEED'] ?? 8785);
const RUNS = Number(process.env['JCS_RUNS'] ?? 200);

/** Characters that stress escaping and key order: controls (not NUL), quotes, BMP edges, astral planes. */
const char = fc.oneof(
  fc.constantFrom('a', 'b', 'Z', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', '\u0001', '\u001f', '\u007f', '\u00e9', '\u2028', '\ud7ff', '\ue000', '\uffff', '\ud83d\ude00', '\ud800\udc00', '\udbff\udfff'),
  fc.integer({ min: 1, max: 0x10ffff }).filter((cp) => cp < 0xd800 || cp > 0xdfff).map((cp) => String.fromCodePoint(cp)),
);
const text = fc.array(char, { maxLength: 8 }).map((cs) => cs.join(''));

const number = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 0.1, 0.5, 1e21, 1e20, 1e-7, 1e-6, 123456789012345, 1234567890123456, 2 ** 53, 2 ** 53 + 2, -(2 ** 62), 1e300, 5e-324,
    1.7976931348623157e308, 4.35, 0.000001234, 123e-20, 100, 1e15, 1e16, 9007199254740991),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }),
);

const value = jsonValue(text, number, { arrays: 5, keys: 6 });

describe('sync.jcs equals RFC 8785 (canonicalize)', () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await openAppDb();
  });
  afterAll(async () => t?.close());

  async function jcs(v: unknown): Promise<string> {
    const [row] = await t.db.query<{ c: string }>(sql`SELECT sync.jcs(${JSON.stringify(v)}::jsonb) AS c`);
    return row!.c;
  }

  it('fixed cases', async () => {
    const cases: unknown[] = [
      { b: 1e21, a: [1e-7, -0, 0.1, 1e20], '\ud83d\ude00': 'x', '\uffff': 'y', '': { z: null, y: true } },
      // eslint-disable-next-line no-loss-of-precision -- the rounding to a double is what RFC 8785 hashes
      [1.5e-7, 12345678901234567890, -1.0000000000000002, 333333333.3333333, 2 ** -1074],
      'tab\tquote"slash\\nul\u0001line\u2028',
      { '\ue000': 1, '\ud800\udc00': 2, a: 3, A: 4, 'é': 5 },
    ];
    for (const c of cases) expect(await jcs(c), JSON.stringify(c)).toBe(canonicalize(c));
  });

  it('random JSON values', async () => {
    await fc.assert(
      fc.asyncProperty(value, async (v) => {
        expect(await jcs(v)).toBe(canonicalize(v));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
