/**
 * Issue 23 item 11, a new app version right after a deploy, through the local gateway. After
 * bootstrap adds a column, a running server serves it on its first request: the local runtime
 * reloads its catalog when bootstrap's commit signals it (its LISTEN connection), and a
 * container without one (as in Lambda) when a request cannot be answered from a stale catalog —
 * capabilities asked with `no-cache`, a pushed row naming a column it does not know — at the cost
 * of one cheap read. A client whose app declares a column the server does not publish yet opens,
 * captures, and waits (`retry_later`, the retriable `server_schema_behind`), never failing; once
 * the deploy bootstrapped, it syncs, the new column's values included. The catalog's own refresh
 * is an hour here, so nothing else can explain a fresh answer.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type SyncStatus } from '../client-web/api.js';
import { errorCodeOf, isRetriableCode, type SyncErrorCode } from '../client-web/errors.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { LOCAL_APP_SQL, blobOfUuid, openDevice, type Device } from './support/client-harness.js';
import { APP_TABLES } from './support/schemas.js';
import { scratchDir } from './support/scratch.js';
import { startTestServer, type TestServer } from './support/server.js';
import { until } from './support/until.js';
import { expectStatus, initEmpty, list, push, uuid } from './support/write-helpers.js';

const HOUR = { SYNC_LIMIT_CATALOG_REFRESH_SECONDS: '3600' };
const ADD_NOTE = 'ALTER TABLE app.lists ADD COLUMN note text';
/** The next app version: lists gained `note` locally too. */
const LOCAL_NEXT_SQL = `${LOCAL_APP_SQL}\nALTER TABLE lists ADD COLUMN note TEXT;`;

const listColumns = (caps: { body: { registered_table_specs: { table: string; columns: { name: string }[] }[] } }) =>
  caps.body.registered_table_specs.find((t) => t.table === 'lists')?.columns.map((c) => c.name) ?? [];

