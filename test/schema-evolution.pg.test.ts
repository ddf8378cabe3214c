/**
 * Issue 14, evolving the application's schema: additive changes (a nullable column, a column
 * with a default, a new registered table with rows, an index, a widened type, a relaxed NOT NULL)
 * applied by bootstrap while one device is mid-push and another mid-hydration, with older
 * clients syncing on and a client that gains the column refreshing its rows; unsafe changes
 * refused with every item named and nothing applied; drift met at request time answered with a
 * typed 503 that health explains, never a 500.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { UnsafeSchemaChangeError } from '../core/errors.js';
import { parseTables } from '../core/config.js';
import { startTestServer, type TestServer } from './support/server.js';
import { APP_TABLES } from './support/schemas.js';
import { LOCAL_APP_SQL, LOCAL_APP_TABLES, blobOfUuid, openDevice, uuidOfBlob, type Device } from './support/client-harness.js';
import { readSnapshot } from './support/read-helpers.js';
import { scratchDir } from './support/scratch.js';
import { expectStatus, initEmpty, item, list, push, pushOk, requestHash, uuid, type PushRow } from './support/write-helpers.js';

const TAGS_SQL = `CREATE TABLE app.tags (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  label text NOT NULL,
  PRIMARY KEY (_sync_scope_id, id)
)`;
const EVOLVED_TABLES = parseTables('app.lists:id,app.items:id,app.kinds:code,app.tags:id');

/** The app after its next release: the new columns and the new table, locally too. */
const LOCAL_NEXT_SQL = `${LOCAL_APP_SQL}
ALTER TABLE lists ADD COLUMN note TEXT;
CREATE TABLE IF NOT EXISTS tags (id TEXT PRIMARY KEY, label TEXT NOT NULL);`;
const LOCAL_NEXT_TABLES = [...LOCAL_APP_TABLES, { schema: 'app', table: 'tags' }];

