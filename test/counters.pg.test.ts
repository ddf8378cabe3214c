/**
 * Issue 15 item 4: the counters of /syncx/status count what committed. `bundles_committed` must
 * not count a bundle whose transaction died after it was finalized, and `commit_outcome_unknown`
 * must count the commits whose fate was unknown even when the database was unreachable at the
 * time (counted once it answers again).
 */
import pg from 'pg';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../core/config.js';
import { createPool } from '../core/db/index.js';
import { defaultLimits } from '../core/limits.js';
import { runMaintenance } from '../core/sync/index.js';
import { createRuntime } from '../functions/index.js';
import { startGateway } from '../dev/gateway.js';
import { createDatabase } from './support/pg-server.js';
import { bootstrapAppSchema } from './support/server-db.js';
import { APP_TABLES } from './support/schemas.js';
import { apiClient, startTestServer, TEST_JWT_SECRET, type ApiClient, type TestServer } from './support/server.js';
import { startTcpProxy } from './support/tcp-proxy.js';
import { expectStatus, initEmpty, item, list, push, pushOk, uuid } from './support/write-helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A trigger that sleeps once (per sequence) when it fires, so a test can cut the connection. */
const STALL_ONCE = `
  CREATE SEQUENCE IF NOT EXISTS public.stall_seq;
  CREATE OR REPLACE FUNCTION public.stall_once() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF nextval('public.stall_seq') = 1 THEN PERFORM pg_sleep(20); END IF;
    RETURN NULL;
  END $$;`;

/** Terminates the backend sleeping in the stall trigger, once it is there. */
async function terminateStalled(admin: { query(text: string): Promise<{ rows: Array<Record<string, unknown>> }> }): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const r = await admin.query(`SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event = 'PgSleep' AND query LIKE '%push_commit%'`);
    if (r.rows.some((row) => row['done'])) return;
    await sleep(25);
  }
  throw new Error('no stalled commit to cut');
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('bundles_committed counts what committed', () => {
  let s: TestServer;
  afterAll(async () => s?.close());

  it('a commit cut after its bundle was finalized is not counted; status equals the committed bundles', async () => {
    s = await startTestServer();
    const c = s.client('count-cut');
    await initEmpty(c);
    await pushOk(c, [list(uuid(), 'first')], { sourceBundleId: 1 });
    // The stall fires after sync.finalize_bundle ran (commit marks its session committed last):
    // the bundle is finalized, counted by the old sequence, and then the transaction dies.
    await s.t.exec(`${STALL_ONCE}
      CREATE TRIGGER stall_after_finalize AFTER UPDATE ON sync.push_sessions FOR EACH ROW
        WHEN (NEW.status = 'committed') EXECUTE FUNCTION public.stall_once();`);
    const [answer] = await Promise.all([push(c, [list(uuid(), 'cut')], { sourceBundleId: 2 }), terminateStalled({ query: (text) => s.t.exec(text) })]);
    expectStatus(answer, 503, 'commit_outcome_unknown');
    await s.t.exec(`DROP TRIGGER stall_after_finalize ON sync.push_sessions`);
    await pushOk(c, [list(uuid(), 'third')], { sourceBundleId: 2 });

    const committed = (await s.t.exec(`SELECT coalesce(sum(latest_bundle_seq), 0)::int AS n FROM sync.user_state`)).rows[0].n as number;
    expect(committed).toBe(2);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.bundle_log`)).rows[0].n).toBe(committed);
    const status = await c.get('/syncx/status');
    expectStatus(status, 200);
    expect(status.body.bundle_visibility.bundles_committed).toBe(committed);
    expect(status.body.error_counters.commit_outcome_unknown).toBe(1);
    // Maintenance folds the ledger into its totals; the counts stay what they were.
    const totals = await runMaintenance(s.t.db, defaultLimits);
    expect(totals.finished).toBe(true);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.counter_deltas`)).rows[0].n).toBe(0);
    const folded = await c.get('/syncx/status');
    expect(folded.body.bundle_visibility.bundles_committed).toBe(committed);
    expect(folded.body.error_counters.commit_outcome_unknown).toBe(1);
  });
});

describe('commit_outcome_unknown during an outage', () => {
  it('a commit whose connection is lost while the database is unreachable is counted once it answers again', async () => {
    const url = await createDatabase(inject('pgAdminUrl'), 'counters');
    await bootstrapAppSchema(url);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    cleanups.push(() => admin.end());
    const proxy = await startTcpProxy(url);
    cleanups.push(() => proxy.close());
    const pool = await createPool({ connectionString: proxy.url, max: 4, driver: 'pg', connectTimeoutMs: 500 });
    cleanups.push(() => pool.end());
    const config = loadConfig({ DATABASE_URL: proxy.url, SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(',') });
    const gateway = await startGateway({ runtime: createRuntime(config, pool), auth: { secret: TEST_JWT_SECRET } });
    cleanups.push(() => gateway.close());
    const c: ApiClient = apiClient(gateway.url, 'count-outage');
    await initEmpty(c);
    const listId = uuid();
    await pushOk(c, [list(listId, 'groceries')], { sourceBundleId: 1 });
    await admin.query(`${STALL_ONCE}
      CREATE TRIGGER stall_item AFTER INSERT ON app.items FOR EACH ROW WHEN (NEW.body = 'stall') EXECUTE FUNCTION public.stall_once();`);

    // The commit is in flight when the database becomes unreachable: its connection resets, and
    // so does every attempt to record the unknown outcome.
    const commit = push(c, [item(uuid(), listId, 'stall')], { sourceBundleId: 2 });
    for (let i = 0; i < 400; i++) {
      const r = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`);
      if (r.rows[0].n > 0) break;
      await sleep(25);
    }
    proxy.cut();
    const answer = await commit;
    expectStatus(answer, 503, 'commit_outcome_unknown');
    await terminateStalled(admin);
    expectStatus(await c.get('/syncx/status'), 503);

    proxy.restore();
    expectStatus(await c.get('/sync/pull?after_bundle_seq=0'), 200);
    const status = await c.get('/syncx/status');
    expectStatus(status, 200);
    expect(status.body.error_counters.commit_outcome_unknown).toBe(1);
    expect(status.body.bundle_visibility.bundles_committed).toBe(1);
  });
});
