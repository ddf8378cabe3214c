/**
 * Issue 16, the defects found by using the web client from outside, each through the public API:
 * array and domain columns round-trip (1), an upper-case uuid key is refused at the write instead
 * of duplicating the row (2), `rowsSkippedPending` counts what was skipped (3), `watch()` after
 * `close()` and an aborted `watch()` have their own codes (4), a table removed from the config
 * stops capturing (5), a first dirty row over the freeze byte budget still pushes (6), `openClient`
 * refuses local tables that can never push (8), and a cached database opens offline at once (9).
 * Since: a first open asks for capabilities before its state tables are installed, naming the
 * source id it then stores, and a cached answer this client cannot read counts as none (10).
 * Defect 7 (the worker's `rebuild(options)`) is proven in chromium (test/worker-client.web.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClient } from '../client-web/client.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { defaultRetryPolicy } from '../client-web/transport.js';
import { parseTables } from '../core/config.js';
import { sql } from '../core/db/sql.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { blobOfUuid, LOCAL_APP_SQL, LOCAL_APP_TABLES, openDevice, write, type Device, type DeviceOptions } from './support/client-harness.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { signToken, startTestServer, type TestServer } from './support/server.js';

const uuid = () => randomUUID();

/** The app schema plus a table of array and domain columns. */
const ARRAY_SCHEMA_SQL = `${APP_SCHEMA_SQL}
CREATE DOMAIN app.positive AS integer CHECK (VALUE > 0);
CREATE DOMAIN app.tag_list AS text[];
CREATE DOMAIN app.doc AS jsonb;
CREATE DOMAIN app.email AS text CHECK (VALUE LIKE '%@%');
CREATE TABLE app.arrays (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  tags text[],
  scores integer[],
  grid integer[][],
  note text,
  pos app.positive,
  labels app.tag_list,
  doc app.doc,
  mail app.email,
  PRIMARY KEY (_sync_scope_id, id)
);`;
const ARRAY_TABLES = parseTables('app.lists:id,app.items:id,app.kinds:code,app.arrays:id');
const LOCAL_ARRAY_SQL = `${LOCAL_APP_SQL}
CREATE TABLE IF NOT EXISTS arrays (id TEXT PRIMARY KEY, tags TEXT, scores TEXT, grid TEXT, note TEXT, pos INTEGER, labels TEXT, doc TEXT, mail TEXT);`;
const LOCAL_ARRAY_TABLES = [...LOCAL_APP_TABLES, { schema: 'app', table: 'arrays' }];

