/**
 * Issue 3, what a fresh bootstrap does to existing data and to later writers: adoption of rows
 * that predate it, the direct-write guard (PG 16 and 17 alike), partitioned registered tables,
 * The `npm run bootstrap` CLI's exit codes are in bootstrap-cli.pg.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type ApiClient } from './support/server.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { parseTables } from '../core/config.js';
import { expectStatus, initEmpty, pushOk, uuid } from './support/write-helpers.js';

const A_LIST = '0a000000-0000-4000-8000-000000000001';
const A_ITEM = '0a000000-0000-4000-8000-000000000002';
const B_LIST = '0b000000-0000-4000-8000-000000000001';

const SEED = `
INSERT INTO app.lists (id, _sync_scope_id, title, position) VALUES
  ('${A_LIST}', 'alice', 'alice list', 1), ('${B_LIST}', 'bob', 'bob list', 2);
INSERT INTO app.items (id, _sync_scope_id, list_id, body, attachment) VALUES ('${A_ITEM}', 'alice', '${A_LIST}', 'milk', '\\x0102');
INSERT INTO app.kinds (code, _sync_scope_id, big, label) VALUES ('k1', 'bob', 9007199254740993, 'x');
`;

async function snapshotRows(c: ApiClient): Promise<{ session: any; rows: any[] }> {
  const create = await c.post('/sync/snapshot-sessions');
  expectStatus(create, 200);
  const rows: any[] = [];
  let after = 0;
  for (;;) {
    const page = await c.get(`/sync/snapshot-sessions/${create.body.snapshot_id}?after_row_ordinal=${after}`);
    expectStatus(page, 200);
    rows.push(...page.body.rows);
    after = page.body.next_row_ordinal;
    if (!page.body.has_more) break;
  }
  return { session: create.body, rows };
}

async function counter(s: TestServer, name: string): Promise<number> {
  const st = await s.client('status-reader').get('/syncx/status');
  expectStatus(st, 200);
  return Number(st.body.error_counters[name]);
}

describe('adoption of rows that predate bootstrap', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: APP_SCHEMA_SQL + SEED });
  });
  afterAll(async () => s?.close());

  it('gives every existing row a row_state entry in its own user stream', async () => {
    const { rows } = await s.t.exec(`
      SELECT u.user_id, c.table_name, r.row_version::int AS v, r.deleted
        FROM sync.row_state r JOIN sync.user_state u USING (user_id) JOIN sync.table_catalog c USING (table_id)
       ORDER BY 1, 2`);
    expect(rows).toEqual([
      { user_id: 'alice', table_name: 'items', v: 1, deleted: false },
      { user_id: 'alice', table_name: 'lists', v: 1, deleted: false },
      { user_id: 'bob', table_name: 'kinds', v: 1, deleted: false },
      { user_id: 'bob', table_name: 'lists', v: 1, deleted: false },
    ]);
  });

  it("a snapshot returns the user's adopted rows and none of another user's", async () => {
    const alice = await snapshotRows(s.client('alice'));
    expect(alice.session.row_count).toBe(2);
    expect(alice.session.snapshot_bundle_seq).toBe(1);
    expect(alice.rows.map((r) => `${r.table}:${Object.values(r.key)[0]}`).sort()).toEqual([`items:${A_ITEM}`, `lists:${A_LIST}`]);
    expect(alice.rows.every((r) => r.row_version === 1)).toBe(true);
    const item = alice.rows.find((r) => r.table === 'items');
    expect(item.payload).toEqual({ id: A_ITEM, list_id: A_LIST, body: 'milk', done: false, attachment: 'AQI=' });
    const bob = await snapshotRows(s.client('bob'));
    expect(bob.rows.map((r) => `${r.table}:${Object.values(r.key)[0]}`).sort()).toEqual(['kinds:k1', `lists:${B_LIST}`]);
    expect(bob.rows.find((r) => r.table === 'kinds').payload.big).toBe('9007199254740993');
    expect(JSON.stringify([alice, bob])).not.toContain('_sync_scope_id');
  });

  it('pull from 0 answers history_pruned for an adopted user', async () => {
    const before = await counter(s, 'history_pruned');
    const answer = await s.client('alice').get('/sync/pull?after_bundle_seq=0');
    expectStatus(answer, 409, 'history_pruned');
    expect(await counter(s, 'history_pruned')).toBe(before + 1);
    // After hydrating at snapshot_bundle_seq 1 the user pulls normally.
    const after = await s.client('alice').get('/sync/pull?after_bundle_seq=1');
    expectStatus(after, 200);
    expect(after.body).toMatchObject({ stable_bundle_seq: 1, bundles: [], has_more: false });
  });

  it('an adopted row is updated with base_row_version 1', async () => {
    const c = s.client('alice');
    const commit = await pushOk(c, [{ schema: 'app', table: 'lists', key: { id: A_LIST }, op: 'UPDATE', base_row_version: 1, payload: { title: 'renamed' } }], { sourceBundleId: 1 });
    expect(commit.bundle_seq).toBe(2);
  });
});

describe('direct writes to registered tables', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: APP_SCHEMA_SQL + SEED });
  });
  afterAll(async () => s?.close());

  const DIRECT: { name: string; sql: string }[] = [
    { name: 'INSERT', sql: `INSERT INTO app.lists (id, _sync_scope_id, title) VALUES ('${uuid()}', 'alice', 'sneaky')` },
    { name: 'UPDATE', sql: `UPDATE app.lists SET title = 'sneaky' WHERE id = '${A_LIST}'` },
    { name: 'UPDATE of no row', sql: `UPDATE app.lists SET title = 'sneaky' WHERE false` },
    { name: 'DELETE', sql: `DELETE FROM app.items WHERE id = '${A_ITEM}'` },
    { name: 'TRUNCATE', sql: `TRUNCATE app.kinds` },
    { name: 'TRUNCATE inside bundle context', sql: `BEGIN; SELECT set_config('lockstep.scope', 'alice', true); TRUNCATE app.items; COMMIT` },
    { name: 'TRUNCATE ... CASCADE of the parent', sql: `TRUNCATE app.lists CASCADE` },
  ];
  for (const d of DIRECT) {
    it(`${d.name} outside a bundle is rejected and counted`, async () => {
      const before = await counter(s, 'rejected_direct_writes');
      const error = await s.t.exec(d.sql).then(() => null, (e: { code?: string; message?: string }) => e);
      await s.t.exec('ROLLBACK').catch(() => undefined);
      expect(error?.code, String(error?.message)).toBe('42501');
      expect(error?.message).toMatch(/lockstep: (direct|TRUNCATE)/);
      expect(await counter(s, 'rejected_direct_writes')).toBeGreaterThan(before);
    });
  }

  it('nothing changed: the seeded rows are intact', async () => {
    const { rows } = await s.t.exec(`SELECT (SELECT count(*) FROM app.lists)::int AS l, (SELECT count(*) FROM app.items)::int AS i,
      (SELECT count(*) FROM app.kinds)::int AS k, (SELECT title FROM app.lists WHERE id = '${A_LIST}') AS title`);
    expect(rows[0]).toEqual({ l: 2, i: 1, k: 1, title: 'alice list' });
  });
});

const PARTITIONED_SQL = `
CREATE SCHEMA p;
CREATE TABLE p.notes (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  body text NOT NULL,
  PRIMARY KEY (_sync_scope_id, id)
) PARTITION BY LIST (_sync_scope_id);
CREATE TABLE p.notes_alice PARTITION OF p.notes FOR VALUES IN ('alice');
CREATE TABLE p.notes_rest PARTITION OF p.notes DEFAULT;
CREATE TABLE p.tags (
  name text NOT NULL,
  _sync_scope_id text NOT NULL,
  note_id uuid,
  PRIMARY KEY (_sync_scope_id, name),
  FOREIGN KEY (_sync_scope_id, note_id) REFERENCES p.notes (_sync_scope_id, id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
) PARTITION BY HASH (_sync_scope_id);
CREATE TABLE p.tags_0 PARTITION OF p.tags FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE p.tags_1 PARTITION OF p.tags FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO p.notes VALUES ('0c000000-0000-4000-8000-000000000001', 'carol', 'adopted');
`;

describe('partitioned registered tables (list and hash on _sync_scope_id)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: PARTITIONED_SQL, tables: parseTables('p.notes:id,p.tags:name') });
  });
  afterAll(async () => s?.close());

  it('bootstrap guards every partition', async () => {
    const { rows } = await s.t.exec(`SELECT tgrelid::regclass::text AS rel, tgname FROM pg_trigger WHERE tgname LIKE '\\_lockstep\\_guard%' ORDER BY 1, 2`);
    const rels = new Set(rows.map((r) => r.rel));
    for (const rel of ['p.notes', 'p.notes_alice', 'p.notes_rest', 'p.tags', 'p.tags_0', 'p.tags_1']) expect(rels.has(rel), rel).toBe(true);
  });

  it('push, pull and snapshot work, and each user sees only their partition rows', async () => {
    for (const user of ['alice', 'dave']) {
      const c = s.client(user);
      await initEmpty(c);
      const note = uuid();
      const commit = await pushOk(c, [
        { schema: 'p', table: 'notes', key: { id: note }, op: 'INSERT', base_row_version: 0, payload: { body: `${user} note` } },
        { schema: 'p', table: 'tags', key: { name: 'red' }, op: 'INSERT', base_row_version: 0, payload: { note_id: note } },
      ], { sourceBundleId: 1 });
      expect(commit.row_count).toBe(2);
      const pulled = await c.get('/sync/pull?after_bundle_seq=0');
      expectStatus(pulled, 200);
      expect(pulled.body.bundles.flatMap((b: any) => b.rows).map((r: any) => r.table)).toEqual(['notes', 'tags']);
      const snap = await snapshotRows(c);
      expect(snap.rows.map((r) => r.payload.body ?? r.payload.note_id).sort()).toEqual([`${user} note`, note].sort());
    }
    const { rows } = await s.t.exec(`SELECT tableoid::regclass::text AS part, _sync_scope_id AS scope FROM p.notes ORDER BY 2`);
    expect(rows).toEqual([
      { part: 'p.notes_alice', scope: 'alice' },
      { part: 'p.notes_rest', scope: 'carol' },
      { part: 'p.notes_rest', scope: 'dave' },
    ]);
    const carol = await snapshotRows(s.client('carol'));
    expect(carol.rows.map((r) => r.payload.body)).toEqual(['adopted']);
  });

  it('direct DML and TRUNCATE on a partition are rejected', async () => {
    for (const statement of [
      `INSERT INTO p.notes_alice VALUES ('${uuid()}', 'alice', 'sneaky')`,
      `UPDATE p.notes_rest SET body = 'sneaky'`,
      `DELETE FROM p.tags_1`,
      `DELETE FROM p.tags_0`,
      `TRUNCATE p.notes_alice CASCADE`,
      `TRUNCATE p.tags_0`,
    ]) {
      const error = await s.t.exec(statement).then(() => null, (e: { code?: string }) => e);
      expect(error?.code, statement).toBe('42501');
    }
  });
});
