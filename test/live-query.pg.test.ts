/**
 * Issue 24 item 1, live queries in the client: a query runs once and again only
 * when a committed transaction wrote a table it reads — the app's writes, pulls, hydration,
 * detach — once per transaction (a 2,000-row hydration in ten snapshot pages is one re-run),
 * coalescing bursts; unchanged rows keep their objects; errors and `complete` are reported.
 * Real wa-sqlite under Node, real HTTP, real PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LiveQueryResult, type SyncClient } from '../client-web/api.js';
import { openClient } from '../client-web/client.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type SqlRow, type SqliteDb } from '../client-web/sqlite/port.js';
import { sql } from '../core/db/sql.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { blobOfUuid, LOCAL_APP_SQL, LOCAL_APP_TABLES, TEST_RETRY, write } from './support/client-harness.js';
import { signToken, startTestServer, type TestServer } from './support/server.js';
import { until } from './support/until.js';

const ITEMS_SQL = 'SELECT id, body, done FROM items WHERE list_id = ? ORDER BY body';

/** A database that counts the runs of each query text, so a test can tell re-runs apart from deliveries. */
function counting(db: SqliteDb): { db: SqliteDb; runs: (sqlText: string) => number } {
  const runs = new Map<string, number>();
  return {
    db: {
      ...db,
      exec: (s) => db.exec(s),
      run: (s, p) => db.run(s, p),
      runMany: (s, p) => db.runMany(s, p),
      transaction: (fn) => db.transaction(fn),
      tablesRead: (s) => db.tablesRead(s),
      onCommit: (l) => db.onCommit(l),
      close: () => db.close(),
      query: <T extends SqlRow = SqlRow>(s: string, p?: readonly (null | number | bigint | string | Uint8Array)[]) => {
        runs.set(s, (runs.get(s) ?? 0) + 1);
        return db.query<T>(s, p);
      },
    },
    runs: (s) => runs.get(s) ?? 0,
  };
}