describe('web client defects (issue 16)', () => {
  let s: TestServer;
  let dir: string;
  const devices: Device[] = [];
  const device = async (user: string, options: DeviceOptions = {}) => {
    const d = await openDevice(s, user, { schemaSql: LOCAL_ARRAY_SQL, tables: LOCAL_ARRAY_TABLES, ...options });
    devices.push(d);
    return d;
  };
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: ARRAY_SCHEMA_SQL, tables: ARRAY_TABLES });
    dir = mkdtempSync(join(tmpdir(), 'lockstep-defects-'));
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('1: array and domain columns round-trip, also when only another column was edited', async () => {
    const user = 'd1-arrays';
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: 10_000 }, (tx, scope) =>
      tx.query(sql`INSERT INTO app.arrays (id, _sync_scope_id, tags, scores, grid, note, pos, labels, doc, mail)
        VALUES ('r1', ${scope}, ARRAY['a', 'b c', NULL, '{"x"}'], ARRAY[1, 2, NULL], ARRAY[[1, 2], [3, 4]], 'first', 5,
                ARRAY['x', 'y'], '{"k": [1, 2], "s": "t"}', 'me@example.com')`));
    const a = await device(user);
    expect(await a.client.attach(user)).toMatchObject({ status: 'attached', hydratedRows: 1 });
    const [hydrated] = await a.db.query('SELECT * FROM arrays');
    expect(JSON.parse(hydrated?.['tags'] as string)).toEqual(['a', 'b c', null, '{"x"}']);
    expect(JSON.parse(hydrated?.['scores'] as string)).toEqual([1, 2, null]);
    expect(JSON.parse(hydrated?.['grid'] as string)).toEqual([[1, 2], [3, 4]]);
    expect(JSON.parse(hydrated?.['labels'] as string)).toEqual(['x', 'y']);
    expect(JSON.parse(hydrated?.['doc'] as string)).toEqual({ k: [1, 2], s: 't' });
    expect(hydrated).toMatchObject({ pos: 5, mail: 'me@example.com' });

    // Only the note changes: the arrays go back as they came, and the push commits.
    await a.db.run("UPDATE arrays SET note = 'edited' WHERE id = 'r1'");
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
    // A new row written locally: arrays as JSON text; a value of a type unknown by name (the doc
    // domain) as its plain text when it is a scalar.
    await a.db.run(`INSERT INTO arrays (id, tags, scores, labels, doc, pos) VALUES ('r2', '["p", "q"]', '[7]', '[]', 'just a string', 9)`);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
    const server = await s.t.exec(
      `SELECT id, tags, scores, grid::text AS grid, note, pos, labels, doc, jsonb_typeof(doc) AS doc_type, mail
         FROM app.arrays WHERE _sync_scope_id = $1 ORDER BY id`, [user]);
    expect(server.rows).toEqual([
      { id: 'r1', tags: ['a', 'b c', null, '{"x"}'], scores: [1, 2, null], grid: '{{1,2},{3,4}}', note: 'edited', pos: 5, labels: ['x', 'y'], doc: { k: [1, 2], s: 't' }, doc_type: 'object', mail: 'me@example.com' },
      { id: 'r2', tags: ['p', 'q'], scores: [7], grid: null, note: null, pos: 9, labels: [], doc: 'just a string', doc_type: 'string', mail: null },
    ]);
    // A second device hydrates the same values.
    const b = await device(user);
    await b.client.attach(user);
    expect(await b.db.query('SELECT * FROM arrays ORDER BY id')).toEqual(await a.db.query('SELECT * FROM arrays ORDER BY id'));
  });

  // Issue 23 item 4: refused at the write now (the capture trigger checks the local form), so it
  // never reaches a freeze and the device's other rows keep syncing.
  it('1: a local array value that is not a JSON array is refused at the write with invalid_local_row', async () => {
    const user = 'd1-bad-array';
    const a = await device(user);
    await a.client.attach(user);
    for (const literal of ['a,b', '{a,"b c"}']) {
      await expect(a.client.db.run('INSERT INTO arrays (id, tags) VALUES (?, ?)', ['bad', literal])).rejects.toMatchObject({
        code: 'invalid_local_row', details: { table: 'arrays', key: 'bad', column: 'tags', reason: expect.stringMatching(/JSON text of an array/) },
      });
    }
    expect((await a.client.pendingStatus()).dirtyRows).toBe(0);
    await a.client.db.run(`INSERT INTO arrays (id, tags) VALUES ('bad', '["a", "b"]')`);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
  });

  it('1: NaN and infinities round-trip (protocol §4.2): REAL infinities, NaN kept as text, numeric NaN', async () => {
    const user = 'd1-special-numbers';
    const a = await device(user);
    const b = await device(user);
    await a.client.attach(user);
    await b.client.attach(user);
    await a.db.run("INSERT INTO kinds (code, ratio, amount) VALUES ('inf', ?, 'NaN'), ('-inf', ?, NULL), ('nan', 'NaN', NULL)", [Infinity, -Infinity]);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 3 });
    const server = await s.t.exec('SELECT code, ratio::text AS ratio, amount::text AS amount FROM app.kinds WHERE _sync_scope_id = $1 ORDER BY code', [user]);
    expect(server.rows).toEqual([{ code: '-inf', ratio: '-Infinity', amount: null }, { code: 'inf', ratio: 'Infinity', amount: 'NaN' }, { code: 'nan', ratio: 'NaN', amount: null }]);
    await b.client.sync();
    expect(await b.db.query('SELECT code, ratio, typeof(ratio) AS t, amount FROM kinds ORDER BY code')).toEqual([
      { code: '-inf', ratio: -Infinity, t: 'real', amount: null },
      { code: 'inf', ratio: Infinity, t: 'real', amount: 'NaN' },
      { code: 'nan', ratio: 'NaN', t: 'text', amount: null },
    ]);
  });

  it('2: an upper-case uuid in a TEXT key is refused at the write (invalid_local_row), never duplicated', async () => {
    const user = 'd2-upper';
    const a = await device(user);
    await a.client.attach(user);
    const listId = uuid();
    await write.list(a.db, listId, 'list');
    const upper = uuid().toUpperCase();
    await expect(a.client.db.run('INSERT INTO items (id, list_id, body) VALUES (?, ?, ?)', [upper, blobOfUuid(listId), 'upper']))
      .rejects.toMatchObject({ code: 'invalid_local_row' });
    // A uuid key stored as a BLOB must be 16 bytes.
    await expect(a.client.db.run('INSERT INTO lists (id, title) VALUES (?, ?)', [listId.toUpperCase(), 'text in a blob key']))
      .rejects.toMatchObject({ code: 'invalid_local_row' });
    await a.client.sync();
    expect(await a.db.query('SELECT count(*) AS n FROM items')).toEqual([{ n: 0 }]);
    expect(await a.db.query('SELECT count(*) AS n FROM lists')).toEqual([{ n: 1 }]);
    expect((await a.client.pendingStatus()).dirtyRows).toBe(0);
  });

  it('3: rowsSkippedPending counts only rows kept out by pending changes', async () => {
    const user = 'd3-skipped';
    const a = await device(user);
    const b = await device(user);
    await a.client.attach(user);
    await b.client.attach(user);
    await write.list(b.db, uuid(), 'from B');
    await b.client.sync();
    // A pushes before it has pulled B's bundle: its own bundle is replayed, the checkpoint stays.
    await write.list(a.db, uuid(), 'from A');
    expect((await a.client.pushPending()).status).toBe('committed');
    const pulled = await a.client.pullToStable();
    expect(pulled).toMatchObject({ bundlesApplied: 2, rowsApplied: 1, rowsSkippedPending: 0, checkpoint: 2 });
  });

  it('4: watch() after close() is client_closed; an aborted watch() is aborted, not network_error', async () => {
    const a = await device('d4-watch', { config: { watch: 'long-poll' } });
    await a.client.attach('d4-watch');
    const controller = new AbortController();
    const waiting = a.client.watch(controller.signal);
    await new Promise((r) => setTimeout(r, 200));
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: 'aborted' });
    await a.client.close();
    await expect(a.client.watch()).rejects.toMatchObject({ code: 'client_closed' });
    await expect(a.client.pendingStatus()).rejects.toMatchObject({ code: 'client_closed' });
  });

  it('5: a table removed from the config stops capturing; detach is not blocked by it', async () => {
    const user = 'd5-removed';
    const path = join(dir, 'removed.db');
    const a = await device(user, { path });
    await a.client.attach(user);
    await a.db.run("INSERT INTO kinds (code, label) VALUES ('before', 'synced')");
    await a.client.sync();
    await a.close();
    const tables = LOCAL_ARRAY_TABLES.filter((t) => t.table !== 'kinds');
    const b = await device(user, { path, tables });
    await b.db.run("INSERT INTO kinds (code, label) VALUES ('after', 'local only')");
    expect((await b.client.pendingStatus()).dirtyRows).toBe(0);
    expect(await b.db.query("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '_sync_trg_kinds%'")).toEqual([]);
    expect(await b.client.detach()).toEqual({ status: 'detached' });
  });

  it('9: a cached database opens offline at once, without retrying capabilities', async () => {
    const user = 'd9-offline';
    const path = join(dir, 'offline.db');
    const a = await device(user, { path });
    await a.client.attach(user);
    await a.close();
    // "At once" is counted, not timed: one request (refused: nothing listens on port 9), no retry,
    // no backoff sleep, whatever the machine's load.
    const requests: string[] = [];
    const counting: typeof fetch = (input, init) => {
      requests.push(String(input instanceof Request ? input.url : input));
      return fetch(input, init);
    };
    const offline = await device(user, { path, url: 'http://127.0.0.1:9', config: { retry: defaultRetryPolicy, fetch: counting } });
    expect(requests).toEqual(['http://127.0.0.1:9/sync/capabilities']);
    expect((await offline.client.pendingStatus()).attachedUserId).toBe(user);
  });

  it('10: the capabilities request goes out before the state is installed, naming the source id then stored; an unreadable cached answer counts as none', async () => {
    const user = 'd10-early';
    const path = join(dir, 'early.db');
    const token = await signToken(user);
    // The order of the request and the database's commits, not times: the request overlaps the
    // install's transaction, which on OPFS takes as long as a round trip.
    const events: string[] = [];
    const sources: string[] = [];
    const recording: typeof fetch = (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url.endsWith('/sync/capabilities')) {
        events.push('capabilities');
        sources.push(new Headers(init?.headers).get('sync-source-id') ?? '');
      }
      return fetch(input, init);
    };
    const open = async () => {
      const db = await openNodeSqlite({ path, durable: false });
      await db.exec(LOCAL_ARRAY_SQL);
      const unsubscribe = db.onCommit(() => void events.push('commit'));
      const client = await openClient({ baseUrl: s.url, getToken: () => token, db, tables: LOCAL_ARRAY_TABLES, fetch: recording });
      unsubscribe();
      return { db, client };
    };
    const first = await open();
    expect(events.slice(0, 2)).toEqual(['capabilities', 'commit']);
    const [stored] = await first.db.query<{ source_id: string }>('SELECT source_id FROM _sync_source_state WHERE id = 1');
    expect(sources).toEqual([stored?.source_id]);
    expect(await first.client.attach(user)).toMatchObject({ status: 'attached' });
    // A cached answer this release cannot read (an earlier one's, a damaged row) counts as none:
    // the open asks the server as a first one does, instead of failing on it for good.
    await first.db.run("UPDATE _sync_capabilities SET body = '{\"protocol_version\":\"old\"}' WHERE id = 1");
    await first.client.close();
    events.length = 0;
    const again = await open();
    expect(events[0]).toBe('capabilities');
    expect(sources).toEqual([stored?.source_id, stored?.source_id]);
    expect((await again.client.pendingStatus()).attachedUserId).toBe(user);
    await again.client.close();
  });
});