describe('additive changes while clients are mid-push and mid-hydration', () => {
  let s: TestServer;
  let old: Device;
  const user = 'evo';
  const listIds = [uuid(), uuid()];
  const staged = { rows: [] as PushRow[], pushId: '' };
  let snapshot: { id: string; rows: number };

  beforeAll(async () => {
    s = await startTestServer();
    old = await openDevice(s, user);
    await old.client.attach(user);
    for (const [i, id] of listIds.entries()) await old.db.run('INSERT INTO lists (id, title, position) VALUES (?, ?, ?)', [blobOfUuid(id), `list ${i}`, i]);
    await old.client.sync();
    // Another device of the user is half way through a push…
    const pusher = s.client(user, 'evo-pusher');
    staged.rows = [item(uuid(), listIds[0] as string, 'staged before'), item(uuid(), listIds[0] as string, 'uploaded after')];
    const created = await pusher.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 2, request_hash: requestHash(staged.rows) });
    expectStatus(created, 200);
    staged.pushId = created.body.push_id;
    expectStatus(await pusher.post(`/sync/push-sessions/${staged.pushId}/chunks`, { start_row_ordinal: 0, rows: staged.rows.slice(0, 1) }), 200);
    // …and a third one half way through a hydration.
    const hydrating = s.client(user, 'evo-hydrating');
    const snap = await hydrating.post('/sync/snapshot-sessions', {});
    expectStatus(snap, 200);
    snapshot = { id: snap.body.snapshot_id, rows: snap.body.row_count };
    // The application's migration, applied while all of that is open; tags already has rows.
    await s.t.exec(`ALTER TABLE app.lists ADD COLUMN note text;
      ALTER TABLE app.items ADD COLUMN priority integer NOT NULL DEFAULT 3;
      CREATE INDEX items_body_idx ON app.items (_sync_scope_id, body);
      ALTER TABLE app.lists ALTER COLUMN position TYPE bigint;
      ALTER TABLE app.items ALTER COLUMN body DROP NOT NULL;
      ${TAGS_SQL};
      INSERT INTO app.tags (id, _sync_scope_id, label) VALUES ('t1', '${user}', 'home'), ('t2', '${user}', 'work'), ('t9', 'someone-else', 'x');`);
  });
  afterAll(async () => {
    await old?.close();
    await s?.close();
  });

  it('before bootstrap runs, everything keeps serving the registered columns; health lists what waits', async () => {
    s.runtime.invalidateCatalog();
    const health = await s.client(user).get('/syncx/health');
    expectStatus(health, 200);
    expect(health.body.pending_schema_changes.join('\n')).toMatch(/app\.lists\.note/);
    expect(health.body.pending_schema_changes.join('\n')).toMatch(/app\.lists\.position widened from integer to bigint/);
    await old.db.run('UPDATE lists SET title = ? WHERE id = ?', ['renamed before bootstrap', blobOfUuid(listIds[1] as string)]);
    expect((await old.client.sync()).push).toMatchObject({ status: 'committed' });
  });

  it('bootstrap applies every additive change at once and raises schema_version by one', async () => {
    const result = await bootstrap(s.t.db, { tables: EVOLVED_TABLES });
    expect(result.schemaVersion).toBe(2);
    expect(result.applied.map((c) => c.id).sort()).toEqual([
      'add-column:app.items.priority', 'add-column:app.lists.note', 'add-table:app.tags',
      'relax-not-null:app.items.body', 'widen-column:app.lists.position',
    ]);
    expect(result.adoptedRows).toBe(3);
    s.runtime.invalidateCatalog();
    const caps = await s.client(user).get('/sync/capabilities');
    expect(caps.body.schema_version).toBe(2);
    expect(caps.body.registered_tables).toContain('app.tags');
    const specs = Object.fromEntries(caps.body.registered_table_specs.map((t: any) => [t.table, t.columns]));
    expect(specs.lists).toContainEqual({ name: 'note', type: 'text', nullable: true, has_default: false });
    expect(specs.lists).toContainEqual({ name: 'position', type: 'bigint', nullable: true, has_default: false });
    expect(specs.items).toContainEqual({ name: 'body', type: 'text', nullable: true, has_default: false });
    expect(specs.items).toContainEqual({ name: 'priority', type: 'integer', nullable: false, has_default: true });
    // Adding an index alone changes nothing clients see: a second run only verifies.
    expect(await bootstrap(s.t.db, { tables: EVOLVED_TABLES })).toMatchObject({ unchanged: true, schemaVersion: 2 });
  });

  it('the push staged before the change finishes and commits; omitted new columns take their defaults', async () => {
    const pusher = s.client(user, 'evo-pusher');
    expectStatus(await pusher.post(`/sync/push-sessions/${staged.pushId}/chunks`, { start_row_ordinal: 1, rows: staged.rows.slice(1) }), 200);
    const commit = await pusher.post(`/sync/push-sessions/${staged.pushId}/commit`);
    expectStatus(commit, 200);
    const { rows } = await s.t.exec(`SELECT body, priority FROM app.items WHERE _sync_scope_id = $1 ORDER BY body`, [user]);
    expect(rows).toEqual([{ body: 'staged before', priority: 3 }, { body: 'uploaded after', priority: 3 }]);
  });

  it('the hydration started before the change pages to its end', async () => {
    const page = await readSnapshot(s.url, s.client(user, 'evo-hydrating'), snapshot.id, 1);
    expect(page.rows.length).toBe(snapshot.rows);
  });

  it('the newly registered table arrived as a bundle of its existing rows, for its users only', async () => {
    const newer = s.client(user, 'evo-reader');
    const pulled = await newer.get('/sync/pull?after_bundle_seq=0');
    expectStatus(pulled, 200);
    const tags = pulled.body.bundles.flatMap((b: any) => b.rows).filter((r: any) => r.table === 'tags');
    expect(tags.map((r: any) => [r.op, r.key.id, r.payload.label]).sort()).toEqual([['INSERT', 't1', 'home'], ['INSERT', 't2', 'work']]);
    const other = await s.t.exec(`SELECT b.source_id FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'someone-else'`);
    expect(other.rows).toEqual([{ source_id: 'lockstep:adoption' }]);
  });

  it('an older client keeps pushing and pulling: it skips the new table, and what it omits is kept', async () => {
    const id = listIds[0] as string;
    // A newer device sets the note…
    const newer = s.client(user, 'evo-newer');
    const [meta] = (await s.t.exec(`SELECT r.row_version FROM sync.row_state r JOIN sync.user_state u USING (user_id)
      WHERE u.user_id = $1 AND r.key_bytes = decode(replace($2, '-', ''), 'hex')`, [user, id])).rows;
    await pushOk(newer, [list(id, 'list 0', Number(meta.row_version), { position: 0, note: 'from the new app' })], { sourceBundleId: 1 });
    // …the old one pulls it (and the tags bundle) and edits the title without knowing the note.
    const pulled = await old.client.sync();
    expect(pulled.pull?.bundlesApplied).toBeGreaterThan(0);
    await old.db.run('UPDATE lists SET title = ? WHERE id = ?', ['edited by the old app', blobOfUuid(id)]);
    expect((await old.client.sync()).push).toMatchObject({ status: 'committed' });
    const { rows } = await s.t.exec(`SELECT title, note FROM app.lists WHERE id = $1`, [id]);
    expect(rows).toEqual([{ title: 'edited by the old app', note: 'from the new app' }]);
    expect((await old.client.pendingStatus()).dirtyRows).toBe(0);
  });

  it('a device of the new app version hydrates the new column and the new table', async () => {
    const fresh = await openDevice(s, user, { schemaSql: LOCAL_NEXT_SQL, tables: LOCAL_NEXT_TABLES });
    try {
      const attached = await fresh.client.attach(user);
      expect(attached).toMatchObject({ status: 'attached', resolution: 'remote_authoritative' });
      const notes = await fresh.db.query('SELECT id, note FROM lists');
      expect(notes.map((r) => [uuidOfBlob(r['id']), r['note']])).toContainEqual([listIds[0], 'from the new app']);
      expect((await fresh.db.query('SELECT id FROM tags ORDER BY id')).map((r) => r['id'])).toEqual(['t1', 't2']);
    } finally {
      await fresh.close();
    }
  });
});

