/**
 * Issue 26 item 1: rule 9 (docs/protocol.md §11) allows every ON UPDATE action (NO ACTION, RESTRICT,
 * CASCADE, SET NULL, SET DEFAULT), and bootstrap accepts them; they are harmless because a sync key
 * and `_sync_scope_id` never change on any path (docs/protocol.md §11, rule 9). Both halves:
 * a schema with ON UPDATE SET NULL / SET DEFAULT / CASCADE bootstraps and serves, and every path
 * that could change a key or scope refuses with a typed answer and changes nothing — a push (its
 * payload cannot say it; a business trigger inside the commit that tries is `push_rejected` with
 * SQLSTATE 23LS1), a server write (KeyChangeRefusedError), maintenance (writes no business row)
 * and direct SQL (the guards).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { raw, sql } from '../core/db/index.js';
import { KeyChangeRefusedError } from '../core/errors.js';
import { defaultLimits } from '../core/limits.js';
import { runMaintenance, serverWrite } from '../core/sync/index.js';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, push, pushOk, uuid, type PushRow } from './support/write-helpers.js';

const SCHEMA = `
CREATE SCHEMA fk;
CREATE TABLE fk.parents (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  code text NOT NULL,
  title text,
  PRIMARY KEY (_sync_scope_id, id),
  UNIQUE (_sync_scope_id, code)
);
CREATE TABLE fk.c_null (
  id uuid NOT NULL, _sync_scope_id text NOT NULL, parent_id uuid,
  PRIMARY KEY (_sync_scope_id, id),
  FOREIGN KEY (_sync_scope_id, parent_id) REFERENCES fk.parents (_sync_scope_id, id)
    ON UPDATE SET NULL ON DELETE SET NULL (parent_id) DEFERRABLE INITIALLY DEFERRED
);
CREATE TABLE fk.c_default (
  id uuid NOT NULL, _sync_scope_id text NOT NULL DEFAULT 'nobody', parent_id uuid,
  PRIMARY KEY (_sync_scope_id, id),
  FOREIGN KEY (_sync_scope_id, parent_id) REFERENCES fk.parents (_sync_scope_id, id)
    ON UPDATE SET DEFAULT ON DELETE SET DEFAULT (parent_id) DEFERRABLE
);
CREATE TABLE fk.c_cascade (
  id uuid NOT NULL, _sync_scope_id text NOT NULL, parent_id uuid, parent_code text,
  PRIMARY KEY (_sync_scope_id, id),
  FOREIGN KEY (_sync_scope_id, parent_id) REFERENCES fk.parents (_sync_scope_id, id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE,
  FOREIGN KEY (_sync_scope_id, parent_code) REFERENCES fk.parents (_sync_scope_id, code) ON UPDATE CASCADE DEFERRABLE
);
CREATE TABLE fk.solo (id uuid NOT NULL, _sync_scope_id text NOT NULL, title text, PRIMARY KEY (_sync_scope_id, id));
-- A partitioned table (its partitions carry PostgreSQL's clone of the row trigger) and an
-- inheritance child (which gets its own).
CREATE TABLE fk.parted (id uuid NOT NULL, _sync_scope_id text NOT NULL, title text, PRIMARY KEY (_sync_scope_id, id)) PARTITION BY HASH (id);
CREATE TABLE fk.parted_0 PARTITION OF fk.parted FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE fk.parted_1 PARTITION OF fk.parted FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE fk.inh (id uuid NOT NULL, _sync_scope_id text NOT NULL, title text, PRIMARY KEY (_sync_scope_id, id));
CREATE TABLE fk.inh_child (PRIMARY KEY (_sync_scope_id, id)) INHERITS (fk.inh);
-- A business trigger that tries to change a key or a scope when told to, inside whatever bundle runs.
CREATE FUNCTION fk.rekey() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.title = 'rekey' THEN
    EXECUTE format('UPDATE %I.%I SET id = gen_random_uuid() WHERE _sync_scope_id = $1 AND id = $2', TG_TABLE_SCHEMA, TG_TABLE_NAME)
      USING NEW._sync_scope_id, NEW.id;
  ELSIF NEW.title = 'give away' THEN
    EXECUTE format('UPDATE %I.%I SET _sync_scope_id = $3 WHERE _sync_scope_id = $1 AND id = $2', TG_TABLE_SCHEMA, TG_TABLE_NAME)
      USING NEW._sync_scope_id, NEW.id, 'mallory';
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER rekey AFTER INSERT OR UPDATE ON fk.parents FOR EACH ROW WHEN (pg_trigger_depth() = 0) EXECUTE FUNCTION fk.rekey();
CREATE TRIGGER rekey AFTER INSERT OR UPDATE ON fk.solo FOR EACH ROW WHEN (pg_trigger_depth() = 0) EXECUTE FUNCTION fk.rekey();
`;
const TABLES = parseTables('fk.parents:id,fk.c_null:id,fk.c_default:id,fk.c_cascade:id,fk.solo:id,fk.parted:id,fk.inh:id');

const parent = (id: string, code: string, title: string, base = 0): PushRow => ({
  schema: 'fk', table: 'parents', key: { id }, op: base ? 'UPDATE' : 'INSERT', base_row_version: base, payload: { id, code, title },
});
const child = (table: string, id: string, parentId: string, extra: Record<string, unknown> = {}): PushRow => ({
  schema: 'fk', table, key: { id }, op: 'INSERT', base_row_version: 0, payload: { id, parent_id: parentId, ...extra },
});

describe('sync keys and scopes never change, so every ON UPDATE action is accepted', () => {
  let s: TestServer;
  let alice: ApiClient;
  const p1 = uuid();
  const solo = uuid();
  let fingerprint: string;
  const businessRows = async (): Promise<string> =>
    JSON.stringify((await s.t.exec(`SELECT (SELECT jsonb_agg(to_jsonb(p) ORDER BY p.id) FROM fk.parents p) AS p,
      (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.id) FROM fk.c_null c) AS n, (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.id) FROM fk.c_default c) AS d,
      (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.id) FROM fk.c_cascade c) AS c, (SELECT jsonb_agg(to_jsonb(o) ORDER BY o.id) FROM fk.solo o) AS o,
      (SELECT max(bundle_seq) FROM sync.bundle_log) AS seq`)).rows[0]);

  beforeAll(async () => {
    // The first half: this schema bootstraps (it was refused before: "PostgreSQL takes no column list on update").
    s = await startTestServer({ schemaSql: SCHEMA, tables: TABLES });
    alice = s.client('alice');
    await initEmpty(alice);
    await pushOk(alice, [parent(p1, 'one', 'first'), child('c_null', uuid(), p1), child('c_default', uuid(), p1),
      child('c_cascade', uuid(), p1, { parent_code: 'one' }),
      { schema: 'fk', table: 'solo', key: { id: solo }, op: 'INSERT', base_row_version: 0, payload: { id: solo, title: 'alone' } }], { sourceBundleId: 1 });
    fingerprint = await businessRows();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('the foreign keys are as declared: every ON UPDATE action of rule 9 is there', async () => {
    const actions = (await s.t.exec(`SELECT conrelid::regclass::text AS t, confupdtype AS u FROM pg_constraint
      WHERE contype = 'f' AND connamespace = 'fk'::regnamespace ORDER BY 1, 2`)).rows.map((r) => `${r.t}:${r.u}`);
    expect(actions).toEqual(['fk.c_cascade:c', 'fk.c_cascade:c', 'fk.c_default:d', 'fk.c_null:n']);
  });

  it('push: a payload cannot change a key or carry the scope (400), and a commit whose trigger would is push_rejected 23LS1', async () => {
    const other = uuid();
    const moved = await push(alice, [{ ...parent(p1, 'one', 'x', 1), payload: { id: other, code: 'one', title: 'x' } }], { sourceBundleId: 2 });
    expectStatus(moved, 400, 'invalid_request');
    const scoped = await push(alice, [{ ...parent(p1, 'one', 'x', 1), payload: { id: p1, code: 'one', _sync_scope_id: 'bob' } }], { sourceBundleId: 2 });
    expectStatus(scoped, 400, 'invalid_request');
    for (const [title, column] of [['rekey', 'id'], ['give away', '_sync_scope_id']] as const) {
      const answer = await push(alice, [{ schema: 'fk', table: 'solo', key: { id: solo }, op: 'UPDATE', base_row_version: 1, payload: { id: solo, title } }],
        { sourceBundleId: 2 });
      expectStatus(answer, 422, 'push_rejected');
      expect(answer.body.violation).toMatchObject({ sqlstate: '23LS1', schema: 'fk', table: 'solo', column });
      // With children whose foreign keys SET NULL / SET DEFAULT / CASCADE on update: refused
      // before the row is written, so none of those actions runs.
      const parentAnswer = await push(alice, [parent(p1, 'one', title, 1)], { sourceBundleId: 2 });
      expectStatus(parentAnswer, 422, 'push_rejected');
      expect(parentAnswer.body.violation).toMatchObject({ sqlstate: '23LS1', schema: 'fk', table: 'parents', column });
    }
    expect(await businessRows()).toBe(fingerprint);
  });

  it('server writes: an UPDATE of a key or a scope throws KeyChangeRefusedError and commits nothing', async () => {
    const options = { userId: 'alice', sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser };
    for (const [statement, column] of [
      ['UPDATE fk.parents SET id = gen_random_uuid() ', 'id'],
      ['UPDATE fk.parents SET _sync_scope_id = \'bob\'', '_sync_scope_id'],
      ['UPDATE fk.c_cascade SET id = gen_random_uuid() ', 'id'],
    ] as const) {
      const error = await serverWrite(s.t.db, options, (tx, scope) => tx.query(sql`${raw(statement)} WHERE _sync_scope_id = ${scope}`)).catch((e: unknown) => e);
      expect(error, statement).toBeInstanceOf(KeyChangeRefusedError);
      expect(error).toMatchObject({ code: 'sync_key_immutable', column });
    }
    expect(await businessRows()).toBe(fingerprint);
    // On a partitioned table (the partitions' cloned trigger) and an inheritance child (its own).
    await serverWrite(s.t.db, options, async (tx, scope) => {
      // Fixed ids (deterministic partitions), some in each partition.
      await tx.query(sql`INSERT INTO fk.parted (id, _sync_scope_id, title)
        SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, ${scope}, 'p' FROM generate_series(1, 8) g`);
      await tx.query(sql`INSERT INTO fk.inh_child (id, _sync_scope_id, title) VALUES (gen_random_uuid(), ${scope}, 'c')`);
    });
    expect((await s.t.exec(`SELECT count(DISTINCT tableoid)::int AS n FROM fk.parted`)).rows[0].n).toBe(2);
    for (const statement of ['UPDATE fk.parted SET id = gen_random_uuid() ', 'UPDATE fk.parted_0 SET id = gen_random_uuid() ',
      'UPDATE fk.inh SET id = gen_random_uuid() ', 'UPDATE fk.inh_child SET id = gen_random_uuid() ']) {
      const error = await serverWrite(s.t.db, options, (tx, scope) => tx.query(sql`${raw(statement)} WHERE _sync_scope_id = ${scope}`)).catch((e: unknown) => e);
      expect(error, statement).toBeInstanceOf(KeyChangeRefusedError);
    }
    fingerprint = await businessRows();
    // A write that leaves keys alone commits, cascading a non-key unique column to the child.
    const written = await serverWrite(s.t.db, options, (tx, scope) => tx.query(sql`UPDATE fk.parents SET code = 'uno' WHERE _sync_scope_id = ${scope}`));
    expect(written.bundle?.row_count).toBe(2);
    expect((await s.t.exec(`SELECT parent_code FROM fk.c_cascade`)).rows).toEqual([{ parent_code: 'uno' }]);
    fingerprint = await businessRows();
  });

  it('maintenance writes no business row; direct SQL is refused by the guards', async () => {
    await runMaintenance(s.t.db, defaultLimits);
    expect(await businessRows()).toBe(fingerprint);
    for (const statement of [`UPDATE fk.parents SET id = gen_random_uuid()`, `UPDATE fk.parents SET _sync_scope_id = 'bob'`]) {
      const error = (await s.t.exec(statement).catch((e: unknown) => e)) as { code?: string };
      expect(error.code, statement).toBe('42501');
    }
    expect(await businessRows()).toBe(fingerprint);
  });
});
