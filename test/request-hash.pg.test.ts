/**
 * The request hash the server computes from the staged rows (sync.push_request_hash, from SQL
 * generated per table) equals the client's RFC 8785 hash of the rows it sent, for any JSON value
 * in any column validation lets through: a commit never answers "request_hash does not match"
 * for rows sent as hashed. Seeded, so every run checks the same cases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { jsonValue } from './support/json-arbitrary.js';
import { initEmpty, push, type PushRow } from './support/write-helpers.js';

const SEED = 20261126;

const char = fc.constantFrom('a', 'Z', '"', '\\', '/', '\n', '\u0001', '\u007f', '\u00e9', '\u2028', '\uffff', '\ud83d\ude00', '{', '[', 't', 'n', '-', '1');
const text = fc.array(char, { maxLength: 6 }).map((cs) => cs.join(''));
const number = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 0.1, 1e21, 1e-7, 123456789012345, 1234567890123456, 2 ** 53, 1e300, 5e-324, 4.35, 1e15, 1e16),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const value = jsonValue(text, number, { arrays: 3, keys: 3 });

/** A payload of app.kinds: any JSON value where validation takes one, each column maybe left out. */
const payload = fc.record(
  { label: value, ratio: fc.oneof(number, fc.constant(null)), amount: fc.oneof(number, fc.constant(null)), flag: fc.oneof(fc.boolean(), value), seen_at: fc.oneof(text, value) },
  { requiredKeys: [] },
);

describe('request hash', () => {
  let s: TestServer;
  let c: ApiClient;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: APP_SCHEMA_SQL });
    c = s.client('rh-user', 'rh-dev');
    await initEmpty(c);
  });
  afterAll(async () => s?.close());

  it('the server hashes staged rows as the client hashed the rows it sent', async () => {
    let bundle = 0;
    let verified = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(payload, { minLength: 1, maxLength: 4 }), fc.boolean(), async (payloads, withKey) => {
        bundle++;
        const rows: PushRow[] = payloads.map((p, i) => {
          const code = `k${bundle}-${i}`;
          return { schema: 'app', table: 'kinds', key: { code }, op: 'INSERT', base_row_version: 0, payload: withKey ? { code, ...p } : p };
        });
        const answer = await push(c, rows, { sourceBundleId: bundle });
        // The commit compares the hashes before it applies anything: a value a column cannot hold
        // is refused after it (push_rejected), so that answer too says the hashes were equal.
        expect(String(answer.body.message ?? ''), JSON.stringify(rows)).not.toMatch(/request_hash/);
        if (answer.body.status === 'committed' || answer.body.error === 'push_rejected') verified++;
        // A refused bundle consumed nothing: its number is the next one again.
        if (answer.body.status !== 'committed') bundle--;
      }),
      { seed: SEED, numRuns: 120 },
    );
    // Every bundle reached the comparison (none was refused before it, by validation).
    expect(verified).toBe(120);
  });
});
