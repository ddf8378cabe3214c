/**
 * Issue 16, the worker client in chromium: the library's sync loop runs in the sync worker
 * (`start()` through the worker proxy, status events back to the page), syncs after local writes
 * and on long-poll wake-ups, quarantines a rejected row, `rebuild({ rotateSource })` reaches the
 * client (defect 7: the worker's rebuild took no options), and `stop()` stops it. Real OPFS, real
 * HTTP, real PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, type Page } from 'playwright-core';
import { sql } from '../core/db/sql.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { findChromium, launchChromium } from './support/browser.js';
import { signToken, startTestServer, type TestServer } from './support/server.js';
import { HANG_MS, until as untilDone } from './support/until.js';
import { buildWebFixture } from './support/web-fixture.js';
import type { FixtureGlobals } from './support/web/sync-page.js';

const chromiumPath = findChromium();
if (!chromiumPath) console.warn('worker-client.web.test.ts: SKIPPED — no chromium found (install Debian\'s chromium or set CHROMIUM_PATH)');

const USER = 'worker-user';
/** How long a wait for an event gives it before calling it a hang (minutes, test/support/until.ts). */
const WAIT_MS = HANG_MS;

/** Polls the page (a round trip each) less often than a Node-side read. */
const until = <T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = WAIT_MS) => untilDone(what, read, done, timeoutMs, 100);