describe('live queries', () => {
  let s: TestServer;
  const clients: SyncClient[] = [];
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await s?.close();
  });

  async function device(user: string, pageRows?: number): Promise<{ client: SyncClient; runs: (sqlText: string) => number }> {
    const raw = await openNodeSqlite();
    await raw.exec(LOCAL_APP_SQL);
    const { db, runs } = counting(raw);
    const token = signToken(user);
    const client = await openClient({ baseUrl: s.url, getToken: () => token, db, tables: LOCAL_APP_TABLES, retry: TEST_RETRY, ...(pageRows ? { pageRows } : {}) });
    clients.push(client);
    return { client, runs };
  }

  const serverItems = (user: string, listId: string, bodies: string[]) =>
    serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: 10_000 }, async (tx, scope) => {
      for (const body of bodies) await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body) VALUES (${randomUUID()}, ${scope}, ${listId}, ${body})`);
    });

  it('runs once, re-runs after a write to a table it reads (and only then), and keeps unchanged rows', async () => {
    const user = 'live-basic';
    const { client, runs } = await device(user);
    await client.attach(user);
    const listId = randomUUID();
    await write.list(client.db, listId, 'groceries');
    const apples = randomUUID();
    const bread = randomUUID();
    await write.item(client.db, apples, listId, 'apples');
    await write.item(client.db, bread, listId, 'bread');
    const results: LiveQueryResult<SqlRow>[] = [];
    const live = client.liveQuery(ITEMS_SQL, [blobOfUuid(listId)], (r) => results.push(r));
    expect(live.result.loading).toBe(true);
    await until('the first result', () => results.length, (n) => n >= 1);
    expect(results[0]).toMatchObject({ loading: false, error: null, complete: false, rows: [{ body: 'apples' }, { body: 'bread' }] });
    const first = results[0] as LiveQueryResult<SqlRow>;
    expect(runs(ITEMS_SQL)).toBe(1);

    // A write to a table the query does not read: no re-run, nothing delivered.
    await client.db.run("INSERT INTO kinds (code, label) VALUES ('k', 'unrelated')");
    await client.db.run('UPDATE lists SET title = ? WHERE id = ?', ['renamed', blobOfUuid(listId)]);
    expect(runs(ITEMS_SQL)).toBe(1);

    // One row changes: one re-run; the other row is the same object as before.
    await client.db.run('UPDATE items SET done = 1 WHERE id = ?', [bread]);
    await until('the change delivered', () => results.length, (n) => n >= 2);
    const second = results[1] as LiveQueryResult<SqlRow>;
    expect(second.rows).toEqual([{ id: apples, body: 'apples', done: 0 }, { id: bread, body: 'bread', done: 1 }]);
    expect(second.rows[0]).toBe(first.rows[0]);
    expect(second.rows[1]).not.toBe(first.rows[1]);
    expect(runs(ITEMS_SQL)).toBe(2);

    // A write to the table that changes none of its rows: a re-run, but nothing delivered.
    await client.db.run('UPDATE items SET done = 1 WHERE id = ?', [bread]);
    await until('the re-run', () => runs(ITEMS_SQL), (n) => n >= 3);
    await new Promise((r) => setTimeout(r, 50));
    expect(results).toHaveLength(2);
    live.close();
  });

  it('coalesces a burst of writes into few re-runs, and follows pulls of another device', async () => {
    const user = 'live-burst';
    const { client, runs } = await device(user);
    await client.attach(user);
    const listId = randomUUID();
    await write.list(client.db, listId, 'burst');
    const results: LiveQueryResult<SqlRow>[] = [];
    const live = client.liveQuery(ITEMS_SQL, [blobOfUuid(listId)], (r) => results.push(r));
    await until('the first result', () => results.length, (n) => n >= 1);
    // 50 writes issued at once: the query runs while they commit, and once more after them.
    await Promise.all(Array.from({ length: 50 }, (_, i) => write.item(client.db, randomUUID(), listId, `burst ${String(i).padStart(2, '0')}`)));
    await until('every burst row delivered', () => live.result.rows.length, (n) => n === 50);
    expect(runs(ITEMS_SQL)).toBeLessThanOrEqual(4);

    // Another device's rows arrive by a pull: one re-run for the page that brought them.
    await client.sync();
    const before = runs(ITEMS_SQL);
    await serverItems(user, listId, ['from the server 1', 'from the server 2']);
    await client.sync();
    await until('the pulled rows delivered', () => live.result.rows.length, (n) => n === 52);
    expect(runs(ITEMS_SQL) - before).toBe(1);
    expect(live.result.complete).toBe(true);
    live.close();
  });

  it('a hydration in ten snapshot pages re-runs the query once per page at most, its rows arriving page by page; complete turns true; detach empties the rows and complete turns false', async () => {
    const user = 'live-hydrate';
    const listId = randomUUID();
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:seed', retainedBundlesPerUser: 10_000 }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES (${listId}, ${scope}, 'big')`);
      await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body) SELECT gen_random_uuid(), ${scope}, ${listId}, 'row ' || lpad(g::text, 4, '0') FROM generate_series(1, 1999) g`);
    });
    const { client, runs } = await device(user, 200);
    const results: LiveQueryResult<SqlRow>[] = [];
    const live = client.liveQuery(ITEMS_SQL, [blobOfUuid(listId)], (r) => results.push(r));
    await until('the first (empty) result', () => results.length, (n) => n >= 1);
    expect(live.result).toMatchObject({ rows: [], loading: false, complete: false });
    const attached = await client.attach(user);
    expect(attached).toMatchObject({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 2000 });
    await until('the hydrated rows delivered', () => live.result.rows.length, (n) => n === 1999);
    // A fresh device writes each page straight into the tables (items after lists, which the
    // snapshot sends first), one transaction per page: the query re-runs per page, never per row,
    // and every result it delivered holds whole pages (the first also holds the list), growing.
    expect(runs(ITEMS_SQL)).toBeGreaterThan(2);
    expect(runs(ITEMS_SQL)).toBeLessThanOrEqual(1 + 10);
    const sizes = results.map((r) => r.rows.length);
    expect(sizes).toEqual([...sizes].sort((x, y) => x - y));
    expect(sizes.every((n) => n === 0 || (n + 1) % 200 === 0)).toBe(true);
    await until('complete', () => live.result.complete, (c) => c);
    // Detach clears the synced data: the rows go, and so does completeness.
    expect(await client.detach()).toEqual({ status: 'detached' });
    await until('the rows gone and incomplete', () => live.result, (r) => r.rows.length === 0 && !r.complete);
    live.close();
  });

  it('asks for the tables a query reads together with its rows, never one round trip before them (first run, and re-runs after pulls)', async () => {
    const user = 'live-together';
    const raw = await openNodeSqlite();
    await raw.exec(LOCAL_APP_SQL);
    // Each ask for ITEMS_SQL's tables answers only once its rows were asked for too (or after a
    // bound, so a run that waits for the tables first is seen as such instead of hanging).
    let rowsAsked: () => void = () => undefined;
    let rowsAskedAt = 0;
    const asks: boolean[] = [];
    const db: SqliteDb = {
      ...raw,
      exec: (q) => raw.exec(q),
      run: (q, p) => raw.run(q, p),
      runMany: (q, p) => raw.runMany(q, p),
      transaction: (fn) => raw.transaction(fn),
      onCommit: (l) => raw.onCommit(l),
      close: () => raw.close(),
      query: <T extends SqlRow = SqlRow>(q: string, p?: readonly (null | number | bigint | string | Uint8Array)[]) => {
        if (q === ITEMS_SQL) {
          rowsAskedAt++;
          rowsAsked();
        }
        return raw.query<T>(q, p);
      },
      tablesRead: async (q) => {
        if (q !== ITEMS_SQL) return raw.tablesRead(q);
        const before = rowsAskedAt;
        await new Promise<void>((resolve) => {
          const bound = setTimeout(resolve, 2000);
          rowsAsked = () => {
            clearTimeout(bound);
            resolve();
          };
        });
        asks.push(rowsAskedAt > before);
        return raw.tablesRead(q);
      },
    };
    const token = signToken(user);
    const client = await openClient({ baseUrl: s.url, getToken: () => token, db, tables: LOCAL_APP_TABLES, retry: TEST_RETRY });
    clients.push(client);
    await client.attach(user);
    const listId = randomUUID();
    await write.list(client.db, listId, 'together');
    await client.sync();
    const live = client.liveQuery(ITEMS_SQL, [blobOfUuid(listId)]);
    await until('the first result', () => live.result.loading, (loading) => !loading);
    // A pull's apply creates its scratch table (a schema change): the re-run asks for the tables again.
    await serverItems(user, listId, ['pulled']);
    await client.sync();
    await until('the pulled row', () => live.result.rows.length, (n) => n === 1);
    expect(asks.length).toBeGreaterThanOrEqual(2);
    expect(asks.every(Boolean)).toBe(true);
    live.close();
  });

  it('a pull\'s apply reports a schema change only when it creates its scratch table, so live queries keep the tables they read', async () => {
    const user = 'live-scratch';
    const { client } = await device(user);
    await client.attach(user);
    const listId = randomUUID();
    await write.list(client.db, listId, 'scratch');
    await client.sync();
    const applies: string[][] = [];
    const stop = client.db.onCommit((tables) => {
      if (tables.has('items')) applies.push([...tables].sort());
    });
    for (const body of ['first', 'second', 'third']) {
      await serverItems(user, listId, [body]);
      await client.sync();
    }
    stop();
    expect(applies).toHaveLength(3);
    // The first apply of the connection creates the scratch table; the later ones find it.
    expect(applies.slice(1).map((tables) => tables.filter((t) => t.startsWith('sqlite_')))).toEqual([[], []]);
  });

  it('reports a failing query, and runs it again when the schema changes', async () => {
    const { client } = await device('live-errors');
    const live = client.liveQuery('SELECT note FROM notes_added_later');
    await until('the failure', () => live.result.error, (e) => e !== null);
    expect(live.result).toMatchObject({ loading: false, rows: [] });
    expect(live.result.error?.message).toMatch(/no such table: notes_added_later/);
    await client.db.exec("CREATE TABLE notes_added_later (note TEXT); INSERT INTO notes_added_later VALUES ('hello')");
    await until('the rows once the table exists', () => live.result, (r) => r.error === null && r.rows.length === 1);
    expect(live.result.rows).toEqual([{ note: 'hello' }]);
    live.close();
    // Closed: no more deliveries.
    const seen = live.result;
    await client.db.run("INSERT INTO notes_added_later VALUES ('again')");
    await new Promise((r) => setTimeout(r, 50));
    expect(live.result).toBe(seen);
  });
});
