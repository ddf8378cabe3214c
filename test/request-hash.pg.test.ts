/**
 * The request hash the server computes equals the client's RFC 8785 hash of the rows it sent, for
 * any JSON value in any column validation lets through, both ways the server has of computing it:
 * from the texts the edge rendered for each chunk (sync.push_request_hash, layout 28 on), and
 * from the staged rows by SQL generated per table (sync.push_request_rows_hash: sessions some of
 * whose chunks came from a build before layout 28). A commit never answers "request_hash does
 * not match" for rows sent as hashed. Seeded, so every run checks the same cases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { jsonValue } from './support/json-arbitrary.js';
import { initEmpty, requestHash, type PushRow } from './support/write-helpers.js';

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
        // Staged, then hashed both ways before the commit (which deletes the staged rows).
        const hash = requestHash(rows);
        const create = await c.post('/sync/push-sessions', { source_bundle_id: bundle, planned_row_count: rows.length, request_hash: hash });
        expect(create.body.status).toBe('staging');
        const chunk = await c.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: 0, rows });
        expect(chunk.status, JSON.stringify(chunk.body)).toBe(200);
        const [both] = (await s.t.exec(`SELECT sync.push_request_hash($1, $2::uuid) AS texts, sync.push_request_rows_hash($1, $2::uuid) AS rows,
            (SELECT text_rows FROM sync.push_sessions WHERE user_id = $1 AND push_id = $2::uuid) AS text_rows`, ['rh-user', create.body.push_id])).rows;
        expect(both, JSON.stringify(rows)).toEqual({ texts: hash, rows: hash, text_rows: rows.length });
        const answer = await c.post(`/sync/push-sessions/${create.body.push_id}/commit`);
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

  it('a session staged partly without texts (a chunk from a build before layout 28) is hashed from its rows, and a wrong hash is still refused', async () => {
    const u = s.client('rh-mixed', 'rh-mixed-dev');
    await initEmpty(u);
    const rows: PushRow[] = Array.from({ length: 5 }, (_, i) => ({ schema: 'app', table: 'kinds', key: { code: `m${i}` }, op: 'INSERT', base_row_version: 0, payload: { label: { n: i, s: `é${i}` }, ratio: i / 3 } }));
    const hashOf = async (sourceBundleId: number, hash: string) => {
      const create = await u.post('/sync/push-sessions', { source_bundle_id: sourceBundleId, planned_row_count: rows.length, request_hash: hash });
      expect(create.body.status).toBe('staging');
      const pushId = create.body.push_id as string;
      // The first chunk through the edge (with its text), the rest as an older build stages it.
      expect((await u.post(`/sync/push-sessions/${pushId}/chunks`, { start_row_ordinal: 0, rows: rows.slice(0, 2) })).status).toBe(200);
      const staged = rows.slice(2).map((r) => ({ t: 0, k: r.key['code'], o: 1, b: 0, p: r.payload }));
      const [answer] = (await s.t.exec(`SELECT sync.push_chunk($1, $2, $3::uuid, 2, jsonb_agg(x || jsonb_build_object('t', c.table_id) ORDER BY o), 100, 'old-build', 1000000000, 268435456, 300, 1::smallint) AS a
          FROM jsonb_array_elements($4::jsonb) WITH ORDINALITY e(x, o), sync.table_catalog c WHERE c.schema_name = 'app' AND c.table_name = 'kinds' GROUP BY c.table_id`,
      ['rh-mixed', 'rh-mixed-dev', pushId, JSON.stringify(staged)])).rows;
      expect(answer.a).toEqual({ push_id: pushId, next_expected_row_ordinal: rows.length });
      const [state] = (await s.t.exec(`SELECT text_rows, sync.push_request_hash($1, $2::uuid) AS h FROM sync.push_sessions WHERE user_id = $1 AND push_id = $2::uuid`, ['rh-mixed', pushId])).rows;
      return { pushId, textRows: state.text_rows as number, hash: state.h as string };
    };
    const right = await hashOf(1, requestHash(rows));
    expect(right).toMatchObject({ textRows: 2, hash: requestHash(rows) });
    const committed = await u.post(`/sync/push-sessions/${right.pushId}/commit`);
    expect(committed.body).toMatchObject({ status: 'committed', row_count: rows.length });

    const other = rows.map((r) => ({ ...r, key: { code: `${r.key['code']}x` }, payload: { ...r.payload } }));
    rows.splice(0, rows.length, ...other);
    const wrong = await hashOf(2, requestHash(rows).replace(/^./, (d) => (d === '0' ? '1' : '0')));
    expect(wrong.hash).toBe(requestHash(rows));
    const refused = await u.post(`/sync/push-sessions/${wrong.pushId}/commit`);
    expect(refused.body).toMatchObject({ error: 'invalid_request' });
    expect(String(refused.body.message)).toMatch(/request_hash does not match/);
  });
});