describe.skipIf(!chromiumPath)('worker client in chromium: the sync loop in the worker', () => {
  let s: TestServer;
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];
  const serverKinds = async () => (await s.t.exec('SELECT code, label FROM app.kinds WHERE _sync_scope_id = $1 ORDER BY code', [USER])).rows as { code: string; label: string }[];
  const evaluate = <T, A = undefined>(fn: (g: FixtureGlobals, arg: A) => T | Promise<T>, arg?: A): Promise<T> =>
    page.evaluate(([body, a]) => new Function('g', 'a', `return (${body})(g, a)`)(globalThis, a) as T, [fn.toString(), arg] as const);

  beforeAll(async () => {
    const dir = await buildWebFixture({ page: 'test/support/web/sync-page.ts', 'lockstep-worker': 'test/support/web/sync-worker.ts' });
    s = await startTestServer({ staticDir: dir });
    browser = await launchChromium(chromiumPath as NonNullable<typeof chromiumPath>);
    page = await (await browser.newContext({ baseURL: s.url })).newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto('/');
    await page.waitForFunction(() => 'openDevice' in globalThis);
    await evaluate((g, token) => g.openDevice('worker-fixture', token), await signToken(USER));
  });
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  it('start() attaches and syncs in the worker; status events reach the page', async () => {
    await evaluate((g, user) => g.client.start({ userId: user, debounceMs: 100, periodicMs: 0 }), USER);
    const status = await until('the loop attached and synced', () => evaluate((g) => g.statuses.at(-1) ?? null), (st) => st?.phase === 'idle' && st.lastSyncedAt !== null);
    expect(status).toMatchObject({ attachedUserId: USER, pendingRows: 0, lastError: null, attach: { status: 'attached', resolution: 'initialize_empty' } });
    expect(await evaluate((g) => g.statuses.map((x) => x.phase))).toContain('syncing');
  });

  it('a token the server refuses is refreshed through the page once and the request goes through; a page whose provider fails gets authentication_failed', async () => {
    // Signed with another secret: the server answers 401 authentication_failed.
    const refusedToken = (user: string) => signToken(user, { secret: 'a-secret-this-server-does-not-know-0123456789' });
    const device = async (user: string, token: string, refresh: { token?: string; fail?: string }) => {
      const other = await (await browser.newContext({ baseURL: s.url })).newPage();
      other.on('pageerror', (e) => errors.push(e.message));
      await other.goto('/');
      await other.waitForFunction(() => 'openDevice' in globalThis);
      await other.evaluate(([u, t, r]) => (globalThis as unknown as FixtureGlobals).openDevice(u, t, r), [user, token, refresh] as const);
      return other;
    };
    const refreshes = (p: Page) => p.evaluate(() => (globalThis as unknown as FixtureGlobals).refreshes);

    // Refused from the first request on (the capabilities the worker reads at open).
    const fresh = await device('worker-refresh', await refusedToken('worker-refresh'), { token: await signToken('worker-refresh') });
    const attached = await fresh.evaluate(() => (globalThis as unknown as FixtureGlobals).client.attach('worker-refresh'));
    expect(attached).toMatchObject({ status: 'attached' });
    expect(await refreshes(fresh)).toBe(1);
    // The fresh token replaced the refused one: the next requests need no refresh.
    await fresh.evaluate(() => (globalThis as unknown as FixtureGlobals).client.sync());
    expect(await refreshes(fresh)).toBe(1);

    // Opened with a good token, then refused; the page's provider fails.
    const failing = await device('worker-refresh-fails', await signToken('worker-refresh-fails'), { fail: 'the identity provider is down' });
    await failing.evaluate(() => (globalThis as unknown as FixtureGlobals).client.pendingStatus());
    await failing.evaluate((t) => (globalThis as unknown as FixtureGlobals).client.setToken(t), await refusedToken('worker-refresh-fails'));
    const refusal = await failing.evaluate(() => (globalThis as unknown as FixtureGlobals).client.attach('worker-refresh-fails').then(
      () => null, (e: { code?: string; message?: string }) => ({ code: e.code, message: e.message })));
    expect(refusal).toMatchObject({ code: 'authentication_failed', message: expect.stringContaining('the identity provider is down') });
    expect(await refreshes(failing)).toBe(1);
    await fresh.context().close();
    await failing.context().close();
  });

  it('a local write is synced by the loop, and a server write arrives by a long-poll wake-up', async () => {
    await evaluate((g) => g.client.run("INSERT INTO kinds (code, label) VALUES ('from-page', 'written in the browser')"));
    await until('the server has the browser write', serverKinds, (rows) => rows.some((r) => r.code === 'from-page'));
    await serverWrite(s.t.db, { userId: USER, sourceId: 'server:test', retainedBundlesPerUser: 10_000 }, (tx, scope) =>
      tx.query(sql`INSERT INTO app.kinds (code, _sync_scope_id, label) VALUES ('from-server', ${scope}, 'written on the server')`));
    // The loop's periodic sync is off: only the watch long poll's wake-up can bring it.
    await until('the page has the server write', () => evaluate((g) => g.client.query("SELECT label FROM kinds WHERE code = 'from-server'")), (rows) => rows.length === 1);
  });

  it('a live query re-runs after a pull without asking the worker: its rows come with the commit\'s tables', async () => {
    await evaluate((g) => g.watchKinds());
    await until('the live query answered', () => evaluate((g) => g.kindResults.at(-1)?.loading), (loading) => loading === false);
    const before = await evaluate((g) => ({ ...g.calls }));
    await serverWrite(s.t.db, { userId: USER, sourceId: 'server:test', retainedBundlesPerUser: 10_000 }, (tx, scope) =>
      tx.query(sql`INSERT INTO app.kinds (code, _sync_scope_id, label) VALUES ('live-from-server', ${scope}, 'pulled into a live query')`));
    const rows = await until('the live query has the pulled row', () => evaluate((g) => g.kindResults.at(-1)?.rows ?? []),
      (r) => r.some((row) => row['code'] === 'live-from-server'));
    expect(rows.find((row) => row['code'] === 'live-from-server')).toEqual({ code: 'live-from-server', label: 'pulled into a live query' });
    // The pull's commit wrote kinds and created its scratch table (a schema change): the worker
    // read both the rows and the tables again itself, so the page asked for neither.
    const after = await evaluate((g) => ({ ...g.calls }));
    expect([after['query'] ?? 0, after['tablesRead'] ?? 0]).toEqual([before['query'] ?? 0, before['tablesRead'] ?? 0]);
    // A write from the page is the same: one call (the write), and the rows arrive with its commit.
    await evaluate((g) => g.client.run("INSERT INTO kinds (code, label) VALUES ('live-from-page', 'written beside a live query')"));
    await until('the live query has the page\'s row', () => evaluate((g) => g.kindResults.at(-1)?.rows ?? []), (r) => r.some((row) => row['code'] === 'live-from-page'));
    const last = await evaluate((g) => ({ ...g.calls }));
    expect([last['query'] ?? 0, last['tablesRead'] ?? 0, last['run'] ?? 0]).toEqual([before['query'] ?? 0, before['tablesRead'] ?? 0, (before['run'] ?? 0) + 1]);
  });

  it('a rejected row is quarantined in the worker and the rest commits; the page lists and drops it', async () => {
    await evaluate((g) => g.client.transaction([
      { sql: "INSERT INTO kinds (code, label) VALUES ('dup-1', 'same label')" },
      { sql: "INSERT INTO kinds (code, label) VALUES ('dup-2', 'same label')" },
      { sql: "INSERT INTO kinds (code, label) VALUES ('fine', 'another label')" },
    ]));
    await until('one row quarantined', () => evaluate((g) => g.statuses.at(-1)?.quarantinedRows ?? 0), (n) => n === 1);
    const quarantined = await evaluate((g) => g.client.quarantined());
    expect(quarantined).toEqual([expect.objectContaining({ table: 'kinds', code: 'push_rejected', violation: expect.objectContaining({ constraint: 'kinds_label_key' }) })]);
    const codes = (await serverKinds()).map((r) => r.code);
    expect(codes).toContain('fine');
    expect(codes.filter((c) => c.startsWith('dup-'))).toHaveLength(1);
    await evaluate((g, id) => g.client.dropQuarantined(id), quarantined[0]?.id as number);
    expect(await evaluate((g) => g.client.quarantined())).toEqual([]);
  });

  it('rebuild({ rotateSource }) rotates the source through the worker (defect 7)', async () => {
    const before = await evaluate((g) => g.client.pendingStatus());
    const rebuilt = await evaluate((g) => g.client.rebuild({ rotateSource: 'source_retired' }));
    expect(rebuilt.rotatedTo).toMatch(/^src-/);
    const after = await evaluate((g) => g.client.pendingStatus());
    expect(after.sourceId).toBe(rebuilt.rotatedTo);
    expect(after.sourceId).not.toBe(before.sourceId);
    // The new source pushes from bundle 1.
    await evaluate((g) => g.client.run("INSERT INTO kinds (code, label) VALUES ('after-rotation', 'new source')"));
    await until('the server has the write from the new source', serverKinds, (rows) => rows.some((r) => r.code === 'after-rotation'));
    const { rows } = await s.t.exec(`SELECT source_id, source_bundle_id::int AS n FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1 AND source_id = $2`, [USER, after.sourceId]);
    expect(rows).toEqual([{ source_id: after.sourceId, n: 1 }]);
  });

  it('stop() stops the loop', async () => {
    await evaluate((g) => g.client.stop());
    await until('the loop reported stopped', () => evaluate((g) => g.statuses.at(-1)?.phase), (phase) => phase === 'stopped');
    expect(errors).toEqual([]);
  });
});
