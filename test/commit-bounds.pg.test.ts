/**
 * Issue 26 item 8: a bundle the server accepted could still fail to commit within the statement
 * bound (a 100,000-row bundle under load: 503 at 20 s), and the client retried that commit without
 * end. The server cannot know at creation how long a commit will take under load (and the
 * contract publishes 100,000 rows as the bundle maximum), so the bound is enforced where it fires:
 * a commit stopped by statement_timeout is `413 payload_too_large` with `split: true` — nothing
 * committed, a typed answer telling the client to split — and the client freezes half as many
 * rows and goes on, so it converges: every row that can commit within the bound does, and a
 * single row that cannot is set aside as rejected instead of being retried forever.
 *
 * Deterministic with small bounds: statement_timeout 1.5 s for this database's sessions, and an
 * app trigger that sleeps 3 s for a row titled 'slow' (always past the bound, on any machine).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { defaultLimits } from '../core/limits.js';
import { blobOfUuid, openDevice, type Device } from './support/client-harness.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './support/schemas.js';
import { openTestDb } from './support/server-db.js';
import { serveTestDb, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, list, push, uuid } from './support/write-helpers.js';

const SLOW_SQL = `${APP_SCHEMA_SQL}
CREATE FUNCTION app.slow_title() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.title = 'slow' THEN PERFORM pg_sleep(3); END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER slow_title AFTER INSERT OR UPDATE ON app.lists FOR EACH ROW EXECUTE FUNCTION app.slow_title();`;
const BOUNDS = { ...defaultLimits, statementTimeoutMs: 1500, lockTimeoutMs: 500 };

describe('a commit that outruns the statement bound is a typed answer to split, and the client splits', () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    const t = await openTestDb({ schemaSql: SLOW_SQL });
    // Before any pooled session starts (a pooler keeps its server sessions): every session of
    // this database gets the small bound. Bootstrap keeps it (the role's bounds on, as
    // SYNC_ROLE_TIMEOUTS=on does): without, it removes a role setting equal to its bound, and a
    // session opened after that (two requests of the client at once) would have none.
    await t.exec(`DO $$ BEGIN EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET statement_timeout = 1500', current_database()); END $$`);
    await bootstrap(t.db, { tables: APP_TABLES, bounds: BOUNDS, roleBounds: true });
    s = await serveTestDb(t, { env: { SYNC_LIMIT_STATEMENT_TIMEOUT_MS: '1500', SYNC_LIMIT_LOCK_TIMEOUT_MS: '500' } });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('the server: 413 payload_too_large with split, nothing committed; the same rows without the slow one commit', async () => {
    const alice = s.client('alice');
    await initEmpty(alice);
    const rows = [list(uuid(), 'fast'), list(uuid(), 'slow'), list(uuid(), 'fast too')];
    const answer = await push(alice, rows, { sourceBundleId: 1 });
    expectStatus(answer, 413, 'payload_too_large');
    expect(answer.body).toMatchObject({ split: true, reason: 'commit_timeout' });
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE _sync_scope_id = 'alice'`)).rows[0].n).toBe(0);
    expectStatus(await push(alice, rows.filter((r) => r.payload?.['title'] !== 'slow'), { sourceBundleId: 1 }), 200);
  });

  it('the client splits the bundle until every row that can commit has, and sets the slow row aside', async () => {
    // Every push request the client sends: its rows (a create carrying them) and its answer.
    const pushes: { path: string; rows: number | null; status: number; split: boolean }[] = [];
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const path = new URL(String(input instanceof Request ? input.url : input)).pathname;
      if (path.startsWith('/sync/push-sessions')) {
        const sent = typeof init?.body === 'string' ? (JSON.parse(init.body) as { rows?: unknown[] }) : {};
        const answer = (await response.clone().json().catch(() => ({}))) as { split?: unknown };
        pushes.push({ path, rows: sent.rows?.length ?? null, status: response.status, split: answer.split === true });
      }
      return response;
    };
    const d = await openDevice(s, 'bob', { config: { onRejected: 'quarantine', fetch: recording } });
    devices.push(d);
    await d.client.attach('bob');
    const ids = Array.from({ length: 8 }, () => uuid());
    for (const [i, id] of ids.entries()) await d.db.run('INSERT INTO lists (id, title) VALUES (?, ?)', [blobOfUuid(id), i === 5 ? 'slow' : `list ${i}`]);
    // Each sync pushes what it can; a few rounds at most (the client halves the bundle each time).
    for (let round = 0; round < 4; round++) await d.client.sync().catch(() => undefined);
    const server = (await s.t.exec(`SELECT title FROM app.lists WHERE _sync_scope_id = 'bob' ORDER BY title`)).rows.map((r) => r.title as string);
    expect(server).toEqual(['list 0', 'list 1', 'list 2', 'list 3', 'list 4', 'list 6', 'list 7']);
    const quarantined = await d.client.quarantined();
    expect(quarantined.map((q) => [q.key, q.code, q.row?.['title']])).toEqual([[ids[5], 'payload_too_large', 'slow']]);
    // Each bundle ran into the bound once: these bundles fit one request, and a split answer to
    // one is acted on at once, never staged to run the same commit into the bound again.
    const split = pushes.filter((p) => p.split);
    expect(split.length).toBeGreaterThan(1);
    expect(split.every((p) => p.status === 413 && p.path === '/sync/push-sessions' && p.rows !== null)).toBe(true);
    expect(pushes.filter((p) => p.path.endsWith('/commit'))).toEqual([]);
    // A split bundle of n rows is followed by a push of at most half of them, and a half that
    // commits by the rest of the split bundle, never by every row left: the slow row is alone
    // after log2(8) + 1 bounds, wherever the freeze put it.
    for (const [i, p] of pushes.entries()) {
      if (!p.split || Number(p.rows) < 2) continue;
      const next = pushes[i + 1];
      expect(next?.rows, `the push after a split of ${p.rows} rows`).toBeLessThanOrEqual(Math.floor(Number(p.rows) / 2));
    }
    expect(split.map((p) => p.rows)).toEqual([8, 4, 2, 1]);
  });
});
