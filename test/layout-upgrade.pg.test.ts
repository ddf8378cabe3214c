/**
 * Issue 14, upgrading Lockstep: a database of the first release (layout 1, test/fixtures/
 * layout-v1.sql) upgrades in place to this build's layout with its data, bundles and open
 * sessions intact and pulls continuous across the upgrade; a fresh install equals every
 * migration applied in order; before the upgrade this build answers a typed 503 naming it; and a
 * rolling deploy keeps serving in both directions within the safe range.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { describeLayout } from '../core/bootstrap/describe.js';
import { migrateLayout } from '../core/bootstrap/migrate.js';
import { MIGRATIONS } from '../core/bootstrap/migrations/index.js';
import { type Migration } from '../core/bootstrap/migrations/migration.js';
import { managedFunction } from '../core/layout/managed-sql.js';
import { LAYOUT_VERSION } from '../core/layout/version.js';
import { Isolation, type Queryable } from '../core/db/index.js';
import { openAppDb, type TestDb } from './support/server-db.js';
import { openV1Db, V1 } from './support/layout-fixture.js';
import { serveTestDb, type TestServer } from './support/server.js';
import { APP_TABLES } from './support/schemas.js';
import { pullAll, readSnapshot, snapshotAll } from './support/read-helpers.js';
import { bundleHash, expectStatus, initEmpty, list, pushOk, uuid } from './support/write-helpers.js';

/** Everything that must match between two databases of the same layout: managed objects, catalog, meta. */
async function layoutOf(t: TestDb): Promise<unknown> {
  const description = await t.db.runTx((tx) => describeLayout(tx, 2), { readOnly: true });
  const catalog = (await t.exec(`SELECT * FROM sync.table_catalog ORDER BY table_id`)).rows;
  const meta = (await t.exec(`SELECT key, value FROM sync.meta WHERE key IN ('layout_version', 'min_safe_version', 'schema_version', 'ready', 'layout_description', 'layout_description_format') ORDER BY key`)).rows;
  return { description, catalog, meta };
}

describe('a fresh install equals the first release upgraded', () => {
  it('same managed objects, catalog and meta after bootstrap, whichever way the database got there', async () => {
    const fresh = await openAppDb();
    const upgraded = await openV1Db();
    try {
      const result = await bootstrap(upgraded.db, { tables: APP_TABLES });
      expect(result).toMatchObject({ created: false, layoutFrom: 1, layoutTo: LAYOUT_VERSION, unchanged: false });
      expect(await layoutOf(upgraded)).toEqual(await layoutOf(fresh));
      // And the upgrade is done once: the next bootstrap only verifies, read only.
      expect(await bootstrap(upgraded.db, { tables: APP_TABLES })).toMatchObject({ unchanged: true, layoutFrom: LAYOUT_VERSION });
    } finally {
      await fresh.close();
      await upgraded.close();
    }
  });
});