describe('a device upgraded in place refreshes the tables that gained a column', () => {
  it('rebuilds on the next sync, keeps the pending row, and gets the values it lacked', async () => {
    const s = await startTestServer();
    const file = join(scratchDir('evo'), 'device.db');
    const device = await openDevice(s, 'inplace', { path: file });
    try {
      await device.client.attach('inplace');
      const a = uuid();
      const b = uuid();
      await device.db.run('INSERT INTO lists (id, title) VALUES (?, ?), (?, ?)', [blobOfUuid(a), 'a', blobOfUuid(b), 'b']);
      await device.client.sync();
      await s.t.exec(`ALTER TABLE app.lists ADD COLUMN note text DEFAULT 'server default'`);
      await bootstrap(s.t.db, { tables: APP_TABLES });
      s.runtime.invalidateCatalog();
      await device.db.run('UPDATE lists SET title = ? WHERE id = ?', ['b pending', blobOfUuid(b)]);
      await device.close();
      // The app's next version: its local migration adds the column, then it opens the client.
      const { openNodeSqlite } = await import('../client-web/sqlite/node.js');
      const raw = await openNodeSqlite({ path: file });
      await raw.exec('ALTER TABLE lists ADD COLUMN note TEXT');
      await raw.close();
      await device.reopen();
      expect((await device.client.pendingStatus()).rebuildRequired).toBe(true);
      await device.client.sync();
      const rows = await device.db.query('SELECT id, title, note FROM lists ORDER BY title');
      expect(rows.map((r) => [uuidOfBlob(r['id']), r['title'], r['note']])).toEqual([[a, 'a', 'server default'], [b, 'b pending', 'server default']]);
      expect((await s.t.exec(`SELECT title FROM app.lists WHERE id = $1`, [b])).rows).toEqual([{ title: 'b pending' }]);
    } finally {
      await device.close();
      await s.close();
    }
  });
});

