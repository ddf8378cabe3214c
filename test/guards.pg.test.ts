/**
 * Issue 15 item 10, integrity guards. The bundle context that lets writes reach a registered table
 * is something only the managed functions establish (a push commit, a server write): a
 * transaction-local or session setting forged by the table owner lets nothing through, and no
 * write outside a bundle leaves capture rows behind for pull and snapshot to disagree about. The
 * `sync` tables refuse direct writes by the application role (the managed functions and
 * bootstrap write them; an operator repairs under the bootstrap lock, knowingly). A server bundle
 * opened and never finished cannot commit.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOOTSTRAP_LOCK_KEY } from '../core/bootstrap/bootstrap.js';
import { sql } from '../core/db/index.js';
import { defaultLimits } from '../core/limits.js';
import { serverWrite } from '../core/sync/index.js';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, list, pushOk, uuid } from './support/write-helpers.js';

describe('integrity guards', () => {
  let s: TestServer;
  let owner: pg.Client;
  let alice: ApiClient;
  beforeAll(async () => {
    s = await startTestServer();
    alice = s.client('alice');
    await initEmpty(alice);
    await pushOk(alice, [list(uuid(), 'pushed')], { sourceBundleId: 1 });
    owner = new pg.Client({ connectionString: s.t.url });
    await owner.connect();
  });
  afterAll(async () => {
    await owner?.end();
    await s?.close();
  });

  /** Runs statements in one transaction on the owner's own connection; the error, or null. */
  async function attempt(...statements: string[]): Promise<{ code?: string; message: string } | null> {
    try {
      await owner.query('BEGIN');
      for (const text of statements) await owner.query(text);
      await owner.query('COMMIT');
      return null;
    } catch (error) {
      await owner.query('ROLLBACK').catch(() => undefined);
      return error as { code?: string; message: string };
    }
  }

  const rejectedCount = async (): Promise<number> => Number((await alice.get('/syncx/status')).body.error_counters.rejected_direct_writes);

  it('a forged bundle context (set_config or SET of lockstep.scope) lets no write through, and leaves nothing behind', async () => {
    const before = await rejectedCount();
    const id = uuid();
    const insert = `INSERT INTO app.lists (id, _sync_scope_id, title) VALUES ('${id}', 'alice', 'forged')`;
    for (const forge of [
      `SELECT set_config('lockstep.scope', 'alice', true), set_config('lockstep.bundle_user', 'alice', true)`,
      `SET LOCAL lockstep.scope = 'alice'`,
    ]) {
      const error = await attempt(forge, insert);
      expect(error?.code, `${forge}: ${error?.message}`).toBe('42501');
    }
    // A session-level SET (what a pooler would leak to the next user) is no better.
    await owner.query(`SET lockstep.scope = 'alice'`);
    try {
      expect((await attempt(`UPDATE app.lists SET title = 'forged' WHERE _sync_scope_id = 'alice'`))?.code).toBe('42501');
    } finally {
      await owner.query('RESET lockstep.scope');
    }
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE id = $1`, [id])).rows[0].n).toBe(0);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.capture_rows`)).rows[0].n).toBe(0);
    expect(await rejectedCount()).toBe(before + 3);
    // Pull and snapshot still agree on every row version.
    const pulled = await alice.get('/sync/pull?after_bundle_seq=0');
    expectStatus(pulled, 200);
    const snapshot = await alice.post('/sync/snapshot-sessions', {});
    const page = await alice.get(`/sync/snapshot-sessions/${snapshot.body.snapshot_id}`);
    const versions = new Map<string, number>(pulled.body.bundles.flatMap((b: any) => b.rows.map((r: any) => [r.key.id, r.row_version])));
    const byKey = (a: [string, number], b: [string, number]) => (a[0] < b[0] ? -1 : 1);
    expect(page.body.rows.map((r: any) => [r.key.id, r.row_version]).sort(byKey)).toEqual([...versions].sort(byKey));
  });

  it('the bundle context cannot be written directly, even inside a transaction that forged it', async () => {
    const error = await attempt(`INSERT INTO sync.bundle_context (xact, user_id, source, kind)
      VALUES (txid_current(), 'alice', 'src-alice', 'server')`);
    expect(error?.code, error?.message).toBe('42501');
  });

  it('the sync tables refuse direct writes by the application role', async () => {
    const before = await rejectedCount();
    const writes = [
      `UPDATE sync.row_state SET row_version = row_version + 1`,
      `INSERT INTO sync.bundle_log (user_id, bundle_seq, source_id, source_bundle_id, row_count, byte_count, bundle_hash, committed_at)
         VALUES ('alice', 99, 'x', 99, 0, 0, 'x', now())`,
      `DELETE FROM sync.push_sessions`,
      `UPDATE sync.user_state SET latest_bundle_seq = 0`,
      `UPDATE sync.user_quota SET open_push_sessions = 0`,
      `INSERT INTO sync.counter_deltas (user_id, name, delta) VALUES ('alice', 'bundles_committed', 1000)`,
      `UPDATE sync.meta SET value = 'false' WHERE key = 'ready'`,
      `TRUNCATE sync.bundle_rows`,
    ];
    for (const write of writes) {
      const error = await attempt(write);
      expect(error?.code, `${write}: ${error?.message}`).toBe('42501');
      expect(error?.message).toMatch(/managed functions/);
    }
    expect(await rejectedCount()).toBe(before + writes.length);
    expect((await s.t.exec(`SELECT value FROM sync.meta WHERE key = 'ready'`)).rows[0].value).toBe('true');
  });

  it('an operator repairs under the bootstrap lock, knowingly', async () => {
    const error = await attempt(`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`,
      `UPDATE sync.push_sessions SET expires_at = expires_at WHERE false`);
    expect(error).toBeNull();
  });

  it('a server bundle opened and never finished cannot commit; finished, it commits as a bundle', async () => {
    const id = uuid();
    const error = await attempt(`SELECT sync.server_bundle_begin('alice', 'server:test')`,
      `INSERT INTO app.lists (id, _sync_scope_id, title) VALUES ('${id}', 'alice', 'never finished')`);
    expect(error?.code, error?.message).toBe('55000');
    expect(error?.message).toMatch(/never finished/);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE id = $1`, [id])).rows[0].n).toBe(0);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.capture_rows`)).rows[0].n).toBe(0);
    // The documented way, in SQL and through serverWrite.
    expect(await attempt(`SELECT sync.server_bundle_begin('alice', 'server:test')`,
      `INSERT INTO app.lists (id, _sync_scope_id, title) VALUES ('${id}', 'alice', 'finished')`,
      `SELECT sync.server_bundle_finish('alice', ${defaultLimits.retainedBundlesPerUser})`)).toBeNull();
    const written = await serverWrite(s.t.db, { userId: 'alice', sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser },
      (tx, scope) => tx.query(sql`UPDATE app.lists SET title = 'renamed' WHERE _sync_scope_id = ${scope} AND id = ${id}`));
    expect(written.bundle?.row_count).toBe(1);
    const pulled = await alice.get('/sync/pull?after_bundle_seq=1');
    expect(pulled.body.bundles.map((b: any) => b.source_id)).toEqual(['server:test', 'server:test']);
  });

  // Issue 26 item 2: PG_CONTEXT includes statement text, so a role with DML rights (even on the
  // sync tables) could write a managed function's frame into a comment and open a bundle
  // context itself, committing a row into another user's scope that no pull ever shows. The
  // guards now rest on identity: only a role with the privileges of the sync schema's owner
  // opens a context or writes a sync table, whatever the text, the function or the role trick.
  describe('a DML role cannot forge what the owner\'s managed functions do', () => {
    const role = `lockstep_dml_${process.pid}`;
    let dml: pg.Client;
    const frame = '/*\nPL/pgSQL function sync.push_commit(*/';
    const managedFrame = '/*\nPL/pgSQL function sync.maintenance_step(*/';
    const forgedWrites = (id: string): string[] => [
      `INSERT ${frame} INTO sync.bundle_context (xact, user_id, source, kind) VALUES (txid_current(), 'bob', 'src-bob', 'push')`,
      `INSERT ${frame} INTO app.lists (id, _sync_scope_id, title) VALUES ('${id}', 'bob', 'forged')`,
      `DELETE ${frame} FROM sync.bundle_context WHERE xact = txid_current()`,
    ];
    const body = (id: string): string => `BEGIN\n${forgedWrites(id).map((w) => `  ${w};`).join('\n')}\nEND`;

    beforeAll(async () => {
      const bob = s.client('bob');
      await initEmpty(bob);
      await pushOk(bob, [list(uuid(), 'bob owns this')], { sourceBundleId: 1 });
      // The widest grants a DBA might give an application's second role: every DML right on the
      // business and sync tables, the sequences, CREATE in a schema of its own and in sync.
      await s.t.exec(`DROP ROLE IF EXISTS ${role}; CREATE ROLE ${role} LOGIN PASSWORD 'dml';
        GRANT USAGE, CREATE ON SCHEMA sync TO ${role}; GRANT USAGE ON SCHEMA app TO ${role};
        GRANT ALL ON ALL TABLES IN SCHEMA sync, app TO ${role}; GRANT ALL ON ALL SEQUENCES IN SCHEMA sync TO ${role};
        CREATE SCHEMA evil AUTHORIZATION ${role}`);
      const url = new URL(s.t.url);
      url.username = role;
      url.password = 'dml';
      dml = new pg.Client({ connectionString: url.toString() });
      await dml.connect();
    });
    afterAll(async () => {
      await dml?.end();
      await s.t.exec(`DROP SCHEMA IF EXISTS evil CASCADE; DROP FUNCTION IF EXISTS sync.push_commit(integer);
        REVOKE ALL ON ALL TABLES IN SCHEMA sync, app FROM ${role}; REVOKE ALL ON ALL SEQUENCES IN SCHEMA sync FROM ${role};
        REVOKE ALL ON SCHEMA sync, app FROM ${role}; DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    });

    async function asDml(...statements: string[]): Promise<{ code?: string; message: string } | null> {
      try {
        await dml.query('BEGIN');
        for (const text of statements) await dml.query(text);
        await dml.query('COMMIT');
        return null;
      } catch (error) {
        await dml.query('ROLLBACK').catch(() => undefined);
        return error as { code?: string; message: string };
      }
    }

    const bobRows = async (): Promise<number> => (await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE _sync_scope_id = 'bob'`)).rows[0].n;

    it('a managed function\'s frame in a comment, in a DO block, a nested DO, or in its own statements, opens nothing', async () => {
      const before = await bobRows();
      const attempts: [string, string[]][] = [
        ['statements', forgedWrites(uuid())],
        ['DO block', [`DO $$ ${frame}\n${body(uuid())} $$`]],
        ['nested DO', [`DO $outer$ BEGIN EXECUTE ${'$x$'}DO $inner$ ${body(uuid())} $inner$${'$x$'}; END $outer$`]],
        ['sync table, managed frame', [`UPDATE ${managedFrame} sync.user_state SET latest_bundle_seq = 0 WHERE user_id = 'bob'`]],
        ['sync table in a DO block', [`DO $$ BEGIN DELETE ${managedFrame} FROM sync.bundle_log WHERE user_id = 'bob'; END $$`]],
      ];
      for (const [what, statements] of attempts) {
        const error = await asDml(...statements);
        expect(error?.code, `${what}: ${error?.message}`).toBe('42501');
      }
      expect(await bobRows()).toBe(before);
      expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.capture_rows`)).rows[0].n).toBe(0);
      expect((await s.t.exec(`SELECT latest_bundle_seq::int AS n FROM sync.user_state WHERE user_id = 'bob'`)).rows[0].n).toBe(1);
    });

    it('functions the role owns — named like a managed one, in sync or another schema, SECURITY DEFINER — open nothing', async () => {
      const before = await bobRows();
      const fn = (name: string, extra = ''): string =>
        `CREATE FUNCTION ${name} RETURNS void LANGUAGE plpgsql ${extra} AS $fn$ ${frame}\n${body(uuid())} $fn$`;
      const attempts: [string, string[]][] = [
        ['an overload in sync', [fn('sync.push_commit(integer)'), 'SELECT sync.push_commit(1)']],
        ['same name in another schema', [fn('evil.push_commit()'), 'SET LOCAL search_path = evil, sync', 'SELECT push_commit()']],
        ['SECURITY DEFINER of its own', [fn('evil.forge()', 'SECURITY DEFINER SET search_path = sync, pg_catalog'), 'SELECT evil.forge()']],
        ['server_bundle_begin as itself', [`SELECT sync.server_bundle_begin('bob', 'server:forged')`,
          `INSERT INTO app.lists (id, _sync_scope_id, title) VALUES ('${uuid()}', 'bob', 'forged')`,
          `SELECT sync.server_bundle_finish('bob', ${defaultLimits.retainedBundlesPerUser})`]],
      ];
      for (const [what, statements] of attempts) {
        const error = await asDml(...statements);
        expect(error?.code, `${what}: ${error?.message}`).toBe('42501');
      }
      expect(await bobRows()).toBe(before);
    });

    it('role tricks: SET ROLE or SESSION AUTHORIZATION to the owner is refused, and nothing is written', async () => {
      const owner = (await s.t.exec(`SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 'sync'`)).rows[0].owner as string;
      for (const trick of [`SET ROLE ${owner}`, `SET SESSION AUTHORIZATION ${owner}`, `SET LOCAL ROLE ${owner}`]) {
        const error = await asDml(trick, ...forgedWrites(uuid()));
        expect(error?.code, `${trick}: ${error?.message}`).toBe('42501');
      }
      // RESET ROLE leaves the role itself; SET ROLE NONE too.
      const error = await asDml('SET ROLE NONE', ...forgedWrites(uuid()));
      expect(error?.code, error?.message).toBe('42501');
      expect(error?.message).toMatch(/owns the sync schema/);
    });

    it('the owner\'s managed functions still serve every user after all that', async () => {
      await pushOk(alice, [list(uuid(), 'still fine')], { sourceBundleId: 2 });
      const pulled = await s.client('bob').get('/sync/pull?after_bundle_seq=0');
      expectStatus(pulled, 200);
      const snapshot = await s.client('bob').post('/sync/snapshot-sessions', {});
      const page = await s.client('bob').get(`/sync/snapshot-sessions/${snapshot.body.snapshot_id}`);
      expect(page.body.rows.length).toBe(pulled.body.bundles.flatMap((b: any) => b.rows).length);
    });
  });
});
