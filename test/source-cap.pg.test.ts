/**
 * Issue 26 item 14: a user's sources (devices) were unbounded (300 requests left 301 rows). Now
 * at most `max_sources_per_user` sources that are not retired (published in bundle_limits; a SET
 * clause of sync.check_source that bootstrap installs from the limits, and changes when they
 * change): one more is `429 rate_limited`. Maintenance retires sources idle for
 * `source_idle_retire_seconds`; a retired source is answered `source_retired` and recovers by
 * rotation, and it no longer counts, so a new device can register.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { defaultLimits } from '../core/limits.js';
import { runMaintenance } from '../core/sync/index.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './support/schemas.js';
import { openTestDb, type TestDb } from './support/server-db.js';
import { serveTestDb, type TestServer } from './support/server.js';
import { expectStatus, initEmpty } from './support/write-helpers.js';

const CAP = 5;

describe('sources per user are capped, and idle ones are retired', () => {
  let t: TestDb;
  let s: TestServer;
  const limits = { ...defaultLimits, maxSourcesPerUser: CAP };
  beforeAll(async () => {
    t = await openTestDb({ schemaSql: APP_SCHEMA_SQL });
    await bootstrap(t.db, { tables: APP_TABLES, bounds: limits });
    s = await serveTestDb(t, { env: { SYNC_LIMIT_MAX_SOURCES_PER_USER: String(CAP) } });
    await initEmpty(s.client('ursula', 'dev-0'));
  });
  afterAll(async () => {
    await s?.close();
  });

  const sources = async (): Promise<string[]> =>
    (await t.exec(`SELECT source_id || ':' || status AS s FROM sync.source_state ORDER BY source_id`)).rows.map((r) => r.s as string);
  const age = (source: string) =>
    t.operator(`UPDATE sync.source_state SET last_active_at = now() - interval '100 days', created_at = now() - interval '100 days' WHERE source_id = $1`, [source]);

  it('the cap is published, and one source beyond it is 429 rate_limited on every registering route', async () => {
    const caps = await s.client('ursula', 'dev-0').get('/sync/capabilities');
    expect(caps.body.bundle_limits).toMatchObject({ max_sources_per_user: CAP, source_idle_retire_seconds: defaultLimits.sourceIdleRetireSeconds });
    for (let d = 1; d < CAP; d++) expectStatus(await s.client('ursula', `dev-${d}`).post('/sync/connect', { has_local_pending_rows: false }), 200);
    const extra = s.client('ursula', 'dev-extra');
    for (const answer of [
      await extra.post('/sync/connect', { has_local_pending_rows: false }),
      await extra.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 }),
      await extra.post('/sync/snapshot-sessions', {}),
    ]) {
      expectStatus(answer, 429, 'rate_limited');
      expect(answer.body.limit).toBe('max_sources_per_user');
      expect(answer.headers.get('retry-after')).not.toBeNull();
    }
    // Known sources keep working; pure reads register nothing.
    expectStatus(await s.client('ursula', 'dev-0').get('/sync/pull?after_bundle_seq=0'), 200);
    expectStatus(await s.client('ursula', 'dev-other').get('/sync/pull?after_bundle_seq=0'), 200);
    expect(await sources()).toEqual(Array.from({ length: CAP }, (_, d) => `dev-${d}:active`));
  });

  it('maintenance retires an idle source; it is source_retired, recovers by rotation, and a new device fits again', async () => {
    await age('dev-1');
    await age('dev-2');
    const totals = await runMaintenance(t.db, limits);
    expect(totals.sources_retired).toBe(2);
    const retired = await s.client('ursula', 'dev-1').post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(retired, 409, 'source_retired');
    expect(retired.body).toMatchObject({ source_id: 'dev-1', replaced_by_source_id: null });
    // The device rotates to a new source (rebuild + rotate, as after any retirement).
    const rotated = await s.client('ursula', 'dev-1').post('/sync/snapshot-sessions', {
      source_replacement: { previous_source_id: 'dev-1', new_source_id: 'dev-1b', reason: 'source_retired' },
    });
    expectStatus(rotated, 200);
    expectStatus(await s.client('ursula', 'dev-1b').post('/sync/connect', { has_local_pending_rows: false }), 200);
    // dev-2's place is free: a new device registers; the next one is over the cap again.
    expectStatus(await s.client('ursula', 'dev-extra').post('/sync/connect', { has_local_pending_rows: false }), 200);
    expectStatus(await s.client('ursula', 'dev-more').post('/sync/connect', { has_local_pending_rows: false }), 429, 'rate_limited');
    expect((await sources()).filter((x) => !x.endsWith(':retired'))).toHaveLength(CAP);
    // Maintenance retires nothing that acted lately.
    expect((await runMaintenance(t.db, limits)).sources_retired).toBe(0);
  });

  it('bootstrap installs the cap from the limits, and a changed cap makes it run', async () => {
    const config = async (): Promise<string> => (await t.exec(`SELECT array_to_string(proconfig, ',') AS c FROM pg_proc WHERE proname = 'check_source'`)).rows[0].c;
    expect(await config()).toContain(`lockstep.max_sources_per_user=${CAP}`);
    expect((await bootstrap(t.db, { tables: APP_TABLES, bounds: limits })).unchanged).toBe(true);
    await bootstrap(t.db, { tables: APP_TABLES, bounds: { ...limits, maxSourcesPerUser: CAP + 1 } });
    expect(await config()).toContain(`lockstep.max_sources_per_user=${CAP + 1}`);
    expectStatus(await s.client('ursula', 'dev-more').post('/sync/connect', { has_local_pending_rows: false }), 200);
  });
});
