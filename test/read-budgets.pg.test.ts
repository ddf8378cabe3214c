/**
 * Issue 15 item 2, response amplification: pages are budgeted in the bytes Lambda counts (the body
 * escaped as a JSON string inside the function result), so quote-heavy rows never make a pull,
 * committed-rows or snapshot page exceed max_response_bytes once escaped; and a row whose rendered
 * form no response could carry (a small pushed array of 1e308 renders 309 digits per element) is
 * refused at commit with 413 payload_too_large, committing nothing — by push and by server writes.
 * Large bodies are gzipped for clients that accept it (issue 18), never beyond the budget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { defaultLimits, limitsFromEnv } from '../core/limits.js';
import { pageBudgetBytes, rowWireBytesMax } from '../core/sync/context.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { SyncError } from '../core/errors.js';
import { sql } from '../core/db/index.js';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { toHttp } from '../functions/edge/http.js';
import { startTestServer, signToken, type TestServer, type ApiClient } from './support/server.js';
import { expectStatus, initEmpty, push, pushOk, type PushRow } from './support/write-helpers.js';
import { pullAll, snapshotAll, type RawAnswer } from './support/read-helpers.js';

const SCHEMA = `
CREATE SCHEMA b;
CREATE TABLE b.notes (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  body text,
  nums double precision[],
  PRIMARY KEY (_sync_scope_id, id)
);
`;

const maxResponseBytes = 64 * 1024;
const limits = limitsFromEnv({ SYNC_LIMIT_MAX_RESPONSE_BYTES: String(maxResponseBytes) });

const note = (id: string, payload: Record<string, unknown>): PushRow => ({
  schema: 'b', table: 'notes', key: { id }, op: 'INSERT', base_row_version: 0, payload: { id, ...payload },
});

/** The bytes a page costs inside a Lambda function result: its body as a JSON string, less the quotes. */
const escapedBytes = (page: RawAnswer): number => Buffer.byteLength(JSON.stringify(page.text)) - 2;

