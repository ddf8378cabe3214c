/**
 * Issue 4 (write path): what commit decides. Optimistic conflicts (with tombstones), business
 * constraint rejections (never a 500), and that neither leaves anything applied; cascades and
 * server-originated writes as bundles.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { bundleHash, committedRows, del, expectStatus, initEmpty, item, list, push, pushOk, uuid, type PushRow } from './support/write-helpers.js';

const SCHEMA = `${APP_SCHEMA_SQL}
ALTER TABLE app.lists ADD CONSTRAINT lists_position_check CHECK (position IS NULL OR position >= 0);
CREATE FUNCTION app.kinds_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.meta ->> 'refuse' = 'plain' THEN RAISE EXCEPTION 'the app refuses %', NEW.code; END IF;
  IF NEW.meta ->> 'refuse' = 'coded' THEN RAISE EXCEPTION 'the app vetoes %', NEW.code USING ERRCODE = 'AB123'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER kinds_refuse BEFORE INSERT OR UPDATE ON app.kinds FOR EACH ROW EXECUTE FUNCTION app.kinds_refuse();
`;

describe('write path: commit outcomes', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA });
  });
  afterAll(async () => s?.close());

  async function user(name: string): Promise<ApiClient> {
    const c = s.client(name, `${name}-dev`);
    await initEmpty(c);
    return c;
  }

  /** Everything a refused commit must leave untouched, for one user. */
  async function state(userId: string): Promise<unknown> {
    const q = async (text: string) => (await s.t.exec(text, [userId])).rows;
    return {
      lists: await q(`SELECT * FROM app.lists WHERE _sync_scope_id = $1 ORDER BY id`),
      items: await q(`SELECT * FROM app.items WHERE _sync_scope_id = $1 ORDER BY id`),
      kinds: await q(`SELECT * FROM app.kinds WHERE _sync_scope_id = $1 ORDER BY code`),
      rowState: await q(`SELECT r.table_id, r.key_bytes, r.row_version, r.deleted FROM sync.row_state r JOIN sync.user_state u USING (user_id)
                          WHERE u.user_id = $1 ORDER BY 1, 2`),
      bundles: await q(`SELECT b.bundle_seq, b.source_bundle_id FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1 ORDER BY 1`),
      user: await q(`SELECT latest_bundle_seq FROM sync.user_state WHERE user_id = $1`),
      sources: await q(`SELECT s.source_id, s.last_source_bundle_id FROM sync.source_state s JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1 ORDER BY 1`),
      capture: (await s.t.exec(`SELECT count(*)::int AS n FROM sync.capture_rows`)).rows,
    };
  }

  it('push_conflict carries the Conflict record and a message naming op, table, key, expected and actual', async () => {
    const c = await user('c-conflict');
    const id = uuid();
    const v1 = await pushOk(c, [list(id, 'first')], { sourceBundleId: 1 });
    const v2 = await pushOk(c, [list(id, 'second', v1.bundle_seq, { position: 7 })], { sourceBundleId: 2 });
    const before = await state('c-conflict');
    const fresh = uuid();
    // A stale UPDATE next to a valid INSERT: the whole bundle is refused.
    const answer = await push(c, [list(fresh, 'innocent'), list(id, 'stale', v1.bundle_seq)], { sourceBundleId: 3 });
    expectStatus(answer, 409, 'push_conflict');
    expect(answer.body.conflict).toEqual({
      schema: 'app', table: 'lists', key: { id }, op: 'UPDATE', base_row_version: v1.bundle_seq,
      server_row_version: v2.bundle_seq, server_row_deleted: false, server_row: { id, title: 'second', position: 7 },
    });
    for (const part of ['UPDATE', 'app.lists', id, `expected row_version ${v1.bundle_seq}`, `has ${v2.bundle_seq}`]) expect(answer.body.message).toContain(part);
    expect(await state('c-conflict')).toEqual(before);
    // The refused bundle consumed nothing: the same source_bundle_id commits once rebased.
    const rebased = await pushOk(c, [list(fresh, 'innocent'), list(id, 'rebased', v2.bundle_seq)], { sourceBundleId: 3 });
    expect(rebased.bundle_seq).toBe(3);
  });

  it('conflicts tell a tombstone from a row that never existed', async () => {
    const c = await user('c-tomb');
    const id = uuid();
    const v1 = await pushOk(c, [list(id, 'doomed')], { sourceBundleId: 1 });
    const gone = await pushOk(c, [del('lists', { id }, v1.bundle_seq)], { sourceBundleId: 2 });
    const deleted = (await committedRows(c, gone.bundle_seq)).rows;
    expect(deleted).toEqual([{ schema: 'app', table: 'lists', key: { id }, op: 'DELETE', row_version: gone.bundle_seq, payload: null }]);
    expect(bundleHash(deleted)).toBe(gone.bundle_hash);

    // Re-inserting the deleted key with base 0: a conflict against the tombstone.
    const again = await push(c, [list(id, 'back')], { sourceBundleId: 3 });
    expectStatus(again, 409, 'push_conflict');
    expect(again.body.conflict).toEqual({ schema: 'app', table: 'lists', key: { id }, op: 'INSERT', base_row_version: 0,
      server_row_version: gone.bundle_seq, server_row_deleted: true, server_row: null });
    expect(again.body.message).toMatch(/deleted/);
    // Updating or deleting the tombstone with a stale base: the same tombstone conflict.
    const staleDelete = await push(c, [del('lists', { id }, v1.bundle_seq)], { sourceBundleId: 3 });
    expectStatus(staleDelete, 409, 'push_conflict');
    expect(staleDelete.body.conflict).toMatchObject({ op: 'DELETE', server_row_deleted: true, server_row_version: gone.bundle_seq });

    // A key the server never saw, updated with a non-zero base: version 0, not deleted.
    const ghost = uuid();
    const never = await push(c, [list(ghost, 'ghost', 5)], { sourceBundleId: 3 });
    expectStatus(never, 409, 'push_conflict');
    expect(never.body.conflict).toEqual({ schema: 'app', table: 'lists', key: { id: ghost }, op: 'UPDATE', base_row_version: 5,
      server_row_version: 0, server_row_deleted: false, server_row: null });

    // The tombstone's version as base re-inserts the key: an INSERT in the committed bundle.
    const back = await pushOk(c, [list(id, 'back', 0)].map((r) => ({ ...r, base_row_version: gone.bundle_seq })), { sourceBundleId: 3 });
    const rows = (await committedRows(c, back.bundle_seq)).rows;
    expect(rows).toEqual([{ schema: 'app', table: 'lists', key: { id }, op: 'INSERT', row_version: back.bundle_seq, payload: { id, title: 'back', position: null } }]);
  });

  it('one bundle of new keys, live keys, a delete and a tombstone re-inserted leaves each key at its version', async () => {
    // Commit writes the versions of keys row_state never held and of keys it holds in two ways
    // (layout 25); both must end the same as one upsert of every key did.
    const c = await user('c-versions');
    const [live, doomed, tomb, fresh] = [uuid(), uuid(), uuid(), uuid()];
    const v1 = await pushOk(c, [list(live, 'live'), list(doomed, 'doomed'), list(tomb, 'tomb')], { sourceBundleId: 1 });
    const v2 = await pushOk(c, [del('lists', { id: tomb }, v1.bundle_seq)], { sourceBundleId: 2 });
    const mixed = await pushOk(c, [
      list(fresh, 'fresh'),
      list(live, 'changed', v1.bundle_seq),
      del('lists', { id: doomed }, v1.bundle_seq),
      { ...list(tomb, 'back'), base_row_version: v2.bundle_seq },
    ], { sourceBundleId: 3 });
    const versions = (await s.t.exec(
      `SELECT sync.key_text('uuid', r.key_bytes) AS id, r.row_version::int AS version, r.deleted FROM sync.row_state r
        WHERE r.user_id = $1 ORDER BY 1`, ['c-versions'])).rows;
    const expected = [
      { id: live, version: mixed.bundle_seq, deleted: false },
      { id: doomed, version: mixed.bundle_seq, deleted: true },
      { id: tomb, version: mixed.bundle_seq, deleted: false },
      { id: fresh, version: mixed.bundle_seq, deleted: false },
    ].sort((a, b) => (a.id < b.id ? -1 : 1));
    expect(versions).toEqual(expected);
    const ops = new Map((await committedRows(c, mixed.bundle_seq)).rows.map((r: any) => [r.key.id, r.op]));
    expect(ops).toEqual(new Map([[fresh, 'INSERT'], [live, 'UPDATE'], [doomed, 'DELETE'], [tomb, 'INSERT']]));
    // The versions are the ones the next bundle must name: stale bases conflict, these commit.
    expectStatus(await push(c, [list(live, 'stale', v1.bundle_seq)], { sourceBundleId: 4 }), 409, 'push_conflict');
    await pushOk(c, [list(live, 'next', mixed.bundle_seq), list(fresh, 'next', mixed.bundle_seq)], { sourceBundleId: 4 });
  });

  it('every conflicting row is reported in one answer', async () => {
    const c = await user('c-many');
    const ids = [uuid(), uuid(), uuid()];
    const v1 = await pushOk(c, ids.map((id) => list(id, 'x')), { sourceBundleId: 1 });
    await pushOk(c, ids.map((id) => list(id, 'y', v1.bundle_seq)), { sourceBundleId: 2 });
    const answer = await push(c, ids.map((id) => list(id, 'z', v1.bundle_seq)), { sourceBundleId: 3 });
    expectStatus(answer, 409, 'push_conflict');
    expect(answer.body.conflict_count).toBe(3);
    expect(answer.body.conflicts.map((x: any) => x.key.id)).toEqual(ids);
    expect(answer.body.conflict).toEqual(answer.body.conflicts[0]);
  });

  describe('push_rejected (422) for business constraints, never a 500, nothing applied', () => {
    let c: ApiClient;
    let listId: string;
    let seeded: any;
    let sbid = 2;
    beforeAll(async () => {
      c = await user('c-reject');
      listId = uuid();
      seeded = await pushOk(c, [
        list(listId, 'parent'),
        { schema: 'app', table: 'kinds', key: { code: 'k1' }, op: 'INSERT', base_row_version: 0, payload: { label: 'a' } },
        { schema: 'app', table: 'kinds', key: { code: 'k2' }, op: 'INSERT', base_row_version: 0, payload: { label: 'b' } },
      ], { sourceBundleId: 1 });
    });

    async function rejected(rows: PushRow[]): Promise<any> {
      const before = await state('c-reject');
      const answer = await push(c, rows, { sourceBundleId: sbid });
      expect(answer.status, `${JSON.stringify(rows.map((r) => r.payload)).slice(0, 200)}: ${JSON.stringify(answer.body).slice(0, 300)}`).toBe(422);
      expectStatus(answer, 422, 'push_rejected');
      expect(answer.body.message).toMatch(/business constraint/);
      expect(await state('c-reject')).toEqual(before);
      return answer.body.violation;
    }

    it('foreign key', async () => {
      const itemId = uuid();
      const missing = uuid();
      const v = await rejected([list(uuid(), 'fine'), item(itemId, missing, 'orphan')]);
      expect(v).toMatchObject({ sqlstate: '23503', constraint: 'items__sync_scope_id_list_id_fkey', schema: 'app', table: 'items', key: { id: itemId } });
    });

    it('a non-deferrable unique swap', async () => {
      const kind = (code: string, label: string): PushRow => ({ schema: 'app', table: 'kinds', key: { code }, op: 'UPDATE', base_row_version: seeded.bundle_seq, payload: { label } });
      const v = await rejected([kind('k1', 'b'), kind('k2', 'a')]);
      expect(v).toMatchObject({ sqlstate: '23505', constraint: 'kinds_label_key', schema: 'app', table: 'kinds', key: { code: 'k1' } });
    });

    it('check constraint', async () => {
      const id = uuid();
      const v = await rejected([list(uuid(), 'fine', 0, { position: 1 }), list(id, 'negative', 0, { position: -1 })]);
      expect(v).toMatchObject({ sqlstate: '23514', constraint: 'lists_position_check', schema: 'app', table: 'lists', key: { id } });
    });

    it('not-null', async () => {
      const id = uuid();
      const v = await rejected([item(id, listId, 'x', 0, { body: null })]);
      expect(v).toMatchObject({ sqlstate: '23502', schema: 'app', table: 'items', key: { id } });
      // Omitting a NOT NULL column without a default on a new row is the same rejection.
      const id2 = uuid();
      const v2 = await rejected([{ schema: 'app', table: 'items', key: { id: id2 }, op: 'INSERT', base_row_version: 0, payload: { list_id: listId } }]);
      expect(v2).toMatchObject({ sqlstate: '23502', table: 'items', key: { id: id2 } });
    });

    it('type errors', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ position: 'abc' }, '22P02'],
        [{ position: 1e10 }, '22003'],
        [{ position: 1.5 }, '22P02'],
      ];
      // A data exception names no row; the server finds it (layout 13): table and key, like a constraint.
      for (const [extra, sqlstate] of cases) {
        const id = uuid();
        const v = await rejected([list(id, 'typed', 0, extra)]);
        expect(v, JSON.stringify(extra)).toMatchObject({ sqlstate, schema: 'app', table: 'lists', column: 'position', key: { id } });
      }
      const k = (payload: Record<string, unknown>): PushRow => ({ schema: 'app', table: 'kinds', key: { code: 'typed' }, op: 'INSERT', base_row_version: 0, payload });
      for (const payload of [{ big: '12.5' }, { big: '99999999999999999999' }, { amount: 'lots' }, { seen_at: 'someday' }, { flag: 'maybe' }, { ratio: 'fast' }, { amount: '1e30' }]) {
        const v = await rejected([k(payload)]);
        expect(v.sqlstate, JSON.stringify(payload)).toMatch(/^22/);
        expect(v, JSON.stringify(payload)).toMatchObject({ table: 'kinds', column: Object.keys(payload)[0], key: { code: 'typed' } });
      }
      const badItem = uuid();
      const badFk = await rejected([item(badItem, 'not-a-uuid-at-all', 'x')]);
      expect(badFk).toMatchObject({ sqlstate: '22P02', table: 'items', column: 'list_id', key: { id: badItem } });
    });

    it('one unstorable value among many rows of several tables: its table and key are named', async () => {
      for (const at of [0, 37, 99]) {
        const lists = Array.from({ length: 100 }, () => uuid());
        const rows: PushRow[] = lists.map((id, i) => list(id, `l${i}`, 0, i === at ? { position: 'not a number' } : { position: i }));
        // Items of the good lists after them: their table's statement never runs.
        rows.push(...lists.slice(0, 5).filter((_, i) => i !== at).map((l) => item(uuid(), l, 'child')));
        const v = await rejected(rows);
        expect(v, `bad row at ${at}`).toMatchObject({ sqlstate: '22P02', schema: 'app', table: 'lists', column: 'position', key: { id: lists[at] } });
      }
    });

    it('a bad value and a unique clash in one table: a row is named whichever error the commit meets first (issue 23 item 5)', async () => {
      const k = (code: string, payload: Record<string, unknown>): PushRow => ({ schema: 'app', table: 'kinds', key: { code }, op: 'INSERT', base_row_version: 0, payload });
      const rows = (bad: number, dup: number) => Array.from({ length: 40 }, (_, i) =>
        k(`m-${String(i).padStart(2, '0')}`, i === bad ? { amount: 'abc' } : i === dup ? { label: 'a' } : { label: `l-${i}` }));
      // The value first, the clash first; the clash with an existing row (k1) or within the bundle.
      for (const [bad, dup] of [[5, 30], [30, 5], [12, 13], [13, 12]] as const) {
        const v = await rejected(rows(bad, dup));
        const first = Math.min(bad, dup);
        expect(v, `bad ${bad}, duplicate ${dup}`).toMatchObject({ table: 'kinds', key: { code: `m-${String(first).padStart(2, '0')}` } });
        expect(v.sqlstate).toBe(first === bad ? '22P02' : '23505');
        if (first === bad) expect(v.column).toBe('amount');
      }
      // Two rows of the bundle clash: the later one is named (the earlier one commits without it).
      const clash = [k('n-1', { label: 'same' }), k('n-2', { label: 'other' }), k('n-3', { label: 'same' }), k('n-4', { amount: 'abc' })];
      expect(await rejected(clash)).toMatchObject({ sqlstate: '23505', key: { code: 'n-3' } });
    });

    it("an app trigger's refusal in a multi-row bundle, with P0001 or its own SQLSTATE, names its row (issue 23 item 7)", async () => {
      const k = (code: string, meta: unknown): PushRow => ({ schema: 'app', table: 'kinds', key: { code }, op: 'INSERT', base_row_version: 0, payload: { meta } });
      for (const [refuse, sqlstate] of [['plain', 'P0001'], ['coded', 'AB123']] as const) {
        const rows = Array.from({ length: 30 }, (_, i) => k(`t-${String(i).padStart(2, '0')}`, i === 17 ? { refuse } : { n: i }));
        const v = await rejected(rows);
        expect(v, refuse).toMatchObject({ sqlstate, schema: 'app', table: 'kinds', key: { code: 't-17' } });
      }
      const answer = await push(c, [k('t-a', {}), k('t-b', { refuse: 'coded' })], { sourceBundleId: sbid });
      expect(answer.body.message).toMatch(/the app vetoes t-b/);
    });

    it('a value too large for a business index', async () => {
      // Incompressible text beyond btree's ~2.7 kB row limit in the (scope, label) unique index.
      const label = randomBytes(6000).toString('base64');
      const v = await rejected([{ schema: 'app', table: 'kinds', key: { code: 'wide' }, op: 'INSERT', base_row_version: 0, payload: { label } }]);
      expect(v).toMatchObject({ sqlstate: '54000', schema: 'app', table: 'kinds' });
    });

    it('after the rejections the same source_bundle_id still commits', async () => {
      const ok = await pushOk(c, [item(uuid(), listId, 'finally')], { sourceBundleId: sbid });
      expect(ok.bundle_seq).toBe(seeded.bundle_seq + 1);
      sbid++;
    });
  });

  it('scopes are isolated: the same key in two users is two rows; a foreign key cannot reach another user', async () => {
    const a = await user('c-iso-a');
    const b = await user('c-iso-b');
    const id = uuid();
    await pushOk(a, [list(id, 'of a')], { sourceBundleId: 1 });
    await pushOk(b, [list(id, 'of b')], { sourceBundleId: 1 });
    const titles = await s.t.exec(`SELECT _sync_scope_id AS scope, title FROM app.lists WHERE id = $1 ORDER BY 1`, [id]);
    expect(titles.rows).toEqual([{ scope: 'c-iso-a', title: 'of a' }, { scope: 'c-iso-b', title: 'of b' }]);
    const other = uuid();
    await pushOk(a, [list(other, 'only a')], { sourceBundleId: 2 });
    const reach = await push(b, [item(uuid(), other, 'reaching')], { sourceBundleId: 2 });
    expectStatus(reach, 422, 'push_rejected');
    expect(reach.body.violation.sqlstate).toBe('23503');
    // A's list as B sees it in a conflict: B never saw it, so B's view is its own row only.
    const stale = await push(b, [list(id, 'b again', 5)], { sourceBundleId: 2 });
    expectStatus(stale, 409, 'push_conflict');
    expect(stale.body.conflict.server_row).toEqual({ id, title: 'of b', position: null });
  });

  it('a cascade delete lands in the same bundle as DELETE rows, counted in row_count', async () => {
    const c = await user('c-cascade');
    const listId = uuid();
    const itemIds = [uuid(), uuid(), uuid()];
    const other = uuid();
    const v1 = await pushOk(c, [list(listId, 'parent'), list(other, 'other'), ...itemIds.map((id) => item(id, listId, 'child')), item(uuid(), other, 'stays')], { sourceBundleId: 1 });
    const gone = await pushOk(c, [del('lists', { id: listId }, v1.bundle_seq)], { sourceBundleId: 2 });
    expect(gone.row_count).toBe(4);
    const rows = (await committedRows(c, gone.bundle_seq)).rows;
    expect(rows[0]).toEqual({ schema: 'app', table: 'lists', key: { id: listId }, op: 'DELETE', row_version: gone.bundle_seq, payload: null });
    expect(rows.slice(1).map((r) => [r.table, r.op, r.payload]).every(([t, o, p]) => t === 'items' && o === 'DELETE' && p === null)).toBe(true);
    expect(rows.slice(1).map((r) => r.key['id']).sort()).toEqual([...itemIds].sort());
    expect(bundleHash(rows)).toBe(gone.bundle_hash);
    const tomb = await s.t.exec(`SELECT count(*)::int AS n FROM sync.row_state r JOIN sync.user_state u USING (user_id)
                                  WHERE u.user_id = 'c-cascade' AND r.deleted AND r.row_version = $1`, [gone.bundle_seq]);
    expect(tomb.rows[0].n).toBe(4);
    // Pull sees the same bundle.
    const pulled = await c.get(`/sync/pull?after_bundle_seq=${v1.bundle_seq}`);
    expect(pulled.body.bundles[0].rows).toEqual(rows);
    // A cascaded child is a tombstone: updating it with its old base is a conflict.
    const late = await push(c, [item(itemIds[0]!, listId, 'late', v1.bundle_seq)], { sourceBundleId: 3 });
    expectStatus(late, 409, 'push_conflict');
    expect(late.body.conflict).toMatchObject({ server_row_deleted: true, server_row_version: gone.bundle_seq });
  });

  it('server-originated writes reach pull as a bundle of the server source', async () => {
    const c = await user('c-server');
    const mine = await pushOk(c, [list(uuid(), 'from device')], { sourceBundleId: 1 });
    const listId = uuid();
    const written = await serverWrite(s.t.db, { userId: 'c-server', sourceId: 'server:billing', retainedBundlesPerUser: 10_000 }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES (${listId}, ${scope}, 'invoice')`);
      await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body) VALUES (${uuid()}, ${scope}, ${listId}, 'line 1')`);
      return 'ok';
    });
    expect(written.result).toBe('ok');
    expect(written.bundle).toMatchObject({ bundle_seq: mine.bundle_seq + 1, source_id: 'server:billing', source_bundle_id: 1, row_count: 2 });
    const pulled = await c.get(`/sync/pull?after_bundle_seq=${mine.bundle_seq}`);
    expectStatus(pulled, 200);
    expect(pulled.body.bundles).toHaveLength(1);
    expect(pulled.body.bundles[0]).toMatchObject({ bundle_seq: mine.bundle_seq + 1, source_id: 'server:billing', source_bundle_id: 1 });
    expect(pulled.body.bundles[0].rows[0]).toMatchObject({ table: 'lists', op: 'INSERT', key: { id: listId }, payload: { title: 'invoice' } });
    expect(bundleHash(pulled.body.bundles[0].rows)).toBe(written.bundle!.bundle_hash);
    // The device's next push must base on the server's version.
    const stale = await push(c, [list(listId, 'edited')], { sourceBundleId: 2 });
    expectStatus(stale, 409, 'push_conflict');
    await pushOk(c, [list(listId, 'edited', mine.bundle_seq + 1)], { sourceBundleId: 2 });
    // A server write that changes nothing produces no bundle.
    const none = await serverWrite(s.t.db, { userId: 'c-server', sourceId: 'server:billing', retainedBundlesPerUser: 10_000 }, async () => 1);
    expect(none.bundle).toBeNull();
    // Direct writes outside a bundle are still refused by the guards.
    await expect(s.t.exec(`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES ($1, 'c-server', 'sneaky')`, [uuid()])).rejects.toThrow(/rejected outside a sync bundle/);
  });
  it('a payload may leave out its key column or hold it as null: the row key fills it; an update keeps the columns it leaves out', async () => {
    const c = await user('c-keyless');
    const [a, b, d] = [uuid(), uuid(), uuid()];
    const rowOf = (id: string, payload: Record<string, unknown>, base = 0): PushRow =>
      ({ schema: 'app', table: 'lists', key: { id }, op: base === 0 ? 'INSERT' : 'UPDATE', base_row_version: base, payload });
    const first = await pushOk(c, [rowOf(a, { title: 'no key' }), rowOf(b, { id: null, title: 'null key' }), rowOf(d, { id: d, title: 'key', position: 3 })], { sourceBundleId: 1 });
    const lists = async () => (await s.t.exec(`SELECT id::text, title, position FROM app.lists WHERE _sync_scope_id = 'c-keyless' ORDER BY title`)).rows;
    expect(await lists()).toEqual([
      { id: d, title: 'key', position: 3 },
      { id: a, title: 'no key', position: null },
      { id: b, title: 'null key', position: null },
    ]);
    // The committed rows carry the key in their payloads, as stored.
    const { rows } = await committedRows(c, first.bundle_seq);
    expect(rows.map((r) => r.payload?.['id'])).toEqual([a, b, d]);
    // An update without the key and without position keeps both.
    await pushOk(c, [rowOf(d, { title: 'renamed' }, first.bundle_seq)], { sourceBundleId: 2 });
    expect((await lists()).find((r) => r.id === d)).toEqual({ id: d, title: 'renamed', position: 3 });
  });
  it('a row naming every column is taken whole; one leaving a column out keeps it on an update and takes its default on an insert', async () => {
    const c = await user('c-whole');
    const listId = uuid();
    const [x, y] = [uuid(), uuid()];
    const first = await pushOk(c, [list(listId, 'l', 0, { position: 1 }),
      item(x, listId, 'whole', 0, { done: true, attachment: 'AAEC' }), item(y, listId, 'no done, no attachment')], { sourceBundleId: 1 });
    const items = async () => (await s.t.exec(`SELECT id::text, body, done, encode(attachment, 'hex') AS attachment FROM app.items
      WHERE _sync_scope_id = 'c-whole' ORDER BY body`)).rows;
    expect(await items()).toEqual([
      { id: y, body: 'no done, no attachment', done: false, attachment: null },
      { id: x, body: 'whole', done: true, attachment: '000102' },
    ]);
    // All but the last column: the attachment stays. Every column, nulls included: the row is replaced.
    await pushOk(c, [item(x, listId, 'all but attachment', first.bundle_seq, { done: false }),
      item(y, listId, 'every column', first.bundle_seq, { done: true, attachment: null })], { sourceBundleId: 2 });
    expect(await items()).toEqual([
      { id: x, body: 'all but attachment', done: false, attachment: '000102' },
      { id: y, body: 'every column', done: true, attachment: null },
    ]);
  });
});