describe('upgrading a database of the first release', () => {
  let s: TestServer;
  let before: { bundles: unknown[]; rows: unknown[]; rowState: number };

  beforeAll(async () => {
    const t = await openV1Db();
    const q = async (text: string) => (await t.exec(text)).rows;
    before = {
      bundles: await q(`SELECT u.user_id, b.bundle_seq, b.source_id, b.source_bundle_id, b.row_count, b.bundle_hash FROM sync.bundle_log b JOIN sync.user_state u USING (user_pk) ORDER BY 1, 2`),
      rows: await q(`SELECT _sync_scope_id, id::text, title FROM app.lists ORDER BY 1, 2`),
      rowState: Number((await q(`SELECT count(*) AS n FROM sync.row_state`))[0]?.n),
    };
    s = await serveTestDb(t);
  });
  afterAll(async () => s?.close());

  it('before bootstrap this build answers a typed 503 naming the upgrade, health says why, nothing is written', async () => {
    const alice = s.client('alice', 'alice-phone');
    const health = await alice.get('/syncx/health');
    expectStatus(health, 503);
    expect(health.body).toMatchObject({ status: 'unhealthy', reason: 'layout_upgrade_required' });
    expect(health.body.detail).toMatch(/run bootstrap/);
    for (const answer of [await alice.get('/sync/pull?after_bundle_seq=1'), await alice.post('/sync/connect', { has_local_pending_rows: false })]) {
      expectStatus(answer, 503, 'service_unavailable');
      expect(answer.body.reason).toBe('layout_upgrade_required');
      expect(answer.headers.get('retry-after')).not.toBeNull();
    }
  });

  it('bootstrap upgrades it in place: bundles, rows and row versions untouched', async () => {
    const result = await bootstrap(s.t.db, { tables: APP_TABLES });
    expect(result).toMatchObject({ layoutFrom: 1, layoutTo: LAYOUT_VERSION, schemaVersion: 1, applied: [] });
    const q = async (text: string) => (await s.t.exec(text)).rows;
    expect(await q(`SELECT u.user_id, b.bundle_seq, b.source_id, b.source_bundle_id, b.row_count, b.bundle_hash FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) ORDER BY 1, 2`)).toEqual(before.bundles);
    expect(await q(`SELECT _sync_scope_id, id::text, title FROM app.lists ORDER BY 1, 2`)).toEqual(before.rows);
    expect(Number((await q(`SELECT count(*) AS n FROM sync.row_state`))[0]?.n)).toBe(before.rowState);
    expect(await q(`SELECT key FROM sync.meta WHERE key = 'layout_code_hash'`)).toEqual([]);
    const health = await s.client('alice').get('/syncx/health');
    expectStatus(health, 200);
    expect(health.body).toMatchObject({ status: 'healthy', layout_version: LAYOUT_VERSION, schema_version: 1, pending_schema_changes: [] });
  });

  it('the push session staged before the upgrade takes its second chunk and commits after it', async () => {
    const alice = s.client('alice', 'alice-phone');
    const [session] = (await s.t.exec(`SELECT push_id::text, next_row_ordinal FROM sync.push_sessions WHERE status = 'staging'`)).rows;
    expect(session).toMatchObject({ next_row_ordinal: 1 });
    const row = { schema: 'app', table: 'items', key: { id: V1.staged2 }, op: 'INSERT', base_row_version: 0,
      payload: { id: V1.staged2, list_id: V1.aliceList, body: 'uploaded after the upgrade' } };
    expectStatus(await alice.post(`/sync/push-sessions/${session.push_id}/chunks`, { start_row_ordinal: 1, rows: [row] }), 200);
    const commit = await alice.post(`/sync/push-sessions/${session.push_id}/commit`);
    expectStatus(commit, 200);
    expect(commit.body).toMatchObject({ status: 'committed', bundle_seq: 5, source_bundle_id: 4, row_count: 2 });
  });

  it('pulls are continuous across the upgrade: the retained history, then the bundle committed after it, every hash intact', async () => {
    const alice = s.client('alice', 'alice-phone');
    const log = await pullAll(s.url, alice, 1);
    expect(log.bundles.map((b) => b.bundle_seq)).toEqual([2, 3, 4, 5]);
    for (const b of log.bundles) expect(bundleHash(b.rows)).toBe(b.bundle_hash);
    expect(log.bundles.at(-1).rows.map((r: any) => r.key.id)).toEqual([V1.staged, V1.staged2]);
    const bob = s.client('bob', 'bob-phone');
    expect((await pullAll(s.url, bob, 3)).bundles.map((b) => b.bundle_seq)).toEqual([4, 5, 6]);
    expectStatus(await bob.get('/sync/pull?after_bundle_seq=0'), 409, 'history_pruned');
  });

  it('the snapshot session opened before the upgrade still pages, and new snapshots match the tables', async () => {
    const alice = s.client('alice', 'alice-phone');
    const [open] = (await s.t.exec(`SELECT snapshot_id::text, row_count FROM sync.snapshot_sessions WHERE expires_at > now()`)).rows;
    const old = await readSnapshot(s.url, alice, open.snapshot_id, 2);
    expect(old.rows.length).toBe(open.row_count);
    const fresh = await snapshotAll(s.url, alice);
    expect(fresh.rows.map((r: any) => Object.values(r.key)[0]).sort()).toEqual(
      (await s.t.exec(`SELECT id::text AS k FROM app.lists WHERE _sync_scope_id = 'alice' UNION ALL SELECT id::text FROM app.items WHERE _sync_scope_id = 'alice'
                       UNION ALL SELECT code FROM app.kinds WHERE _sync_scope_id = 'alice' ORDER BY 1`)).rows.map((r) => r.k).sort());
  });

  it('the scope that was initializing finishes with its lease, the retired source stays retired, adopted rows hydrate', async () => {
    const carol = s.client('carol', 'carol-phone');
    const [lease] = (await s.t.exec(`SELECT initialization_id::text FROM sync.scope_state WHERE status = 'initializing'`)).rows;
    const committed = await pushOk(carol, [list(uuid(), 'first of carol')], { sourceBundleId: 1, initializationId: lease.initialization_id });
    expect(committed.bundle_seq).toBe(1);
    const retired = await s.client('alice', 'alice-old-laptop').post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(retired, 409, 'source_retired');
    expect(retired.body.replaced_by_source_id).toBe('alice-laptop');
    const adopted = s.client('adopted-user', 'adopted-dev');
    await initEmpty(adopted);
    const rows = (await snapshotAll(s.url, adopted)).rows;
    expect(rows.find((r: any) => r.key.id === V1.adoptedList)?.payload).toMatchObject({ title: 'from before bootstrap' });
    expect(rows.find((r: any) => r.key.code === 'k1')?.payload).toMatchObject({ big: '9007199254740993', amount: '12.5000' });
  });
});