describe('page budgets count escaped bytes; rows no page could carry are refused', () => {
  let s: TestServer;
  let c: ApiClient;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA, tables: parseTables('b.notes:id'), env: { SYNC_LIMIT_MAX_RESPONSE_BYTES: String(maxResponseBytes) } });
    c = s.client('quotes');
    await initEmpty(c);
  });
  afterAll(async () => s?.close());

  it('quote-heavy rows: every page stays within the budget once escaped, and pages are well filled', async () => {
    // Each body is 2,000 quotes and backslashes: ~4 kB in the row text, ~8 kB escaped again.
    const body = '"\\'.repeat(1000);
    let seq = 0;
    for (let b = 0; b < 4; b++) {
      seq = (await pushOk(c, Array.from({ length: 10 }, (_, i) => note(`n${b}-${i}`, { body })), { sourceBundleId: b + 1 })).bundle_seq;
    }
    const pulled = await pullAll(s.url, c, 0, 1000);
    expect(pulled.bundles.map((b) => b.rows.length)).toEqual([10, 10, 10, 10]);
    const snapshot = await snapshotAll(s.url, c, { maxRows: 5000 });
    expect(snapshot.rows).toHaveLength(40);
    expect(snapshot.rows.every((r) => r.payload.body === body)).toBe(true);
    const pages = [...pulled.pages, ...snapshot.pages];
    for (const page of pages) {
      expect(escapedBytes(page)).toBeLessThanOrEqual(pageBudgetBytes(limits));
      expect(page.bytes).toBeLessThanOrEqual(maxResponseBytes);
    }
    // Escaped, 40 such rows are ~330 kB: several pages each, and none far below the budget but the last.
    expect(snapshot.pages.length).toBeGreaterThanOrEqual(5);
    for (const page of snapshot.pages.slice(0, -1)) expect(escapedBytes(page)).toBeGreaterThan(pageBudgetBytes(limits) - 9000);
    expect(seq).toBe(4);
  });

  it('large pages are compressed when the client accepts it (and only then): brotli first, gzip else, decoding to the same body', async () => {
    const token = await signToken('quotes');
    const get = async (encoding: string) => {
      const res = await fetch(`${s.url}/sync/committed-bundles/1/rows`, { headers: { authorization: `Bearer ${token}`, 'sync-source-id': c.sourceId, 'accept-encoding': encoding } });
      return { encoding: res.headers.get('content-encoding'), text: await res.text() };
    };
    const plain = await get('identity');
    const gzipped = await get('gzip, deflate');
    expect(plain.encoding).toBeNull();
    expect(gzipped.encoding).toBe('gzip');
    expect(gzipped.text).toBe(plain.text);
    expect((await get('gzip;q=0')).encoding).toBeNull();
    // What browsers send: brotli, which compresses a page of rows about twice as fast.
    const browser = await get('gzip, deflate, br, zstd');
    expect(browser.encoding).toBe('br');
    expect(browser.text).toBe(plain.text);
    expect((await get('gzip, br;q=0.5')).encoding).toBe('gzip');
    expect((await get('br, gzip;q=0')).encoding).toBe('br');
    expect((await get('br;q=0, gzip;q=0, *;q=0')).encoding).toBeNull();
    // The compressed result as Lambda counts it (base64) is under the escaped body it replaces.
    // In parts, as the page readers answer it: compressed one by one, they decode to the same text.
    const cut = Math.floor(plain.text.length / 3);
    const answer = await toHttp({ status: 200, body: { rawParts: [plain.text.slice(0, cut), plain.text.slice(cut, 2 * cut), plain.text.slice(2 * cut)] } }, 1, 'gzip');
    expect(answer.isBase64Encoded).toBe(true);
    expect((answer.body as string).length).toBeLessThan(Buffer.byteLength(JSON.stringify(plain.text)));
    expect(gunzipSync(Buffer.from(answer.body as string, 'base64')).toString('utf8')).toBe(plain.text);
    const brotli = await toHttp({ status: 200, body: { rawParts: [plain.text.slice(0, cut), plain.text.slice(cut, 2 * cut), plain.text.slice(2 * cut)] } }, 1, 'br');
    expect(brotli.headers['content-encoding']).toBe('br');
    expect((brotli.body as string).length).toBeLessThan(Buffer.byteLength(JSON.stringify(plain.text)));
    expect(brotliDecompressSync(Buffer.from(brotli.body as string, 'base64')).toString('utf8')).toBe(plain.text);
  });

  it('a row whose rendered form exceeds any page is 413 payload_too_large at commit, and nothing commits', async () => {
    const amp = s.client('amplified');
    await initEmpty(amp);
    // ~1.4 kB pushed; 309 digits per element once PostgreSQL renders it: ~62 kB per 200 elements.
    const rows = [note('small', { body: 'fine' }), note('amplified', { nums: Array(250).fill(1e308) })];
    expect(JSON.stringify(rows).length).toBeLessThan(4000);
    const answer = await push(amp, rows, { sourceBundleId: 1 });
    expectStatus(answer, 413, 'payload_too_large');
    expect(answer.body.message).toContain('amplified');
    // The row is named, so a client sets it aside alone and pushes the rest (issue 23 item 6).
    expect(answer.body.violation).toEqual({ sqlstate: 'LS413', constraint: null, schema: 'b', table: 'notes', column: null, key: { id: 'amplified' } });
    const { rows: [state] } = await s.t.exec(`SELECT latest_bundle_seq::int AS seq FROM sync.user_state WHERE user_id = 'amplified'`);
    expect(state.seq).toBe(0);
    const { rows: [business] } = await s.t.exec(`SELECT count(*)::int AS n FROM b.notes WHERE _sync_scope_id = 'amplified'`);
    expect(business.n).toBe(0);
    // The same source bundle commits once the row fits.
    const ok = await pushOk(amp, [note('small', { body: 'fine' }), note('amplified', { nums: Array(50).fill(1e308) })], { sourceBundleId: 1 });
    expect(ok.bundle_seq).toBe(1);
    expect((await pullAll(s.url, amp, 0)).bundles[0].rows).toHaveLength(2);
  });

  it('a server write of such a row is refused with the same typed error', async () => {
    const user = 'server-amplified';
    await initEmpty(s.client(user));
    const write = serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser, rowWireBytesMax: rowWireBytesMax(limits) },
      async (tx, scope) => {
        await tx.query(sql`INSERT INTO b.notes (id, _sync_scope_id, nums) SELECT 'big', ${scope}, array_agg(1e308::float8) FROM generate_series(1, 300)`);
      });
    await expect(write).rejects.toSatisfy((e) => e instanceof SyncError && e.code === 'payload_too_large');
    const { rows: [business] } = await s.t.exec(`SELECT count(*)::int AS n FROM b.notes WHERE _sync_scope_id = $1`, [user]);
    expect(business.n).toBe(0);
  });
});