describe('web client defects: byte budgets (issue 16)', () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({ env: { SYNC_LIMIT_MAX_BYTES_PER_BUNDLE: '100000' } });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('6: a first dirty row larger than the freeze budget is still pushed', async () => {
    const a = await openDevice(s, 'd6-big');
    devices.push(a);
    await a.client.attach('d6-big');
    // Over the client's freeze budget (90% of max_bytes_per_bundle) yet within the server's limit.
    await a.db.run('INSERT INTO kinds (code, label) VALUES (?, ?)', ['big', 'x'.repeat(93_000)]);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
    expect((await a.client.pendingStatus()).dirtyRows).toBe(0);
  });
});

describe('web client defects: local tables that can never push (issue 16)', () => {
  let s: TestServer;
  beforeAll(async () => {
    // The server publishes which columns have defaults and where foreign keys point (layout 12).
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('8: openClient refuses a missing NOT NULL column without default and an unmanaged foreign-key target', async () => {
    const db = await openNodeSqlite();
    // items without body (NOT NULL on the server, no default), and without its parent table lists.
    await db.exec('CREATE TABLE items (id TEXT PRIMARY KEY, list_id BLOB NOT NULL, done INTEGER, attachment BLOB)');
    const error = await openClient({ baseUrl: s.url, getToken: () => signToken('d8'), db, tables: [{ schema: 'app', table: 'items' }] })
      .then(() => null, (e: unknown) => e);
    expect(error).toMatchObject({ code: 'local_schema_mismatch' });
    const problems = (error as { details: { problems: string[] } }).details.problems.join('\n');
    expect(problems).toMatch(/items\.body: .*NOT NULL.*no default/);
    expect(problems).toMatch(/items: .*app\.lists.*not managed/);
    // done (NOT NULL with a default) may be left out; the full local schema opens.
    await db.exec('DROP TABLE items');
    await db.exec(LOCAL_APP_SQL);
    await db.exec('ALTER TABLE items DROP COLUMN done');
    const client = await openClient({ baseUrl: s.url, getToken: () => signToken('d8'), db, tables: LOCAL_APP_TABLES });
    await client.close();
  });
});
