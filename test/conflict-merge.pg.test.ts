/**
 * Issue 24 item 3, conflicts with a base, the two stories a developer met:
 *
 * 1. Device C changes only `priority` of a task that devices A and B retitled meanwhile. Before,
 *    C's push met a conflict and the default policy (server wins) dropped C's priority. Now the
 *    default merges column by column against the base C started from: the title comes from the
 *    server, the priority from C.
 * 2. A server write that only fills a column (one the server added after the device's app version
 *    was built, or one both sides have) conflicts with an offline edit of another column. Before,
 *    the user's edit was dropped; now it is kept and the server's value too.
 *
 * Plus what the resolver and the conflict log see: base, local and server rows, the proposed merge,
 * what was kept and what overwritten. Real wa-sqlite under Node, real HTTP, real PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConflictInput, type TableConfig } from '../client-web/api.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { parseTables } from '../core/config.js';
import { sql } from '../core/db/sql.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { openDevice, type Device, type DeviceOptions } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';

const SCHEMA_SQL = `
CREATE SCHEMA app;
CREATE TABLE app.tasks (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  priority integer NOT NULL DEFAULT 0,
  done boolean NOT NULL DEFAULT false,
  PRIMARY KEY (_sync_scope_id, id)
);`;
const TABLES = 'app.tasks:id';
const LOCAL_SQL = 'CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, title TEXT NOT NULL, priority INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0)';
const LOCAL_TABLES: readonly TableConfig[] = [{ schema: 'app', table: 'tasks' }];

describe('conflicts merge column by column against the base', () => {
  let s: TestServer;
  const devices: Device[] = [];
  const device = async (user: string, options: DeviceOptions = {}) => {
    const d = await openDevice(s, user, { schemaSql: LOCAL_SQL, tables: LOCAL_TABLES, ...options });
    await d.client.attach(user);
    devices.push(d);
    return d;
  };
  const serverTask = async (user: string, id: string) => (await s.t.exec('SELECT * FROM app.tasks WHERE _sync_scope_id = $1 AND id = $2', [user, id])).rows[0];
  const localTask = async (d: Device, id: string) => (await d.db.query('SELECT title, priority, done FROM tasks WHERE id = ?', [id]))[0];

  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA_SQL, tables: parseTables(TABLES) });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('story 1: C changes only the priority of a task A and B retitled; C keeps its priority, everyone gets the last title', async () => {
    const user = 'story-1';
    const [a, b, c] = [await device(user), await device(user), await device(user)];
    await a.db.run("INSERT INTO tasks (id, title, priority) VALUES ('t1', 'draft', 1)");
    await a.client.sync();
    await b.client.sync();
    await c.client.sync();
    // C goes offline from here: it changes the priority only.
    await c.db.run("UPDATE tasks SET priority = 5 WHERE id = 't1'");
    await a.db.run("UPDATE tasks SET title = 'Plan v1' WHERE id = 't1'");
    await a.client.sync();
    await b.client.sync();
    await b.db.run("UPDATE tasks SET title = 'Plan v2' WHERE id = 't1'");
    await b.client.sync();

    const result = await c.client.sync();
    expect(result.push).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    expect(await serverTask(user, 't1')).toMatchObject({ title: 'Plan v2', priority: 5, done: false });
    await a.client.sync();
    await b.client.sync();
    for (const d of [a, b, c]) expect(await localTask(d, 't1')).toEqual({ title: 'Plan v2', priority: 5, done: 0 });

    const [logged, ...more] = await c.client.conflicts();
    expect(more).toEqual([]);
    expect(logged).toMatchObject({
      schema: 'app', table: 'tasks', key: 't1', localOp: 'UPDATE', resolution: 'merged',
      keptLocal: ['priority'], tookServer: ['title'], overwritten: [],
      base: { id: 't1', title: 'draft', priority: 1, done: false },
      local: { id: 't1', title: 'draft', priority: 5, done: false },
      server: { id: 't1', title: 'Plan v2', priority: 1, done: false },
      result: { id: 't1', title: 'Plan v2', priority: 5, done: false },
    });
    expect(logged?.baseRowVersion).toBe(1);
    expect(logged?.serverRowVersion).toBe(3);
    await c.client.dismissConflicts([logged?.id as number]);
    expect(await c.client.conflicts()).toEqual([]);
    expect((await c.client.pendingStatus()).dirtyRows).toBe(0);
  });

  it('both sides changed the title: the server\'s title wins and the log says the device\'s was overwritten; its priority is kept', async () => {
    const user = 'both-changed';
    const [a, c] = [await device(user), await device(user)];
    await a.db.run("INSERT INTO tasks (id, title, priority) VALUES ('t2', 'draft', 1)");
    await a.client.sync();
    await c.client.sync();
    await c.db.run("UPDATE tasks SET title = 'C title', priority = 9 WHERE id = 't2'");
    await a.db.run("UPDATE tasks SET title = 'A title' WHERE id = 't2'");
    await a.client.sync();
    expect((await c.client.sync()).push).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    expect(await serverTask(user, 't2')).toMatchObject({ title: 'A title', priority: 9 });
    expect(await c.client.conflicts()).toEqual([expect.objectContaining({ resolution: 'merged', keptLocal: ['priority'], overwritten: ['title'], tookServer: [] })]);
    // Nothing of C's survives (it changed only what A changed too): the server's row, logged as such.
    await c.db.run("UPDATE tasks SET title = 'C again' WHERE id = 't2'");
    await a.db.run("UPDATE tasks SET title = 'A again' WHERE id = 't2'");
    await a.client.sync();
    expect((await c.client.sync()).push).toMatchObject({ status: 'resolved_without_commit', conflictsResolved: 1 });
    expect(await localTask(c, 't2')).toEqual({ title: 'A again', priority: 9, done: 0 });
    expect((await c.client.conflicts()).at(-1)).toMatchObject({ resolution: 'server', keptLocal: [], overwritten: ['title'] });
  });

  it('a resolver sees base, local, server and the proposed merge, and may answer the merge with its own choice', async () => {
    const user = 'resolver';
    const seen: ConflictInput[] = [];
    const tables: TableConfig[] = [{
      schema: 'app', table: 'tasks',
      resolver: (input) => {
        seen.push(input);
        // Keep the device's title where both changed it; everything else as merged.
        return { keep: 'merged', payload: { ...input.merged?.payload, title: input.localPayload?.['title'] } };
      },
    }];
    const a = await device(user);
    const c = await device(user, { tables });
    await a.db.run("INSERT INTO tasks (id, title, priority) VALUES ('t3', 'draft', 1)");
    await a.client.sync();
    await c.client.sync();
    await c.db.run("UPDATE tasks SET title = 'mine' WHERE id = 't3'");
    await a.db.run("UPDATE tasks SET title = 'theirs', done = 1 WHERE id = 't3'");
    await a.client.sync();
    await c.client.sync();
    expect(await serverTask(user, 't3')).toMatchObject({ title: 'mine', done: true, priority: 1 });
    expect(seen).toEqual([expect.objectContaining({
      base: { rowVersion: 1, payload: { id: 't3', title: 'draft', priority: 1, done: false } },
      localPayload: { id: 't3', title: 'mine', priority: 1, done: false },
      serverPayload: expect.objectContaining({ title: 'theirs', done: true }),
      merged: { payload: { id: 't3', title: 'theirs', priority: 1, done: true }, fromLocal: [], fromServer: ['done'], bothChanged: ['title'] },
    })]);
    expect(await c.client.conflicts()).toEqual([expect.objectContaining({ resolution: 'resolver', keptLocal: ['title'], overwritten: [] })]);
  });

  it('story 2: a server write that only fills a column the server added never discards an offline edit of another column', async () => {
    const user = 'story-2';
    const d = await device(user);
    await d.db.run("INSERT INTO tasks (id, title) VALUES ('t4', 'offline soon')");
    await d.client.sync();
    // The device goes offline and edits the title.
    await d.db.run("UPDATE tasks SET title = 'edited offline' WHERE id = 't4'");
    // Meanwhile the app's next release adds a column on the server, and a server job fills it.
    await s.t.exec('ALTER TABLE app.tasks ADD COLUMN note text');
    await bootstrap(s.t.db, { tables: parseTables(TABLES) });
    s.runtime.invalidateCatalog();
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:backfill', retainedBundlesPerUser: 10_000 }, (tx, scope) =>
      tx.query(sql`UPDATE app.tasks SET note = 'filled by the server' WHERE _sync_scope_id = ${scope} AND id = 't4'`));
    // Back online: the device (an older app version, no note column) pushes its edit.
    expect((await d.client.sync()).push).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    expect(await serverTask(user, 't4')).toMatchObject({ title: 'edited offline', note: 'filled by the server' });
    expect(await localTask(d, 't4')).toMatchObject({ title: 'edited offline' });
    expect(await d.client.conflicts()).toEqual([expect.objectContaining({ resolution: 'merged', keptLocal: ['title'], overwritten: [] })]);
  });

  it('story 2, a column both sides have: the server fills it while the device edits another; both changes stay', async () => {
    const user = 'story-2b';
    const d = await device(user);
    await d.db.run("INSERT INTO tasks (id, title) VALUES ('t5', 'task')");
    await d.client.sync();
    await d.db.run("UPDATE tasks SET title = 'retitled offline' WHERE id = 't5'");
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:job', retainedBundlesPerUser: 10_000 }, (tx, scope) =>
      tx.query(sql`UPDATE app.tasks SET priority = 7 WHERE _sync_scope_id = ${scope} AND id = 't5'`));
    expect((await d.client.sync()).push).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    expect(await serverTask(user, 't5')).toMatchObject({ title: 'retitled offline', priority: 7 });
    expect(await localTask(d, 't5')).toEqual({ title: 'retitled offline', priority: 7, done: 0 });
    // A second round on the merged row merges against the new base (the server's row it met).
    await d.db.run('UPDATE tasks SET done = 1 WHERE id = ?', ['t5']);
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:job', retainedBundlesPerUser: 10_000 }, (tx, scope) =>
      tx.query(sql`UPDATE app.tasks SET priority = 8 WHERE _sync_scope_id = ${scope} AND id = 't5'`));
    await d.client.sync();
    expect(await serverTask(user, 't5')).toMatchObject({ title: 'retitled offline', priority: 8, done: true });
  });
});
