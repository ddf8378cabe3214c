/**
 * Issue 5, snapshot sessions: frozen against concurrent commits, source rotation (retirement,
 * reasons, invalid replacements, idempotent retry), expiry and delete, maintenance of expired
 * sessions. The 100k-row snapshot paged within the byte budget is read-snapshot-scale.pg.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type ApiClient } from './support/server.js';
import { expectStatus, initEmpty, list, pushOk, uuid } from './support/write-helpers.js';
import { rawGet, readSnapshot, serverLists } from './support/read-helpers.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { runMaintenance } from '../core/sync/maintenance/maintenance.js';
import { defaultLimits } from '../core/limits.js';
import { sql } from '../core/db/index.js';
import { PROTOCOL_HEADER } from '../core/protocol/index.js';
import { nodesOf, planRecorder, renderBothWays, type PlanNode } from './support/plans.js';

describe('snapshot sessions', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  it('is frozen: a commit after creation never appears in its chunks', async () => {
    const c = s.client('frozen');
    await initEmpty(c);
    await serverLists(s.t.db, 'frozen', 30);
    const create = await c.post('/sync/snapshot-sessions');
    expectStatus(create, 200);
    expect(create.body).toMatchObject({ snapshot_bundle_seq: 1, row_count: 30 });
    await serverLists(s.t.db, 'frozen', 5);
    const { rows } = await readSnapshot(s.url, c, create.body.snapshot_id, 7);
    expect(rows).toHaveLength(30);
    expect(rows.every((r) => r.row_version === 1)).toBe(true);
    expect(new Set(rows.map((r) => r.key.id)).size).toBe(30);
  });

  it('snapshots created while commits land each equal the state at their snapshot_bundle_seq', async () => {
    const c = s.client('racing');
    await initEmpty(c);
    const writer = (async () => {
      for (let i = 1; i <= 25; i++) await serverLists(s.t.db, 'racing', i);
    })();
    const sessions: any[] = [];
    for (let i = 0; i < 8; i++) {
      const create = await c.post('/sync/snapshot-sessions');
      expectStatus(create, 200);
      sessions.push(create.body);
    }
    await writer;
    for (const session of sessions) {
      // Bundle i inserts i rows, nothing is deleted: the state at seq n holds n(n+1)/2 rows.
      const n = session.snapshot_bundle_seq as number;
      expect(session.row_count).toBe((n * (n + 1)) / 2);
      const { rows } = await readSnapshot(s.url, c, session.snapshot_id, 5000);
      expect(rows).toHaveLength(session.row_count);
      expect(Math.max(0, ...rows.map((r) => r.row_version))).toBe(n);
    }
  });

  it('expiry → 410 snapshot_session_expired; delete → 204 then 404', async () => {
    const c = s.client('expiring');
    await initEmpty(c);
    await serverLists(s.t.db, 'expiring', 3);
    const a = await c.post('/sync/snapshot-sessions');
    const b = await c.post('/sync/snapshot-sessions');
    expectStatus(a, 200);
    expect(Date.parse(a.body.expires_at) - Date.now()).toBeGreaterThan((defaultLimits.snapshotSessionTtlSeconds - 60) * 1000);
    await s.t.operator(`UPDATE sync.snapshot_sessions SET expires_at = now() - interval '1s' WHERE snapshot_id = $1`, [a.body.snapshot_id]);
    expectStatus(await c.get(`/sync/snapshot-sessions/${a.body.snapshot_id}`), 410, 'snapshot_session_expired');
    expectStatus(await c.get(`/sync/snapshot-sessions/${b.body.snapshot_id}`), 200);
    const deleted = await c.del(`/sync/snapshot-sessions/${b.body.snapshot_id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expectStatus(await c.get(`/sync/snapshot-sessions/${b.body.snapshot_id}`), 404, 'snapshot_session_not_found');
    expectStatus(await c.del(`/sync/snapshot-sessions/${b.body.snapshot_id}`), 404, 'snapshot_session_not_found');
    expectStatus(await c.get(`/sync/snapshot-sessions/${uuid()}`), 404, 'snapshot_session_not_found');
    expectStatus(await c.get('/sync/snapshot-sessions/not-a-uuid'), 400, 'invalid_request');
    const { rows } = await s.t.exec(`SELECT count(*)::int AS n FROM sync.snapshot_session_rows WHERE snapshot_id = $1`, [b.body.snapshot_id]);
    expect(rows[0].n).toBe(0);
  });

  it('maintenance removes expired push and snapshot sessions and their rows, and keeps live ones', async () => {
    const c = s.client('maint');
    await initEmpty(c);
    await serverLists(s.t.db, 'maint', 4);
    const live = await c.post('/sync/snapshot-sessions');
    const dead = await c.post('/sync/snapshot-sessions');
    const livePush = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 2 });
    const deadPush = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 2 });
    for (const p of [livePush, deadPush]) {
      expectStatus(p, 200);
      expectStatus(await c.post(`/sync/push-sessions/${p.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [list(uuid(), 'staged')] }), 200);
    }
    await s.t.operator(`UPDATE sync.snapshot_sessions SET expires_at = now() - interval '1s' WHERE snapshot_id = $1`, [dead.body.snapshot_id]);
    await s.t.operator(`UPDATE sync.push_sessions SET expires_at = now() - interval '1s' WHERE push_id = $1`, [deadPush.body.push_id]);
    const totals = await runMaintenance(s.t.db, { ...defaultLimits, maintenanceBatchRows: 2 });
    expect(totals.finished).toBe(true);
    expect(totals.snapshot_sessions).toBeGreaterThanOrEqual(1);
    expect(totals.push_sessions).toBeGreaterThanOrEqual(1);
    const count = async (q: string, id: string): Promise<number> => (await s.t.exec(q, [id])).rows[0].n;
    // Rows stored for a session: its chunks since layout 17 (shared with the other session here,
    // created at the same ceiling), its own rows before.
    const snapRows = `SELECT ((SELECT count(*) FROM sync.snapshot_session_rows WHERE snapshot_id = $1)
      + coalesce((SELECT sum(c.row_count) FROM sync.snapshot_sessions p JOIN sync.snapshot_chunks c ON c.data_id = p.data_id WHERE p.snapshot_id = $1), 0))::int AS n`;
    const snaps = 'SELECT count(*)::int AS n FROM sync.snapshot_sessions WHERE snapshot_id = $1';
    const pushRows = 'SELECT count(*)::int AS n FROM sync.push_session_rows WHERE push_id = $1';
    const pushes = 'SELECT count(*)::int AS n FROM sync.push_sessions WHERE push_id = $1';
    expect([await count(snapRows, dead.body.snapshot_id), await count(snaps, dead.body.snapshot_id)]).toEqual([0, 0]);
    expect([await count(pushRows, deadPush.body.push_id), await count(pushes, deadPush.body.push_id)]).toEqual([0, 0]);
    expect([await count(snapRows, live.body.snapshot_id), await count(snaps, live.body.snapshot_id)]).toEqual([4, 1]);
    expect([await count(pushRows, livePush.body.push_id), await count(pushes, livePush.body.push_id)]).toEqual([1, 1]);
    expectStatus(await c.get(`/sync/snapshot-sessions/${dead.body.snapshot_id}`), 404, 'snapshot_session_not_found');
    expectStatus(await c.get(`/sync/snapshot-sessions/${live.body.snapshot_id}`), 200);
  });
});

describe('snapshot chunks (layout 17)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  const dataOf = async (id: string): Promise<string | null> =>
    (await s.t.exec('SELECT data_id::text AS d FROM sync.snapshot_sessions WHERE snapshot_id = $1', [id])).rows[0]?.d ?? null;
  const stored = async (dataId: string): Promise<{ data: number; rows: number }> =>
    (await s.t.exec(`SELECT (SELECT count(*) FROM sync.snapshot_data WHERE data_id = $1)::int AS data,
      coalesce((SELECT sum(row_count) FROM sync.snapshot_chunks WHERE data_id = $1), 0)::int AS rows`, [dataId])).rows[0];

  it('pages of any size and start equal the rows of whole pages, in the same order, also when the budget cuts inside a chunk', async () => {
    const c = s.client('chunk-pages');
    await initEmpty(c);
    await serverLists(s.t.db, 'chunk-pages', 1234);
    const create = await c.post('/sync/snapshot-sessions');
    expectStatus(create, 200);
    const whole = (await readSnapshot(s.url, c, create.body.snapshot_id, 5000)).rows;
    expect(whole).toHaveLength(1234);
    // 1234 rows are three chunks (500, 500, 234): pages starting and ending inside them.
    for (const size of [7, 333, 499, 501, 777]) {
      const { rows } = await readSnapshot(s.url, c, create.body.snapshot_id, size);
      expect(rows.map((r) => r.key.id), `pages of ${size}`).toEqual(whole.map((r) => r.key.id));
    }
    for (const after of [0, 1, 499, 500, 501, 999, 1233]) {
      const page = await rawGet(s.url, c, `/sync/snapshot-sessions/${create.body.snapshot_id}?after_row_ordinal=${after}&max_rows=600`);
      expect(page.body.rows, `after ${after}`).toEqual(whole.slice(after, after + 600));
      expect(page.body.next_row_ordinal).toBe(Math.min(1234, after + 600));
    }
    const past = await rawGet(s.url, c, `/sync/snapshot-sessions/${create.body.snapshot_id}?after_row_ordinal=5000&max_rows=10`);
    expect(past.body).toMatchObject({ rows: [], next_row_ordinal: 5000, has_more: false });
  });

  it('rows come table by table in apply order (parents first), each table in the byte order of its keys', async () => {
    const c = s.client('row-order');
    await initEmpty(c);
    // Text keys whose UTF-8 byte order differs from numeric and from case-folded order.
    const codes = ['9', '10', 'Zed', 'apple', 'éclair', 'Ä', '日本', '😀', 'a\u0301', ''.padEnd(40, 'x')];
    await serverWrite(s.t.db, { userId: 'row-order', sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title) SELECT gen_random_uuid(), ${scope}, 'list ' || g FROM generate_series(1, 40) g`);
      await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body)
        SELECT gen_random_uuid(), ${scope}, (SELECT id FROM app.lists WHERE _sync_scope_id = ${scope} ORDER BY title LIMIT 1), 'item ' || g FROM generate_series(1, 40) g`);
      await tx.query(sql`INSERT INTO app.kinds (code, _sync_scope_id) SELECT unnest(${codes}::text[]), ${scope}`);
    });
    const create = await c.post('/sync/snapshot-sessions');
    expectStatus(create, 200);
    const { rows } = await readSnapshot(s.url, c, create.body.snapshot_id, 7);
    const order = (await s.t.db.query<{ table_name: string }>(sql`SELECT table_name FROM sync.table_catalog WHERE NOT retired ORDER BY apply_order, table_id`)).map((t) => t.table_name);
    expect(order.indexOf('lists')).toBeLessThan(order.indexOf('items'));
    // Each table's rows in one run, the runs in apply order.
    const runs = rows.map((r) => r.table as string).filter((t, i, all) => i === 0 || all[i - 1] !== t);
    expect(runs).toEqual(order.filter((t) => runs.includes(t)));
    expect(runs).toHaveLength(3);
    const bytesOf = (key: unknown) => Buffer.from(String(key), 'utf8');
    for (const table of runs) {
      const keys = rows.filter((r) => r.table === table).map((r) => Object.values(r.key)[0]);
      expect(keys.length, table).toBe(table === 'kinds' ? codes.length : 40);
      expect(keys, table).toEqual([...keys].sort((a, b) => Buffer.compare(bytesOf(a), bytesOf(b))));
    }
  });

  it('rows as arrays (row_form arrays) are the rows as objects, at any page size, named by the page\'s tables; only a reader of arrays gets them', async () => {
    const c = s.client('row-arrays');
    await initEmpty(c);
    await serverWrite(s.t.db, { userId: 'row-arrays', sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title, position) SELECT gen_random_uuid(), ${scope}, 'list "' || g || chr(92), nullif(g % 3, 0) FROM generate_series(1, 700) g`);
      await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body, done, attachment)
        SELECT gen_random_uuid(), ${scope}, (SELECT id FROM app.lists WHERE _sync_scope_id = ${scope} ORDER BY title LIMIT 1), 'item ' || g, g % 2 = 0, decode('00ff', 'hex') FROM generate_series(1, 400) g`);
      await tx.query(sql`INSERT INTO app.kinds (code, _sync_scope_id, big, amount, ratio, meta, seen_at, flag, blob)
        SELECT 'k' || g, ${scope}, 9007199254740993 + g, 1.5 + g, 'NaN'::float8, ${'{"a": [1, null, "x"]}'}::jsonb, '2026-01-02T03:04:05.123456Z', null, null FROM generate_series(1, 5) g`);
    });
    const v2 = { [PROTOCOL_HEADER]: '2' };
    const page = (id: string, query: string, headers: Record<string, string> = v2) => c.request('GET', `/sync/snapshot-sessions/${id}?${query}`, undefined, headers);
    const objects = await c.request('POST', '/sync/snapshot-sessions', {}, v2);
    const arrays = await c.request('POST', '/sync/snapshot-sessions', { row_form: 'arrays' }, v2);
    expectStatus(arrays, 200);
    expect(arrays.body).toMatchObject({ snapshot_bundle_seq: objects.body.snapshot_bundle_seq, row_count: 1105 });
    const whole = (await page(objects.body.snapshot_id, 'max_rows=5000')).body.rows as any[];
    expect(whole).toHaveLength(1105);
    // Rows as arrays, read back into objects with the page's tables.
    const asObjects = (body: any) => (body.rows as any[]).map(([tableId, version, ...values]) => {
      const t = body.tables[String(tableId)];
      const payload = Object.fromEntries(t.columns.map((name: string, i: number) => [name, values[i]]));
      const keyColumn = Object.keys(whole.find((r) => r.table === t.table).key)[0] as string;
      return { schema: t.schema, table: t.table, key: { [keyColumn]: payload[keyColumn] }, row_version: version, payload };
    });
    const tablesOf = (body: any) => Object.values(body.tables).map((t: any) => t.table).sort();
    for (const size of [97, 333, 700, 5000]) {
      const got: any[] = [];
      let after = 0;
      for (;;) {
        const p: any = await page(arrays.body.snapshot_id, `after_row_ordinal=${after}&max_rows=${size}&row_form=arrays`);
        expectStatus(p, 200);
        expect(tablesOf(p.body)).toEqual(['items', 'kinds', 'lists']);
        got.push(...asObjects(p.body));
        expect(p.body.next_row_ordinal).toBe(got.length);
        after = p.body.next_row_ordinal;
        if (!p.body.has_more) break;
      }
      expect(got, `pages of ${size}`).toEqual(whole);
    }
    // Pages of one row where they can go wrong: around each change of table and at the end
    // (every row in pages of one took 1,105 requests on each project).
    const edges = [...whole.flatMap((r, i) => (i > 0 && whole[i - 1].table !== r.table ? [i] : [])), whole.length];
    expect(edges).toHaveLength(3);
    for (const edge of edges) {
      for (let after = edge - 2; after < Math.min(edge + 2, whole.length); after++) {
        const p: any = await page(arrays.body.snapshot_id, `after_row_ordinal=${after}&max_rows=1&row_form=arrays`);
        expectStatus(p, 200);
        expect(tablesOf(p.body)).toEqual(['items', 'kinds', 'lists']);
        expect(asObjects(p.body), `the row after ${after}`).toEqual(whole.slice(after, after + 1));
        expect(p.body).toMatchObject({ next_row_ordinal: after + 1, has_more: after + 1 < whole.length });
      }
    }
    // A session of objects reads the same for a reader of arrays; one of arrays is refused to a reader of objects.
    expect((await page(objects.body.snapshot_id, 'max_rows=5000&row_form=arrays')).body.rows).toEqual(whole);
    expectStatus(await page(arrays.body.snapshot_id, 'max_rows=10'), 410, 'snapshot_session_expired');
    expectStatus(await page(arrays.body.snapshot_id, 'row_form=rows'), 400);
    // Protocol 1 is answered objects (arrays carry protocol 2's values).
    const v1 = await c.request('POST', '/sync/snapshot-sessions', { row_form: 'arrays' });
    const v1Page = await page(v1.body.snapshot_id, 'max_rows=5000&row_form=arrays', {});
    expect(v1Page.body.tables).toBeUndefined();
    expect(v1Page.body.rows).toHaveLength(1105);
  });

  it("a create with first_page_rows answers the session's first page too, as its GET answers it, in either row form", async () => {
    const c = s.client('first-page');
    await initEmpty(c);
    // An empty scope has no page to carry; a create that does not ask carries none.
    const empty = await c.post('/sync/snapshot-sessions', { first_page_rows: 10 });
    expectStatus(empty, 200);
    expect(empty.body.row_count).toBe(0);
    expect(empty.body.first_page).toBeUndefined();
    await serverLists(s.t.db, 'first-page', 1234);
    const plain = await c.post('/sync/snapshot-sessions', {});
    expect(plain.body.first_page).toBeUndefined();
    const v2 = { [PROTOCOL_HEADER]: '2' };
    for (const [rows, form] of [[600, 'objects'], [5, 'arrays']] as const) {
      const create = await c.request('POST', '/sync/snapshot-sessions', { first_page_rows: rows, row_form: form }, v2);
      expectStatus(create, 200);
      expect(create.roundTrips).toBe(2);
      const { first_page: first, ...session } = create.body;
      expect(session).toMatchObject({ row_count: 1234, snapshot_bundle_seq: plain.body.snapshot_bundle_seq });
      const page = await c.request('GET', `/sync/snapshot-sessions/${session.snapshot_id}?after_row_ordinal=0&max_rows=${rows}&row_form=${form}`, undefined, v2);
      expect(first, form).toEqual(page.body);
      expect(first.rows).toHaveLength(rows);
      expect(first.tables === undefined, form).toBe(form === 'objects');
    }
    expectStatus(await c.post('/sync/snapshot-sessions', { first_page_rows: 0 }), 400);
  });

  it('a second device at the same ceiling shares the rendered rows; a commit in between renders anew, and each stays frozen', async () => {
    const a = s.client('chunk-share', 'dev-a');
    const b = s.client('chunk-share', 'dev-b');
    await initEmpty(a);
    await serverLists(s.t.db, 'chunk-share', 20);
    const first = await a.post('/sync/snapshot-sessions');
    const second = await b.post('/sync/snapshot-sessions');
    expectStatus(second, 200);
    expect(second.body).toMatchObject({ snapshot_bundle_seq: 1, row_count: 20, byte_count: first.body.byte_count });
    expect(await dataOf(second.body.snapshot_id)).toBe(await dataOf(first.body.snapshot_id));
    await serverLists(s.t.db, 'chunk-share', 3);
    const third = await b.post('/sync/snapshot-sessions');
    expect(third.body).toMatchObject({ snapshot_bundle_seq: 2, row_count: 23 });
    expect(await dataOf(third.body.snapshot_id)).not.toBe(await dataOf(first.body.snapshot_id));
    expect((await readSnapshot(s.url, b, second.body.snapshot_id)).rows).toEqual((await readSnapshot(s.url, a, first.body.snapshot_id)).rows);
    expect((await readSnapshot(s.url, b, second.body.snapshot_id)).rows).toHaveLength(20);
    expect((await readSnapshot(s.url, b, third.body.snapshot_id)).rows).toHaveLength(23);
    // Another user at the same bundle_seq never shares them.
    const other = s.client('chunk-other');
    await initEmpty(other);
    await serverLists(s.t.db, 'chunk-other', 20);
    const theirs = await other.post('/sync/snapshot-sessions');
    expect(theirs.body.snapshot_bundle_seq).toBe(1);
    expect(await dataOf(theirs.body.snapshot_id)).not.toBe(await dataOf(first.body.snapshot_id));
  });

  it('shared rows outlive the delete or expiry of one session; the last delete leaves them a grace, then maintenance removes them', async () => {
    const a = s.client('chunk-life', 'dev-a');
    const b = s.client('chunk-life', 'dev-b');
    await initEmpty(a);
    await serverLists(s.t.db, 'chunk-life', 700);
    const first = await a.post('/sync/snapshot-sessions');
    const second = await b.post('/sync/snapshot-sessions');
    const data = (await dataOf(first.body.snapshot_id)) as string;
    expect(await dataOf(second.body.snapshot_id)).toBe(data);
    expectStatus(await a.del(`/sync/snapshot-sessions/${first.body.snapshot_id}`), 204);
    await runMaintenance(s.t.db, defaultLimits);
    expect(await stored(data)).toEqual({ data: 1, rows: 700 });
    expect((await readSnapshot(s.url, b, second.body.snapshot_id, 333)).rows).toHaveLength(700);
    // A third session shares them, then expires: the second still reads them.
    const third = await a.post('/sync/snapshot-sessions');
    expect(await dataOf(third.body.snapshot_id)).toBe(data);
    await s.t.operator(`UPDATE sync.snapshot_sessions SET expires_at = now() - interval '1s' WHERE snapshot_id = $1`, [third.body.snapshot_id]);
    await runMaintenance(s.t.db, { ...defaultLimits, maintenanceBatchRows: 1 });
    expect(await stored(data)).toEqual({ data: 1, rows: 700 });
    // The last session deleted: kept for the grace only (a reinstall right after may share them).
    expectStatus(await b.del(`/sync/snapshot-sessions/${second.body.snapshot_id}`), 204);
    const { rows: [grace] } = await s.t.exec(`SELECT expires_at <= now() + interval '2 minutes' AS short FROM sync.snapshot_data WHERE data_id = $1`, [data]);
    expect(grace.short).toBe(true);
    await s.t.operator(`UPDATE sync.snapshot_data SET expires_at = now() - interval '1s' WHERE data_id = $1`, [data]);
    // An expired data set is never shared: a new session renders its own.
    const fourth = await a.post('/sync/snapshot-sessions');
    expect(await dataOf(fourth.body.snapshot_id)).not.toBe(data);
    const totals = await runMaintenance(s.t.db, { ...defaultLimits, maintenanceBatchRows: 1 });
    expect(totals.finished).toBe(true);
    expect(await stored(data)).toEqual({ data: 0, rows: 0 });
    expect((await readSnapshot(s.url, a, fourth.body.snapshot_id)).rows).toHaveLength(700);
  });
});

describe('snapshot create on an analyzed database', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  it("reads the user's row_state once, joined, never once per row, even with statistics from before the user's rows were loaded", async () => {
    // Statistics that know other users only; then a bulk load of one user's rows (as a bench seed
    // or an import leaves them): in `npm run bench` the planner then joined that user's row_state
    // by (user_id, table_id) alone and filtered it for each row, rows × rows (22 s for 100k).
    for (const user of ['stats-a', 'stats-b']) {
      await initEmpty(s.client(user));
      await serverLists(s.t.db, user, 3000);
    }
    await s.t.exec('ANALYZE');
    // Kept stale, as the scenario says: an autovacuum ANALYZE after the load (its timing depends
    // on the machine's load) would tell the planner this user holds a quarter of row_state, and a
    // sequential scan read once is then its right choice (seen beside a CPU burner).
    await s.t.exec('ALTER TABLE sync.row_state SET (autovacuum_enabled = false)');
    const c = s.client('stats-bulk');
    await initEmpty(c);
    const rows = 2000;
    await serverLists(s.t.db, 'stats-bulk', rows);
    const recorder = await planRecorder(s.t.url);
    try {
      const plans = await recorder.record((client) => client.query(`SELECT sync.snapshot_create('stats-bulk', 'stats-bulk-dev', NULL, NULL, NULL, 900)`));
      // The render's query; the probe of the user's size before it stops at SNAPSHOT_PARALLEL_ROWS.
      const render = plans.filter((p) => p.query.includes('ORDER BY 1, 2'));
      expect(render).toHaveLength(1);
      const onRowState = render.flatMap((p) => nodesOf(p.plan)).filter((n) => n['Relation Name'] === 'row_state');
      // Whatever the statistics: the function plans without nested loops (layout 21), so the
      // user's row_state is read once through its key's user prefix and hash- or merge-joined, never
      // re-read per row (a nested loop by user and table turned into a filter per row).
      expect(onRowState.length).toBeGreaterThan(0);
      for (const n of onRowState) {
        expect(n['Index Cond'] ?? '', JSON.stringify(n)).toMatch(/user_id = 'stats-bulk'/);
        expect(n['Actual Loops'] ?? 1, JSON.stringify(n)).toBe(1);
      }
      const examined = onRowState.reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) * (n['Actual Loops'] ?? 1), 0);
      expect(examined).toBeLessThanOrEqual(rows);
    } finally {
      await recorder.close();
      await s.t.exec('ALTER TABLE sync.row_state RESET (autovacuum_enabled)');
    }
    const session = await c.post('/sync/snapshot-sessions');
    expect(session.body.row_count).toBe(rows);
    // Its planner settings are the function's own: the plan cost of a disabled nested loop must
    // not switch on JIT compilation where the server has it (not this embedded build).
    const { rows: settings } = await s.t.exec(`SELECT proconfig FROM pg_proc WHERE oid = 'sync.snapshot_render'::regproc`);
    expect(settings[0]?.proconfig).toEqual(expect.arrayContaining(['enable_nestloop=off', 'jit=off', 'work_mem=64MB']));
  });

  it('renders in parallel where the planner finds it worth it, and the chunks are the same either way', async () => {
    // Every table of the app schema: uuid and text keys, bytea, jsonb (protocol 1's form differs),
    // timestamptz (sync.rfc3339), numeric, double, booleans; more rows than one chunk holds.
    const user = 'parallel-render';
    await initEmpty(s.client(user));
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title, position)
        SELECT gen_random_uuid(), ${scope}, 'list "' || g || '" \\ ' || g, g FROM generate_series(1, 700) g`);
      await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body, done, attachment)
        SELECT gen_random_uuid(), ${scope}, l.id, 'item of ' || l.title, l.position % 2 = 0, decode('00ff' || lpad(to_hex(l.position), 4, '0'), 'hex')
          FROM app.lists l WHERE l._sync_scope_id = ${scope}`);
      await tx.query(sql`INSERT INTO app.kinds (code, _sync_scope_id, big, amount, ratio, meta, seen_at, flag, blob, label)
        SELECT 'k' || g, ${scope}, 9007199254740993 + g, 1.5 * g, g / 7.0, jsonb_build_object('n', g, 'big', 12345678901234567890),
               timestamptz '2026-01-01 00:00:00+00' + g * interval '1 minute', g % 3 = 0, NULL, 'label ' || g FROM generate_series(1, 300) g`);
    });
    for (const form of [1, 2] as const) {
      const { parallel, serial, nodes, settingsKept } = await renderBothWays(s.t.url, user, form);
      // Fails if a function the rows are rendered with is not PARALLEL SAFE, or a fence returns.
      const gather = nodes.find((n) => n['Node Type'] === 'Gather Merge');
      expect(gather?.['Workers Planned'], `form ${form}: ${JSON.stringify(nodes.map((n) => n['Node Type']))}`).toBeGreaterThanOrEqual(1);
      // The rows are rendered by the workers: each one's text is part of what they sort.
      const sorts = nodesOf(gather as PlanNode).filter((n) => n['Node Type'] === 'Sort');
      expect(sorts.some((n) => (n['Sort Key'] ?? []).some((k) => k.includes('row_version')))).toBe(true);
      expect(parallel.reduce((sum, c) => sum + c.row_count, 0)).toBe(1700);
      expect(parallel.length).toBeGreaterThan(3);
      expect(parallel).toEqual(serial);
      expect(settingsKept).toBe(true);
    }
  });
});

describe('source rotation through snapshot create', () => {
  let s: TestServer;
  let old: ApiClient;
  beforeAll(async () => {
    s = await startTestServer();
    old = s.client('rot', 'device-old');
    await initEmpty(old);
    await pushOk(old, [list(uuid(), 'before rotation')], { sourceBundleId: 1 });
  });
  afterAll(async () => s?.close());

  const replacement = (previous: string, next: string, reason: string = 'history_pruned'): unknown => ({
    source_replacement: { previous_source_id: previous, new_source_id: next, reason },
  });

  it('validates reasons: every contract reason parses, anything else is 400', async () => {
    for (const reason of ['rebuild', '', 'HISTORY_PRUNED']) {
      expectStatus(await old.post('/sync/snapshot-sessions', replacement('device-old', `device-x-${reason || 'empty'}`, reason)), 400, 'invalid_request');
    }
    expectStatus(await old.post('/sync/snapshot-sessions', { source_replacement: { previous_source_id: 'device-old', new_source_id: 'device-y' } }), 400, 'invalid_request');
    expectStatus(await old.post('/sync/snapshot-sessions', { source_replacement: { previous_source_id: 'device-old', new_source_id: 'bad id!', reason: 'history_pruned' } }), 400, 'invalid_request');
    expectStatus(await old.post('/sync/snapshot-sessions', { unexpected: true }), 400, 'invalid_request');
    // Nothing was rotated by the refused requests.
    const { rows } = await s.t.exec(`SELECT source_id, status FROM sync.source_state ORDER BY 1`);
    expect(rows.map((r) => `${r.source_id}:${r.status}`)).toEqual(['device-old:active']);
  });

  it('source_replacement_invalid: same ids, header naming neither, new id already in use', async () => {
    expectStatus(await old.post('/sync/snapshot-sessions', replacement('device-old', 'device-old')), 409, 'source_replacement_invalid');
    const stranger = s.client('rot', 'device-stranger');
    expectStatus(await stranger.post('/sync/snapshot-sessions', replacement('device-old', 'device-new')), 409, 'source_replacement_invalid');
    const other = s.client('rot', 'device-other');
    expectStatus(await other.post('/sync/snapshot-sessions'), 200); // registers device-other
    expectStatus(await old.post('/sync/snapshot-sessions', replacement('device-old', 'device-other')), 409, 'source_replacement_invalid');
  });

  it('rotation retires the old source; the same rotation retried is idempotent; the old source is refused with source_retired', async () => {
    for (const reason of ['history_pruned', 'source_sequence_out_of_order', 'source_sequence_changed', 'source_retired']) {
      // Each reason is accepted (a fresh user per reason, so each rotation is a first one).
      const c = s.client(`reason-${reason}`, 'r-old');
      await initEmpty(c);
      expectStatus(await c.post('/sync/snapshot-sessions', replacement('r-old', 'r-new', reason)), 200);
    }
    const first = await old.post('/sync/snapshot-sessions', replacement('device-old', 'device-new', 'source_sequence_changed'));
    expectStatus(first, 200);
    expect(first.body.row_count).toBe(1);
    const retry = await old.post('/sync/snapshot-sessions', replacement('device-old', 'device-new', 'source_sequence_changed'));
    expectStatus(retry, 200);
    expect(retry.body.snapshot_id).not.toBe(first.body.snapshot_id);
    // The retry may also come from the new source (the client switched before the answer arrived).
    const fresh = s.client('rot', 'device-new');
    expectStatus(await fresh.post('/sync/snapshot-sessions', replacement('device-old', 'device-new', 'source_sequence_changed')), 200);

    const retired = { error: 'source_retired', source_id: 'device-old', replaced_by_source_id: 'device-new' };
    const snap = await old.post('/sync/snapshot-sessions');
    expectStatus(snap, 409, 'source_retired');
    expect(snap.body).toMatchObject(retired);
    expect(typeof snap.body.message).toBe('string');
    const push = await old.post('/sync/push-sessions', { source_bundle_id: 2, planned_row_count: 1 });
    expectStatus(push, 409, 'source_retired');
    expect(push.body).toMatchObject(retired);
    const pull = await old.get('/sync/pull?after_bundle_seq=1');
    expectStatus(pull, 409, 'source_retired');
    // Rotating the retired source again to yet another id is invalid, except for the reason
    // source_retired: a device whose source another device retired (a cloned database) gets a
    // fresh source, and the first replacement stands.
    expectStatus(await old.post('/sync/snapshot-sessions', replacement('device-old', 'device-third')), 409, 'source_replacement_invalid');
    expectStatus(await old.post('/sync/snapshot-sessions', replacement('device-old', 'device-third', 'source_retired')), 200);
    const sources = await s.t.exec(`SELECT source_id, status, replaced_by_source_id FROM sync.source_state WHERE source_id IN ('device-old', 'device-new', 'device-third') ORDER BY 1`);
    expect(sources.rows).toEqual([
      { source_id: 'device-new', status: 'reserved', replaced_by_source_id: null },
      { source_id: 'device-old', status: 'retired', replaced_by_source_id: 'device-new' },
      { source_id: 'device-third', status: 'reserved', replaced_by_source_id: null },
    ]);

    // The new source pushes from source_bundle_id 1, and its rows reach everyone.
    const commit = await pushOk(fresh, [list(uuid(), 'after rotation')], { sourceBundleId: 1 });
    expect(commit).toMatchObject({ source_id: 'device-new', source_bundle_id: 1, bundle_seq: 2 });
  });
});
