/**
 * Issue 5, a snapshot at scale: 100k rows (the contract's bundle maximum, in one server bundle)
 * paged within the byte budget and the page sizes asked for, with the right row_count and
 * byte_count. Once, on PostgreSQL 17 (vitest.config.ts): the paging is the SQL that
 * read-snapshot.pg.test.ts runs on every project at 1,234 rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server.js';
import { expectStatus, initEmpty } from './support/write-helpers.js';
import { rawGet, rawPost, serverLists } from './support/read-helpers.js';
import { defaultLimits } from '../core/limits.js';
import { jsonStringBytes } from '../core/protocol/index.js';
import { pageBudgetBytes } from '../core/sync/context.js';

describe('a 100k-row snapshot', () => {
  const maxResponseBytes = 256 * 1024;
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { SYNC_LIMIT_MAX_RESPONSE_BYTES: String(maxResponseBytes) } });
  });
  afterAll(async () => s?.close());

  it('pages within the byte budget and page sizes, with the right row_count and byte_count', async () => {
    const c = s.client('big');
    await initEmpty(c);
    let t0 = Date.now();
    const seq = await serverLists(s.t.db, 'big', 100_000);
    const writeMs = Date.now() - t0;
    expect(seq).toBe(1);
    // On a busy machine the write above can outlast the container's catalog cache
    // (catalogRefreshSeconds), and the next request would count the reload as a second round
    // trip; a small request first keeps the figure below the create's own.
    expectStatus(await c.get('/sync/pull?after_bundle_seq=0&max_bundles=1'), 200);
    t0 = Date.now();
    const create = await c.post('/sync/snapshot-sessions');
    const createMs = Date.now() - t0;
    expectStatus(create, 200);
    expect(create.body.row_count).toBe(100_000);
    expect(create.body.snapshot_bundle_seq).toBe(1);
    expect(create.roundTrips).toBe(1);
    // Its first page in the create's answer: cut by the same byte budget, less the session's fields
    // (after a small request, for the catalog cache as above).
    expectStatus(await c.get('/sync/pull?after_bundle_seq=0&max_bundles=1'), 200);
    const withPage = await rawPost(s.url, c, '/sync/snapshot-sessions', { first_page_rows: 5000 });
    expect(withPage.status, withPage.text.slice(0, 300)).toBe(200);
    expect(jsonStringBytes(withPage.text) - 2).toBeLessThanOrEqual(pageBudgetBytes({ ...defaultLimits, maxResponseBytes }));
    expect(withPage.body.first_page.rows.length).toBeGreaterThan(0);
    expect(withPage.body.first_page.rows.length).toBeLessThan(5000);
    expect(withPage.body.first_page.has_more).toBe(true);

    t0 = Date.now();
    const pages: { rows: number; bytes: number; roundTrips: number }[] = [];
    let after = 0;
    let rowBytes = 0;
    const keys = new Set<string>();
    for (;;) {
      // The first pages ask for 500 rows (row-bound); the rest for the maximum (byte-bound).
      const maxRows = pages.length < 3 ? 500 : 5000;
      const page = await rawGet(s.url, c, `/sync/snapshot-sessions/${create.body.snapshot_id}?after_row_ordinal=${after}&max_rows=${maxRows}`);
      expect(page.status, page.text.slice(0, 300)).toBe(200);
      const rows = page.body.rows as any[];
      pages.push({ rows: rows.length, bytes: page.bytes, roundTrips: page.roundTrips });
      expect(page.bytes).toBeLessThanOrEqual(maxResponseBytes);
      expect(rows.length).toBeLessThanOrEqual(maxRows);
      if (pages.length <= 3) expect(rows.length).toBe(500);
      for (const r of rows) {
        keys.add(r.key.id);
        rowBytes += Buffer.byteLength(JSON.stringify(r));
      }
      expect(page.body.next_row_ordinal).toBe(after + rows.length);
      after = page.body.next_row_ordinal;
      if (!page.body.has_more) break;
    }
    const readMs = Date.now() - t0;
    expect(after).toBe(100_000);
    expect(keys.size).toBe(100_000);
    // Byte-bound pages fill most of the budget (the budget is 90% of max_response_bytes).
    const byteBound = pages.slice(3, -1);
    expect(byteBound.length).toBeGreaterThan(10);
    for (const p of byteBound) {
      expect(p.rows).toBeLessThan(5000);
      expect(p.bytes).toBeGreaterThan(maxResponseBytes * 0.6);
    }
    expect(pages.every((p) => p.roundTrips <= 2)).toBe(true);
    // byte_count estimates the rows' JSON size on the wire.
    const ratio = create.body.byte_count / rowBytes;
    console.log(`100k snapshot: server write ${writeMs} ms, create ${createMs} ms, read ${readMs} ms in ${pages.length} pages ` +
      `(${byteBound[0]?.rows} rows/${byteBound[0]?.bytes} B per full page), byte_count ${create.body.byte_count} vs ${rowBytes} B of rows (ratio ${ratio.toFixed(3)})`);
    expect(ratio).toBeGreaterThan(0.8);
    expect(ratio).toBeLessThan(1.5);
  });
});