// Issue 28: layout 18 keys every per-user table by user_id. A database at layout 17 (the first
// release's, upgraded that far, plus rows of every table layout 17 has) migrates with its data.
describe('a database at layout 17 upgrades to 18 with its data: every per-user row keyed by its user', () => {
  const BY_USER_PK = ['scope_state', 'source_state', 'row_state', 'bundle_log', 'bundle_rows', 'push_sessions', 'snapshot_sessions',
    'snapshot_data', 'user_quota', 'user_outcomes', 'ws_connections'];
  const CHILDREN: [string, string, string][] = [['push_session_rows', 'push_sessions', 'push_id'], ['snapshot_session_rows', 'snapshot_sessions', 'snapshot_id'],
    ['snapshot_chunks', 'snapshot_data', 'data_id']];

  it('user_id from user_state (children through their session or data set), counters folded, user_pk and the global sequences gone', async () => {
    const t = await openV1Db();
    try {
      expect(await bootstrap(t.db, { tables: APP_TABLES, targetLayoutVersion: 17 })).toMatchObject({ layoutFrom: 1, layoutTo: 17 });
      // Rows of the tables layout 17 added or the fixture leaves empty, as layout 17's functions
      // wrote them (triggers off: this build's trigger bodies are layout 18's).
      await t.exec(`BEGIN; SET LOCAL session_replication_role = replica;
        INSERT INTO sync.snapshot_data (data_id, user_pk, snapshot_bundle_seq, render_key, row_count, byte_count, created_at, expires_at)
          SELECT '0d000000-0000-4000-8000-000000000001', user_pk, latest_bundle_seq, 'r', 2, 10, now(), now() + interval '1 hour' FROM sync.user_state WHERE user_id = 'alice';
        INSERT INTO sync.snapshot_chunks (data_id, first_ordinal, row_count, wire_bytes, body)
          VALUES ('0d000000-0000-4000-8000-000000000001', 0, 1, 4, 'a'), ('0d000000-0000-4000-8000-000000000001', 1, 1, 4, 'b');
        INSERT INTO sync.ws_connections (connection_id, user_pk, source_id, connected_at, expires_at)
          SELECT 'conn-' || user_id, user_pk, 'dev', now(), now() + interval '1 hour' FROM sync.user_state;
        INSERT INTO sync.user_outcomes (user_pk, last_conflict_at, last_conflict) SELECT user_pk, now(), '{}' FROM sync.user_state WHERE user_id = 'bob';
        INSERT INTO sync.counter_deltas (name, delta) VALUES ('bundles_committed', 2);
        SELECT nextval('sync.counter_push_conflicts'), nextval('sync.counter_push_conflicts'), nextval('sync.counter_history_pruned');
        COMMIT`);
      const perUser = async (sql: string): Promise<unknown[]> => (await t.exec(`SELECT user_id, count(*)::int AS n FROM (${sql}) x GROUP BY 1 ORDER BY 1`)).rows;
      const expected = new Map<string, unknown[]>();
      for (const table of BY_USER_PK) expected.set(table, await perUser(`SELECT u.user_id FROM sync.${table} r JOIN sync.user_state u USING (user_pk)`));
      for (const [table, parent, key] of CHILDREN) {
        expected.set(table, await perUser(`SELECT u.user_id FROM sync.${table} r JOIN sync.${parent} p USING (${key}) JOIN sync.user_state u USING (user_pk)`));
      }
      const totals = async (): Promise<Record<string, number>> =>
        Object.fromEntries((await t.exec(`SELECT name, value::int AS v FROM sync.counter_totals`)).rows.map((r) => [r.name, r.v]));
      const before = await totals();

      // Bootstrap applies 0018 and what follows (and rewrites the catalog's generated SQL), as an operator's upgrade does.
      expect(await bootstrap(t.db, { tables: APP_TABLES })).toMatchObject({ layoutFrom: 17, layoutTo: LAYOUT_VERSION });
      for (const [table, rows] of expected) {
        expect(rows.length, `${table} has rows to migrate`).toBeGreaterThan(0);
        expect(await perUser(`SELECT user_id FROM sync.${table}`), table).toEqual(rows);
      }
      expect((await t.exec(`SELECT table_name FROM information_schema.columns WHERE table_schema = 'sync' AND column_name = 'user_pk'`)).rows).toEqual([]);
      expect((await t.exec(`SELECT sequencename FROM pg_sequences WHERE schemaname = 'sync'`)).rows.map((r) => r.sequencename)).toEqual(['counter_rejected_direct_writes']);
      const after = await totals();
      expect(after['push_conflicts']).toBe((before['push_conflicts'] ?? 0) + 2);
      expect(after['history_pruned']).toBe((before['history_pruned'] ?? 0) + 1);
      expect((await t.exec(`SELECT user_id, name, delta::int FROM sync.counter_deltas`)).rows).toEqual([{ user_id: '', name: 'bundles_committed', delta: 2 }]);
      // And it serves: a device pulls what was committed before, and commits after.
      const s = await serveTestDb(t);
      try {
        const alice = s.client('alice', 'alice-phone');
        const [state] = (await t.exec(`SELECT u.retained_floor::int AS floor, u.latest_bundle_seq::int AS latest, s.last_source_bundle_id::int AS sbid
          FROM sync.user_state u JOIN sync.source_state s USING (user_id) WHERE u.user_id = 'alice' AND s.source_id = 'alice-phone'`)).rows;
        const pulled = await pullAll(s.url, alice, state.floor);
        expect(pulled.bundles.map((b) => b.bundle_seq).at(-1)).toBe(state.latest);
        const next = await pushOk(alice, [list(uuid(), 'after layout 18')], { sourceBundleId: state.sbid + 1 });
        expect(next.bundle_seq).toBe(state.latest + 1);
      } finally {
        await s.close();
      }
    } finally {
      await t.close().catch(() => undefined);
    }
  });
});