describe('a running server serves what bootstrap just added (issue 23 item 11)', () => {
  const servers: TestServer[] = [];
  const devices: Device[] = [];
  afterAll(async () => {
    for (const d of devices) await d.close();
    for (const s of servers) await s.close();
  });

  it('the local runtime reloads its catalog when bootstrap commits (its LISTEN connection), without being asked', async () => {
    const s = await startTestServer({ env: HOUR });
    servers.push(s);
    const c = s.client('deploy-listen');
    expect(listColumns(await c.get('/sync/capabilities'))).not.toContain('note');
    await s.t.exec(ADD_NOTE);
    await bootstrap(s.t.db, { tables: APP_TABLES });
    // Signalled at bootstrap's commit: a plain request sees the column as soon as the signal is in.
    await until('capabilities publish the new column', async () => listColumns(await c.get('/sync/capabilities')), (columns) => columns.includes('note'));
  });

  it('without a LISTEN connection (Lambda): a no-cache capabilities request and a row naming the new column are answered fresh', async () => {
    const s = await startTestServer({ env: HOUR, feed: false });
    servers.push(s);
    const c = s.client('deploy-lambda');
    await initEmpty(c);
    const warm = await c.get('/sync/capabilities');
    expect(listColumns(warm)).not.toContain('note');
    expect(warm.roundTrips).toBe(0);
    await s.t.exec(ADD_NOTE);
    await bootstrap(s.t.db, { tables: APP_TABLES });
    // A plain request may still be answered from the container's catalog; one asking past the
    // cache reads the stamp and, as it changed, the catalog: the first request after bootstrap.
    const fresh = await c.request('GET', '/sync/capabilities', undefined, { 'cache-control': 'no-cache' });
    expect(listColumns(fresh)).toContain('note');
    expect(fresh.roundTrips).toBe(2);
    const again = await c.request('GET', '/sync/capabilities', undefined, { 'cache-control': 'no-cache' });
    expect(again.roundTrips).toBe(1);

    // Another container still holding the old catalog takes a row naming the new column.
    const other = await startTestServer({ env: HOUR, feed: false });
    servers.push(other);
    const o = other.client('deploy-lambda-2');
    await initEmpty(o);
    expect(listColumns(await o.get('/sync/capabilities'))).not.toContain('note');
    await other.t.exec(ADD_NOTE);
    await bootstrap(other.t.db, { tables: APP_TABLES });
    const id = uuid();
    const answer = await push(o, [list(id, 'with a note', 0, { note: 'new column' })], { sourceBundleId: 1 });
    expectStatus(answer, 200);
    expect((await other.t.exec('SELECT note FROM app.lists WHERE id = $1', [id])).rows).toEqual([{ note: 'new column' }]);
  });

  it('a client whose app declares the column first opens, captures and waits, then syncs once the deploy bootstrapped', async () => {
    const s = await startTestServer({ env: HOUR, feed: false });
    servers.push(s);
    const user = 'deploy-client';
    const d = await openDevice(s, user, { schemaSql: LOCAL_NEXT_SQL });
    devices.push(d);
    const listId = uuid();
    await d.client.db.run('INSERT INTO lists (id, title, note) VALUES (?, ?, ?)', [blobOfUuid(listId), 'written before the deploy', 'kept']);
    expect(await d.client.pendingStatus()).toMatchObject({ dirtyRows: 1 });
    expect(await d.client.attach(user)).toMatchObject({ status: 'retry_later', reason: 'server_schema_behind' });
    await expect(d.client.sync()).rejects.toMatchObject({ code: 'not_attached' });

    // The loop waits in backoff, saying why; it never needs attention.
    const statuses: SyncStatus[] = [];
    d.client.onStatus((st) => statuses.push(st));
    d.client.start({ userId: user, periodicMs: 0, backoff: { baseMs: 60_000, maxMs: 60_000 } });
    await until('waiting', () => statuses.at(-1) as SyncStatus, (st) => st.phase === 'backoff');
    expect(statuses.at(-1)?.lastError?.code).toBe('server_schema_behind');

    await s.t.exec(ADD_NOTE);
    await bootstrap(s.t.db, { tables: APP_TABLES });
    d.client.requestSync();
    await until('synced', () => statuses.at(-1) as SyncStatus, (st) => st.phase === 'idle' && st.pendingRows === 0 && st.attachedUserId === user);
    expect(statuses.map((st) => st.phase)).not.toContain('needs_attention');
    expect((await s.t.exec('SELECT title, note FROM app.lists WHERE _sync_scope_id = $1', [user])).rows).toEqual([{ title: 'written before the deploy', note: 'kept' }]);
    await d.client.stop();

  });

  it('an attached device updated to the new app version: sync() is the retriable server_schema_behind until the deploy bootstrapped', async () => {
    const s = await startTestServer({ env: HOUR, feed: false });
    servers.push(s);
    const user = 'deploy-attached';
    const path = join(scratchDir('deploy'), 'device.db');
    const before = await openDevice(s, user, { path });
    await before.client.attach(user);
    await before.close();
    // The app's update adds the column locally before the server's deploy ran.
    const d = await openDevice(s, user, { path, schemaSql: LOCAL_NEXT_SQL });
    devices.push(d);
    const listId = uuid();
    await d.client.db.run('INSERT INTO lists (id, title, note) VALUES (?, ?, ?)', [blobOfUuid(listId), 'updated app', 'a note']);
    const error = await d.client.sync().then(() => null, (e: unknown) => e);
    expect(error).toMatchObject({ code: 'server_schema_behind', details: { problems: [expect.stringMatching(/lists\.note/)] } });
    expect(isRetriableCode(errorCodeOf(error) as SyncErrorCode)).toBe(true);
    await s.t.exec(ADD_NOTE);
    await bootstrap(s.t.db, { tables: APP_TABLES });
    expect((await d.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
    expect((await s.t.exec('SELECT note FROM app.lists WHERE id = $1', [listId])).rows).toEqual([{ note: 'a note' }]);
  });
});