describe('unsafe changes are refused, every one named, nothing applied', () => {
  it('drop, rename, retype, a required new column, a changed key and an unregistered table, in one report', async () => {
    const s = await startTestServer();
    try {
      const c = s.client('unsafe', 'unsafe-dev');
      await initEmpty(c);
      await pushOk(c, [list(uuid(), 'kept')], { sourceBundleId: 1 });
      const before = (await s.t.exec(`SELECT table_id, columns, upsert_sql FROM sync.table_catalog ORDER BY 1`)).rows;
      await s.t.exec(`ALTER TABLE app.items DROP COLUMN attachment;
        ALTER TABLE app.lists RENAME COLUMN title TO name;
        ALTER TABLE app.kinds ALTER COLUMN ratio TYPE text;
        ALTER TABLE app.items ADD COLUMN weight integer NOT NULL DEFAULT 1; ALTER TABLE app.items ALTER COLUMN weight DROP DEFAULT;`);
      const error = await bootstrap(s.t.db, { tables: parseTables('app.lists:id,app.items:id') }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnsafeSchemaChangeError);
      const ids = (error as UnsafeSchemaChangeError).changes.map((c) => c.id).sort();
      // A rename is a drop plus an add (here of a NOT NULL column without a default).
      expect(ids).toEqual(['add-required-column:app.items.weight', 'add-required-column:app.lists.name', 'drop-column:app.items.attachment',
        'drop-column:app.lists.title', 'drop-table:app.kinds']);
      const message = (error as Error).message;
      for (const id of ids) expect(message).toContain(id);
      expect(message).toMatch(/how: .*DEFAULT/);
      expect(message).toMatch(/A rename is an add/);
      // The type change of a table no longer registered is not checked; registered, it is refused.
      const retype = await bootstrap(s.t.db, { tables: APP_TABLES }).catch((e: unknown) => e);
      expect((retype as UnsafeSchemaChangeError).changes.map((c) => c.id)).toContain('retype-column:app.kinds.ratio');
      expect((await s.t.exec(`SELECT table_id, columns, upsert_sql FROM sync.table_catalog ORDER BY 1`)).rows).toEqual(before);
      expect((await s.t.exec(`SELECT value FROM sync.meta WHERE key = 'schema_version'`)).rows).toEqual([{ value: '1' }]);
    } finally {
      await s.close();
    }
  });

  it('a changed sync key is refused and cannot be accepted', async () => {
    const s = await startTestServer({ schemaSql: `CREATE SCHEMA app; CREATE TABLE app.notes (id text NOT NULL, slug text NOT NULL, _sync_scope_id text NOT NULL,
      PRIMARY KEY (_sync_scope_id, id), UNIQUE (_sync_scope_id, slug));`, tables: parseTables('app.notes:id') });
    try {
      const error = await bootstrap(s.t.db, { tables: parseTables('app.notes:slug'), accept: ['change-key:app.notes'] }).catch((e: unknown) => e);
      expect((error as UnsafeSchemaChangeError).changes.map((c) => c.id)).toEqual(['change-key:app.notes']);
    } finally {
      await s.close();
    }
  });

  it('a deliberate contract step: an accepted dropped column and an unregistered table apply, older history still reads', async () => {
    const s = await startTestServer();
    try {
      const c = s.client('contract', 'contract-dev');
      await initEmpty(c);
      const listId = uuid();
      await pushOk(c, [list(listId, 'l'), item(uuid(), listId, 'with attachment', 0, { attachment: 'AAEC' })], { sourceBundleId: 1 });
      await pushOk(c, [{ schema: 'app', table: 'kinds', key: { code: 'k' }, op: 'INSERT', base_row_version: 0, payload: { code: 'k', label: 'x' } }], { sourceBundleId: 2 });
      const result = await bootstrap(s.t.db, {
        tables: parseTables('app.lists:id,app.items:id'),
        applySql: 'ALTER TABLE app.items DROP COLUMN attachment',
        accept: ['drop-column:app.items.attachment', 'drop-table:app.kinds'],
      });
      expect(result.applied.map((x) => x.id).sort()).toEqual(['drop-column:app.items.attachment', 'drop-table:app.kinds']);
      expect(result.schemaVersion).toBe(2);
      s.runtime.invalidateCatalog();
      const caps = await c.get('/sync/capabilities');
      expect(caps.body.registered_tables).toEqual(['app.lists', 'app.items']);
      // The unregistered table is an ordinary table again.
      await s.t.exec(`INSERT INTO app.kinds (code, _sync_scope_id) VALUES ('direct', 'contract')`);
      // History written before still pulls (clients skip what they do not manage); new pushes cannot use it.
      const pulled = await c.get('/sync/pull?after_bundle_seq=0');
      expectStatus(pulled, 200);
      expect(pulled.body.bundles.map((b: any) => b.bundle_seq)).toEqual([1, 2]);
      expectStatus(await push(c, [{ schema: 'app', table: 'kinds', key: { code: 'k2' }, op: 'INSERT', base_row_version: 0, payload: { code: 'k2' } }], { sourceBundleId: 3 }), 400, 'invalid_request');
      expectStatus(await c.get('/syncx/health'), 200);
    } finally {
      await s.close();
    }
  });
});