/** A stand-in for the next release: it adds a function and keeps serving the build before it. */
const NEXT: Migration = {
  version: LAYOUT_VERSION + 1,
  minSafeVersion: LAYOUT_VERSION,
  description: 'test stand-in for the next release: adds one function',
  functions: [managedFunction(`CREATE OR REPLACE FUNCTION sync.next_release_marker() RETURNS integer LANGUAGE sql IMMUTABLE AS $fn$ SELECT 1 $fn$`)],
};

async function applyNext(t: TestDb): Promise<void> {
  await t.db.runTx(async (tx: Queryable) => {
    await migrateLayout(tx, LAYOUT_VERSION, NEXT.version, [...MIGRATIONS, NEXT]);
  }, { isolation: Isolation.readCommitted });
}

describe('a rolling deploy keeps serving in both directions within the safe range', () => {
  const thisBuild = { version: LAYOUT_VERSION, minServed: LAYOUT_VERSION };
  const nextBuild = { version: NEXT.version, minServed: LAYOUT_VERSION };

  it('this build keeps serving after the next release upgraded the layout (old functions, new layout)', async () => {
    const t = await openAppDb();
    const s = await serveTestDb(t, { build: thisBuild });
    try {
      const c = s.client('roll-old', 'roll-old-dev');
      await initEmpty(c);
      const first = await pushOk(c, [list(uuid(), 'before')], { sourceBundleId: 1 });
      await applyNext(t);
      expect((await t.exec(`SELECT value FROM sync.meta WHERE key = 'layout_version'`)).rows[0].value).toBe(String(NEXT.version));
      s.runtime.invalidateCatalog();
      const second = await pushOk(c, [list(uuid(), 'after')], { sourceBundleId: 2 });
      expect(second.bundle_seq).toBe(first.bundle_seq + 1);
      expect((await pullAll(s.url, c, 0)).bundles.map((b) => b.bundle_seq)).toEqual([1, 2]);
      expectStatus(await c.get('/syncx/health'), 200);
      // Bootstrap of this build against the newer layout changes nothing and succeeds (a rollback deploy).
      expect(await bootstrap(t.db, { tables: APP_TABLES })).toMatchObject({ unchanged: true, layoutFrom: NEXT.version, layoutTo: NEXT.version });
      // A layout that rules this build out is a typed 503 naming the way out.
      await t.operator(`UPDATE sync.meta SET value = $1 WHERE key = 'min_safe_version'`, [String(NEXT.version)]);
      s.runtime.invalidateCatalog();
      const refused = await c.get('/sync/pull?after_bundle_seq=0');
      expectStatus(refused, 503, 'service_unavailable');
      expect(refused.body).toMatchObject({ reason: 'layout_upgrade_required' });
      expect(refused.body.detail).toMatch(/deploy a newer Lockstep build/);
    } finally {
      await s.close();
    }
  });

  it('the next build serves this layout until bootstrap upgrades it (new functions, old layout)', async () => {
    const t = await openAppDb();
    const s = await serveTestDb(t, { build: nextBuild });
    try {
      const c = s.client('roll-new', 'roll-new-dev');
      await initEmpty(c);
      await pushOk(c, [list(uuid(), 'served by the next build on the old layout')], { sourceBundleId: 1 });
      expectStatus(await c.get('/syncx/health'), 200);
      await applyNext(t);
      s.runtime.invalidateCatalog();
      await pushOk(c, [list(uuid(), 'and after its upgrade')], { sourceBundleId: 2 });
      expect((await pullAll(s.url, c, 0)).bundles.map((b) => b.bundle_seq)).toEqual([1, 2]);
    } finally {
      await s.close();
    }
  });

  it('a layout older than a build serves is a typed 503 until bootstrap', async () => {
    const t = await openAppDb();
    const s = await serveTestDb(t, { build: { version: NEXT.version, minServed: NEXT.version } });
    try {
      const c = s.client('roll-ahead', 'roll-ahead-dev');
      const answer = await c.post('/sync/connect', { has_local_pending_rows: false });
      expectStatus(answer, 503, 'service_unavailable');
      expect(answer.body).toMatchObject({ reason: 'layout_upgrade_required' });
      await applyNext(t);
      s.runtime.invalidateCatalog();
      await initEmpty(c);
    } finally {
      await s.close();
    }
  });
});
