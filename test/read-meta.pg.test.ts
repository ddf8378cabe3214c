/**
 * Issue 5, the meta endpoints: capabilities carries every field of docs/protocol.md §5.7 and every
 * limit of §8; /syncx/health answers 200 and 503 (before bootstrap, database gone); /syncx/status
 * carries lifecycle, tables, features, visibility, floors and error counters that move.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startTestServer, apiClient, TEST_JWT_SECRET, type TestServer } from './support/server.js';
import { openTestDb, runtimePoolOptions } from './support/server-db.js';
import { createDatabase } from './support/pg-server.js';
import { startPgBouncer } from './support/pgbouncer.js';
import { createPool } from '../core/db/index.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { expectStatus, initEmpty, list, push, pushOk, uuid } from './support/write-helpers.js';
import { loadConfig } from '../core/config.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { createRuntime } from '../functions/index.js';
import { startGateway } from '../dev/gateway.js';
import { PROTOCOL_VERSION } from '../core/protocol/index.js';
import { LAYOUT_VERSION } from '../core/layout/version.js';

const LIMITS_7: Record<string, number> = {
  default_rows_per_push_chunk: 1000,
  max_rows_per_push_chunk: 5000,
  max_rows_per_bundle: 100000,
  max_bytes_per_bundle: 64 * 1024 * 1024,
  max_request_bytes: 4 * 1024 * 1024,
  max_response_bytes: 4 * 1024 * 1024,
  default_bundles_per_pull: 100,
  max_bundles_per_pull: 1000,
  default_rows_per_page: 1000,
  max_rows_per_page: 5000,
  push_session_ttl_seconds: 900,
  snapshot_session_ttl_seconds: 900,
  initialization_lease_ttl_seconds: 900,
  retained_bundles_per_user: 10000,
  watch_max_wait_seconds: 25,
};

describe('capabilities and status', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { SYNC_LIMIT_MAX_ROWS_PER_PAGE: '4321' } });
  });
  afterAll(async () => s?.close());

  it('capabilities: every field of protocol §5.7, table specs with PostgreSQL types, every §8 limit', async () => {
    const caps = await s.client('alice').get('/sync/capabilities');
    expectStatus(caps, 200);
    const body = caps.body;
    expect(body).toMatchObject({ protocol_version: PROTOCOL_VERSION, schema_version: 1, app_name: 'lockstep-test' });
    expect(body.registered_tables).toEqual(['app.lists', 'app.items', 'app.kinds']);
    const byName = Object.fromEntries(body.registered_table_specs.map((t: any) => [`${t.schema}.${t.table}`, t]));
    expect(byName['app.items']).toEqual({
      schema: 'app',
      table: 'items',
      sync_key: { column: 'id', kind: 'uuid' },
      columns: [
        { name: 'id', type: 'uuid', nullable: false, has_default: false },
        { name: 'list_id', type: 'uuid', nullable: false, has_default: false },
        { name: 'body', type: 'text', nullable: false, has_default: false },
        { name: 'done', type: 'boolean', nullable: false, has_default: true },
        { name: 'attachment', type: 'bytea', nullable: true, has_default: false },
      ],
      // What a client must manage too before it can push items (issue 16 defect 8).
      foreign_keys: [{ references: { schema: 'app', table: 'lists' } }],
    });
    expect(byName['app.lists'].foreign_keys).toEqual([]);
    expect(byName['app.kinds'].sync_key).toEqual({ column: 'code', kind: 'text' });
    expect(Object.fromEntries(byName['app.kinds'].columns.map((c: any) => [c.name, c.type]))).toEqual({
      code: 'text', big: 'bigint', amount: 'numeric(20,4)', ratio: 'double precision', meta: 'jsonb',
      seen_at: 'timestamp with time zone', flag: 'boolean', blob: 'bytea', label: 'text',
    });
    expect(JSON.stringify(body)).not.toContain('_sync_scope_id');
    expect(Object.keys(body.features).length).toBeGreaterThan(0);
    for (const v of Object.values(body.features)) expect(typeof v).toBe('boolean');
    for (const [name, value] of Object.entries(LIMITS_7)) {
      expect(body.bundle_limits[name], name).toBe(name === 'max_rows_per_page' ? 4321 : value);
    }
  });

  it('status: lifecycle, tables, features, visibility, floors and counters that move', async () => {
    const c = s.client('alice');
    const before = await c.get('/syncx/status');
    expectStatus(before, 200);
    expect(before.body.lifecycle).toMatchObject({ ready: true, layout_version: LAYOUT_VERSION, min_safe_version: expect.any(Number), schema_version: 1 });
    expect(before.body.registered_tables).toEqual(['app.lists', 'app.items', 'app.kinds']);
    expect(before.body.features).toEqual((await c.get('/sync/capabilities')).body.features);
    expect(before.body.retained_floor).toMatchObject({ retained_bundles_per_user: 10000 });
    for (const name of ['rejected_direct_writes', 'history_pruned', 'push_conflicts', 'push_rejected', 'commit_outcome_unknown']) {
      expect(before.body.error_counters[name], name).toBe(0);
    }
    // Status needs no credential.
    const anonymous = await fetch(`${s.url}/syncx/status`);
    expect(anonymous.status).toBe(200);

    await initEmpty(c);
    const id = uuid();
    await pushOk(c, [list(id, 'one')], { sourceBundleId: 1 });
    expect((await push(c, [list(id, 'stale', 0)], { sourceBundleId: 2 })).body.error).toBe('push_conflict');
    expect((await push(c, [{ ...list(uuid(), 'x'), payload: { title: null } }], { sourceBundleId: 2 })).body.error).toBe('push_rejected');
    expectStatus(await c.get('/sync/pull?after_bundle_seq=99'), 409, 'history_pruned');
    await s.t.exec('DELETE FROM app.lists').catch(() => undefined);
    const after = await c.get('/syncx/status');
    expect(after.body.error_counters).toMatchObject({ rejected_direct_writes: 1, history_pruned: 1, push_conflicts: 1, push_rejected: 1, commit_outcome_unknown: 0 });
    expect(after.body.bundle_visibility.bundles_committed).toBe(1);
    expect(after.body.bundle_visibility.users_registered_max_pk).toBeGreaterThanOrEqual(1);
  });

  it('health: 200 with status healthy, no credential needed', async () => {
    const res = await fetch(`${s.url}/syncx/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'healthy' });
  });
});

describe('health 503', () => {
  it('before bootstrap: health 503 unhealthy, status and sync routes 503 service_unavailable; after bootstrap 200', async () => {
    const t = await openTestDb({ schemaSql: APP_SCHEMA_SQL });
    const config = loadConfig({ DATABASE_URL: t.url, SYNC_TABLES: 'app.lists:id,app.items:id,app.kinds:code' });
    const gateway = await startGateway({ runtime: createRuntime(config, t.db.pool), auth: { secret: TEST_JWT_SECRET } });
    try {
      const c = apiClient(gateway.url, 'alice');
      const health = await c.get('/syncx/health');
      expectStatus(health, 503);
      expect(health.body).toMatchObject({ status: 'unhealthy' });
      expect(typeof health.body.reason).toBe('string');
      expectStatus(await c.get('/syncx/status'), 503, 'service_unavailable');
      expectStatus(await c.get('/sync/pull?after_bundle_seq=0'), 503, 'service_unavailable');
      expectStatus(await c.get('/sync/capabilities'), 503, 'service_unavailable');
      await bootstrap(t.db, { tables: config.tables });
      expectStatus(await c.get('/syncx/health'), 200);
      // The failed catalog load was not cached: the same container serves once ready.
      expectStatus(await c.get('/sync/capabilities'), 200);
    } finally {
      await gateway.close();
      await t.close();
    }
  });

  it('a runtime whose database was dropped: health 503, reads 503 service_unavailable (not 500)', async () => {
    // Own database and pool (pools swallow errors of idle clients), so the forced drop below
    // terminates nothing the test would have to catch.
    const url = await createDatabase(inject('pgAdminUrl'), 'dropped');
    const setup = new pg.Client({ connectionString: url });
    await setup.connect();
    await setup.query(APP_SCHEMA_SQL);
    await setup.end();
    // Behind PgBouncer a dropped database does not fail the client's query: PgBouncer keeps
    // retrying the server login and holds the query until its query_wait_timeout (120 s by
    // default), then fails it (08P01), which is the runtime's 503. The shared PgBouncer of the
    // project keeps that default, so the pooled run uses a private PgBouncer with a short wait:
    // the same path, in seconds instead of minutes.
    const bouncer = inject('pgRuntime').bouncerPort !== undefined ? await startPgBouncer(inject('pgAdminUrl'), { queryWaitTimeoutSeconds: 3 }) : undefined;
    const poolOptions = runtimePoolOptions(url, 4);
    const pool = await createPool(bouncer ? { ...poolOptions, connectionString: bouncer.rewrite(url) } : poolOptions);
    const config = loadConfig({ DATABASE_URL: url, SYNC_TABLES: 'app.lists:id,app.items:id,app.kinds:code' });
    const runtime = createRuntime(config, pool);
    await bootstrap(runtime.db, { tables: config.tables });
    const gateway = await startGateway({ runtime, auth: { secret: TEST_JWT_SECRET } });
    const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await admin.connect();
    try {
      const c = apiClient(gateway.url, 'alice');
      expectStatus(await c.get('/syncx/health'), 200);
      expectStatus(await c.get('/sync/capabilities'), 200);
      // FORCE terminates the runtime pool's connections; the pool itself stays in use.
      await admin.query(`DROP DATABASE "${new URL(url).pathname.slice(1)}" WITH (FORCE)`);
      const health = await c.get('/syncx/health');
      expectStatus(health, 503);
      expect(health.body).toMatchObject({ status: 'unhealthy' });
      const read = await c.get('/sync/pull?after_bundle_seq=0');
      expectStatus(read, 503, 'service_unavailable');
      expect(read.headers.get('retry-after')).toBe('1');
    } finally {
      await gateway.close();
      await admin.end();
      await pool.end().catch(() => undefined);
      await bouncer?.stop();
    }
  });
});