describe('drift met at request time', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  it('a registered column dropped behind bootstrap: a typed 503 (never a 500), health names it; restored, it serves again', async () => {
    const c = s.client('drift', 'drift-dev');
    await initEmpty(c);
    const listId = uuid();
    await pushOk(c, [list(listId, 'l')], { sourceBundleId: 1 });
    await s.t.exec('ALTER TABLE app.items DROP COLUMN attachment');
    // This container's catalog is still the old one: the commit meets the missing column.
    const answer = await push(c, [item(uuid(), listId, 'x')], { sourceBundleId: 2 });
    expectStatus(answer, 503, 'service_unavailable');
    expect(answer.body.reason).toBe('layout_drift');
    const snap = await c.post('/sync/snapshot-sessions', {});
    expectStatus(snap, 503, 'service_unavailable');
    expect(snap.body.detail).toMatch(/app\.items\.attachment no longer exists/);
    const health = await c.get('/syncx/health');
    expectStatus(health, 503);
    expect(health.body).toMatchObject({ status: 'unhealthy', reason: 'layout_drift' });
    expect(health.body.detail).toMatch(/app\.items\.attachment/);
    await s.t.exec('ALTER TABLE app.items ADD COLUMN attachment bytea');
    s.runtime.invalidateCatalog();
    await pushOk(c, [item(uuid(), listId, 'x')], { sourceBundleId: 2 });
    expectStatus(await c.get('/syncx/health'), 200);
  });

  it('a capture trigger dropped: writes would go uncaptured, so every route answers 503 until it is back', async () => {
    const c = s.client('drift2', 'drift2-dev');
    await s.t.exec('ALTER TABLE app.lists DISABLE TRIGGER _lockstep_capture_update');
    s.runtime.invalidateCatalog();
    const answer = await c.post('/sync/connect', { has_local_pending_rows: false });
    expectStatus(answer, 503, 'service_unavailable');
    expect(answer.body.detail).toMatch(/_lockstep_capture_update on app\.lists is disabled/);
    await s.t.exec('ALTER TABLE app.lists ENABLE TRIGGER _lockstep_capture_update');
    s.runtime.invalidateCatalog();
    expectStatus(await c.post('/sync/connect', { has_local_pending_rows: false }), 200);
  });
});
