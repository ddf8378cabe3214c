/**
 * Issue 6 (web client), the hard paths: conflicts by table policy, edits made during a push,
 * a lost commit answer (rule 2), pruned history (rule 3), a replay below the retained floor
 * (rule 4), source recovery by rotation (rule 5), a rejected bundle, bundles too big for one pull
 * response, a racing first initialization (rule 8), and chunked uploads.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TableConfig } from '../client-web/api.js';
import { sql } from '../core/db/sql.js';
import { runMaintenance } from '../core/sync/maintenance/maintenance.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { type HttpApiEvent } from '../functions/index.js';
import { blobOfUuid, expectConverged, LOCAL_APP_TABLES, localState, openDevice, serverState, write, type Device, type DeviceOptions } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';
import { settlesWithin } from './support/until.js';

const uuid = () => randomUUID();

/** Per-test hooks into the gateway: observe or replace what a request gets. */
type Hook = (event: HttpApiEvent, next: () => Promise<unknown>) => Promise<unknown>;

function hookedServer(env: Record<string, string> = {}) {
  const hooks: Hook[] = [];
  const requests: string[] = [];
  /** Each request's query string, beside `requests`. */
  const queries: string[] = [];
  const start = () =>
    startTestServer({
      env,
      intercept: async (event, next) => {
        requests.push(`${event.requestContext.http.method} ${event.rawPath}`);
        queries.push(event.rawQueryString);
        const hook = hooks.shift();
        return hook ? hook(event, next) : next();
      },
    });
  return { hooks, requests, queries, start };
}

/**
 * Hooks that let the first snapshot page through and answer every later page request 503 (retry
 * at once), so a download is cut after its first page. One hook serves one request of any route,
 * so there are more than a cut-off download makes: every page asked for ahead retries too (six
 * attempts each, up to three pages out), and a page that got through after the hooks ran out
 * would move the cut. The test clears what is left. The first page is told by its ordinal, not by
 * arriving first: the pages asked for ahead leave together, and one of them may arrive before it.
 */
function failSnapshotPagesAfterFirst(count = 100): Hook[] {
  let firstServed = false;
  const failLater: Hook = async (event, next) => {
    if (!event.rawPath.startsWith('/sync/snapshot-sessions/')) return next();
    const after = new URLSearchParams(event.rawQueryString).get('after_row_ordinal') ?? '0';
    if (after === '0' && !firstServed) {
      firstServed = true;
      return next();
    }
    return { statusCode: 503, headers: { 'content-type': 'application/json', 'retry-after': '0' }, body: JSON.stringify({ error: 'service_unavailable', message: 'injected' }) };
  };
  return Array.from({ length: count }, () => failLater);
}

const withResolver = (table: string, resolver: NonNullable<TableConfig['resolver']>): TableConfig[] =>
  LOCAL_APP_TABLES.map((t) => (t.table === table ? { ...t, resolver } : t));

describe('web client: recovery paths', () => {
  const h = hookedServer();
  let s: TestServer;
  let dir: string;
  const devices: Device[] = [];
  const device = async (user: string, options: DeviceOptions = {}) => {
    const d = await openDevice(s, user, options);
    devices.push(d);
    return d;
  };
  /** Two attached devices of a fresh user with one shared list and item. */
  const pair = async (user: string, options: DeviceOptions = {}) => {
    const a = await device(user, options);
    const b = await device(user, options);
    await a.client.attach(user);
    await b.client.attach(user);
    const listId = uuid();
    const itemId = uuid();
    await write.list(a.db, listId, 'shared');
    await write.item(a.db, itemId, listId, 'original');
    await a.client.sync();
    await b.client.sync();
    return { a, b, listId, itemId };
  };
  beforeAll(async () => {
    s = await h.start();
    dir = mkdtempSync(join(tmpdir(), 'lockstep-recovery-'));
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('conflict, default policy: the server wins and the local change is dropped', async () => {
    const { a, b, listId, itemId } = await pair('u-conf-server');
    await write.item(a.db, itemId, listId, 'from A');
    await a.client.sync();
    await write.item(b.db, itemId, listId, 'from B');
    const result = await b.client.sync();
    expect(result.push).toEqual({ status: 'resolved_without_commit', conflictsResolved: 1 });
    const state = await expectConverged(s, 'u-conf-server', a, b);
    expect(state.items[itemId]?.body).toBe('from A');
    expect((await b.client.pendingStatus()).dirtyRows).toBe(0);
  });

  it('conflict, keep local: the local change is pushed on top of the server version (also over a delete)', async () => {
    const tables = withResolver('items', () => ({ keep: 'local' }));
    const { a, b, listId, itemId } = await pair('u-conf-local', { tables });
    await write.item(a.db, itemId, listId, 'from A');
    await a.client.sync();
    await write.item(b.db, itemId, listId, 'from B', { done: true });
    expect((await b.client.sync()).push).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    await a.client.sync();
    expect((await expectConverged(s, 'u-conf-local', a, b)).items[itemId]).toMatchObject({ body: 'from B', done: true });

    // A deletes the item; B, not knowing, edits it and keeps its edit: the row comes back.
    await write.deleteItem(a.db, itemId);
    await a.client.sync();
    await write.item(b.db, itemId, listId, 'resurrected');
    expect((await b.client.sync()).push).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    await a.client.sync();
    expect((await expectConverged(s, 'u-conf-local', a, b)).items[itemId]?.body).toBe('resurrected');
  });

  it('conflict, merged: the resolver sees both sides and its payload is what lands everywhere', async () => {
    const seen: unknown[] = [];
    const tables = withResolver('items', (c) => {
      seen.push(c);
      return { keep: 'merged', payload: { ...c.serverPayload, body: `${String(c.serverPayload?.['body'])} + ${String(c.localPayload?.['body'])}` } };
    });
    const { a, b, listId, itemId } = await pair('u-conf-merged', { tables });
    await write.item(a.db, itemId, listId, 'A');
    await a.client.sync();
    await write.item(b.db, itemId, listId, 'B');
    expect((await b.client.sync()).push).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    await a.client.sync();
    expect((await expectConverged(s, 'u-conf-merged', a, b)).items[itemId]?.body).toBe('A + B');
    expect(seen).toEqual([expect.objectContaining({ schema: 'app', table: 'items', key: itemId, localOp: 'UPDATE', serverRowVersion: 2, serverRowDeleted: false })]);
  });

  it('edits made while a push is in flight are kept and pushed next time', async () => {
    const { a, b, listId, itemId } = await pair('u-inflight');
    const other = uuid();
    await write.item(a.db, itemId, listId, 'frozen edit');
    h.hooks.push(async (event, next) => {
      expect(event.rawPath).toMatch(/\/sync\/push-sessions$/);
      // Between freeze and commit: edit the frozen row again and add a new one.
      await write.item(a.db, itemId, listId, 'edit during push');
      await write.item(a.db, other, listId, 'new during push');
      return next();
    });
    const first = await a.client.pushPending();
    expect(first).toMatchObject({ status: 'committed', rowCount: 1 });
    expect((await a.client.pendingStatus()).dirtyRows).toBe(2);
    expect((await localState(a.db)).items[itemId]?.body).toBe('edit during push');
    expect((await serverState(s, 'u-inflight')).items[itemId]?.body).toBe('frozen edit');
    await a.client.sync();
    await b.client.sync();
    const state = await expectConverged(s, 'u-inflight', a, b);
    expect(state.items[itemId]?.body).toBe('edit during push');
    expect(state.items[other]?.body).toBe('new during push');
  });

  it('a lost commit answer (commit_outcome_unknown) converges without uploading the rows again', async () => {
    const { a, b, listId } = await pair('u-unknown', { config: { pushChunkRows: 50 } });
    for (let i = 0; i < 120; i++) await write.item(a.db, uuid(), listId, `row ${i}`);
    // The bundle commits; its answer is replaced by a 503 commit_outcome_unknown.
    const lose: Hook = async (event, next) => {
      if (!event.rawPath.endsWith('/commit')) return next();
      await next();
      return { statusCode: 503, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: 'commit_outcome_unknown', message: 'lost' }) };
    };
    const passThrough: Hook = (_e, next) => next();
    h.hooks.push(passThrough, passThrough, passThrough, passThrough, lose);
    const from = h.requests.length;
    const result = await a.client.pushPending();
    expect(result).toMatchObject({ status: 'committed', rowCount: 120, alreadyCommitted: true });
    const seen = h.requests.slice(from);
    expect(seen.filter((r) => r.endsWith('/chunks'))).toHaveLength(3);
    expect(seen.filter((r) => r.endsWith('/push-sessions'))).toHaveLength(2);
    const bundles = await s.t.exec(`SELECT count(*)::int AS n FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'u-unknown' AND b.source_bundle_id = 2`);
    expect(bundles.rows[0].n).toBe(1);
    expect(await a.client.pendingStatus()).toMatchObject({ dirtyRows: 0, frozenRows: 0, nextSourceBundleId: 3, checkpoint: 2 });
    await b.client.sync();
    await expectConverged(s, 'u-unknown', a, b);
  });

  it('a racing first initialization: the second device is told to retry later, then rebuilds and pushes on top', async () => {
    const a = await device('u-race');
    const b = await device('u-race');
    const [la, lb] = [uuid(), uuid()];
    await write.list(a.db, la, 'from A');
    await write.list(b.db, lb, 'from B');
    // A takes the initialization lease, but its push has not happened yet (the answer is held).
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    h.hooks.push(async (_event, next) => {
      const answer = await next();
      await held;
      return answer;
    });
    const attachA = a.client.attach('u-race');
    await expect.poll(() => s.t.exec(`SELECT count(*)::int AS n FROM sync.scope_state s JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'u-race'`).then((r) => r.rows[0].n)).toBe(1);
    const early = await b.client.attach('u-race');
    expect(early.status).toBe('retry_later');
    expect(early.status === 'retry_later' && early.retryAfterMs).toBeGreaterThan(0);
    release();
    expect(await attachA).toMatchObject({ status: 'attached', resolution: 'initialize_local' });
    expect(await b.client.attach('u-race')).toMatchObject({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 1 });
    await a.client.sync();
    const state = await expectConverged(s, 'u-race', a, b);
    expect(Object.keys(state.lists).sort()).toEqual([la, lb].sort());
  });

  it('a rejected bundle stays frozen and blocks pulls until discarded; the next sync restores the server rows', async () => {
    const a = await device('u-reject');
    const b = await device('u-reject');
    await a.client.attach('u-reject');
    await b.client.attach('u-reject');
    await a.db.run("INSERT INTO kinds (code, label) VALUES ('k1', 'taken')");
    await a.client.sync();
    await b.client.sync();
    await b.db.run("INSERT INTO kinds (code, label) VALUES ('k2', 'taken')");
    const rejected = await b.client.sync();
    expect(rejected.pull).toBeNull();
    expect(rejected.push).toMatchObject({ status: 'rejected', code: 'push_rejected', violation: expect.objectContaining({ constraint: 'kinds_label_key' }) });
    expect((await b.client.pendingStatus()).rejected).toMatchObject({ code: 'push_rejected' });
    // Still rejected on the next sync, without a new attempt; pulls fail closed meanwhile.
    expect((await b.client.sync()).push.status).toBe('rejected');
    await expect(b.client.pullToStable()).rejects.toMatchObject({ code: 'outbox_pending' });
    await expect(b.client.rebuild()).rejects.toMatchObject({ code: 'outbox_pending' });
    expect(await b.client.discardRejected()).toEqual({ discardedRows: 1 });
    expect((await b.client.pendingStatus()).rebuildRequired).toBe(true);
    const healed = await b.client.sync();
    expect(healed.push.status).toBe('nothing_to_push');
    expect(await b.db.query('SELECT code FROM kinds ORDER BY code')).toEqual([{ code: 'k1' }]);
    expect((await b.client.pendingStatus()).rebuildRequired).toBe(false);
  });

  it('a cloned database: the copy that loses the source sequence recovers by rotating, and every pending write lands once', async () => {
    const path = join(dir, 'original.db');
    const a = await device('u-clone', { path });
    await a.client.attach('u-clone');
    const listId = uuid();
    await write.list(a.db, listId, 'before clone');
    await a.client.sync();
    await a.close();
    const copy = join(dir, 'copy.db');
    copyFileSync(path, copy);
    await a.reopen();
    const c = await device('u-clone', { path: copy });
    expect((await a.client.pendingStatus()).sourceId).toBe((await c.client.pendingStatus()).sourceId);

    const [fromA, fromC] = [uuid(), uuid()];
    await write.item(a.db, fromA, listId, 'written on the original');
    await write.item(c.db, fromC, listId, 'written on the copy');
    expect((await a.client.sync()).push.status).toBe('committed');
    // Same source, same source bundle id, other rows: the server refuses the copy's bundle.
    const refused = await c.client.sync().then(() => null, (e: unknown) => e);
    expect(refused).toMatchObject({ code: 'source_recovery_required', details: { serverCode: 'push_request_mismatch' } });
    expect((await c.client.pendingStatus()).sourceRecovery).toBe('source_sequence_changed');
    const rotated = await c.client.rebuild();
    expect(rotated.rotatedTo).toMatch(/^src-/);
    expect((await c.client.pendingStatus()).sourceId).toBe(rotated.rotatedTo);
    expect((await c.client.sync()).push).toMatchObject({ status: 'committed', sourceBundleId: 1, rowCount: 1 });

    // The original's source was retired by the rotation: its next push is refused, it rotates too.
    await write.item(a.db, uuid(), listId, 'after retirement');
    await expect(a.client.sync()).rejects.toMatchObject({ code: 'source_recovery_required', details: { serverCode: 'source_retired' } });
    await a.client.rebuild();
    expect((await a.client.sync()).push.status).toBe('committed');
    await c.client.sync();
    const state = await expectConverged(s, 'u-clone', a, c);
    expect(Object.values(state.items).map((i) => i.body).sort()).toEqual(['after retirement', 'written on the copy', 'written on the original']);
    const dupes = await s.t.exec(`SELECT source_id, source_bundle_id, count(*)::int AS n FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'u-clone' GROUP BY 1, 2 HAVING count(*) > 1`);
    expect(dupes.rows).toEqual([]);
  });

  it('a bulk apply (pull and replay of 300 rows) drops the capture triggers for its statement only: they are back as they were, and the next local write is captured', async () => {
    const user = 'u-bulk-apply';
    const a = await device(user);
    const b = await device(user);
    await a.client.attach(user);
    await b.client.attach(user);
    const triggers = (d: Device) => d.db.query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name");
    const installedA = await triggers(a);
    const installedB = await triggers(b);
    expect(installedB.map((t) => t['name'])).toEqual(expect.arrayContaining(['_sync_trg_lists_ins', '_sync_trg_lists_upd', '_sync_trg_lists_base_upd']));
    const ids = Array.from({ length: 300 }, () => uuid());
    for (const [i, id] of ids.entries()) await write.list(a.db, id, `list ${i}`);
    // A's replay of its own 300 rows and B's pull of them are bulk applies.
    await a.client.sync();
    await b.client.sync();
    expect(await triggers(a)).toEqual(installedA);
    expect(await triggers(b)).toEqual(installedB);
    await write.list(b.db, ids[0] as string, 'changed on B');
    await write.list(a.db, ids[1] as string, 'changed on A');
    expect((await b.client.pendingStatus()).dirtyRows).toBe(1);
    expect((await a.client.pendingStatus()).dirtyRows).toBe(1);
    await b.client.sync();
    await a.client.sync();
    await b.client.sync();
    const state = await expectConverged(s, user, a, b);
    expect(state.lists[ids[0] as string]?.title).toBe('changed on B');
    expect(state.lists[ids[1] as string]?.title).toBe('changed on A');
  });

  it("a hydration's row versions keep 300 text keys exactly (quotes, escapes, digits, emoji), as text, with the server's versions, and a later edit pushes on them", async () => {
    const user = 'u-meta-json';
    const tricky = ['12', '007', 'true', 'null', '1e3', 'quote"d', 'back\\slash', 'tab\tend', 'line\nbreak', 'emoji 😀', 'ünïcödé', ' lead', '[1]', '{"a":1}', '\u00e9 escaped?'];
    const codes = [...tricky, ...Array.from({ length: 300 - tricky.length }, (_, i) => `k-${String(i).padStart(3, '0')}`)];
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: 100 }, (tx, scope) =>
      tx.query(sql`INSERT INTO app.kinds (code, _sync_scope_id, big) SELECT c, ${scope}, 1 FROM unnest(${codes}::text[]) c`));
    // A second version for every third row, so the versions differ by row.
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: 100 }, (tx, scope) =>
      tx.query(sql`UPDATE app.kinds SET big = 2 WHERE _sync_scope_id = ${scope} AND code = ANY (${codes.filter((_, i) => i % 3 === 0)}::text[])`));
    const d = await device(user);
    expect(await d.client.attach(user)).toMatchObject({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 300 });
    const server = await s.t.exec(
      `SELECT convert_from(rs.key_bytes, 'UTF8') AS k, rs.row_version AS v FROM sync.row_state rs JOIN sync.table_catalog tc USING (table_id)
        WHERE rs.user_id = $1 AND tc.table_name = 'kinds' ORDER BY 1`, [user]);
    const local = await d.db.query("SELECT key AS k, typeof(key) AS t, row_version AS v, typeof(row_version) AS tv FROM _sync_row_meta WHERE tbl = 'kinds'");
    expect(local.map((r) => [r['k'], r['t'], r['tv']]).sort()).toEqual([...codes].sort().map((c) => [c, 'text', 'integer']));
    const versions = (rows: readonly Record<string, unknown>[]) => Object.fromEntries(rows.map((r) => [String(r['k']), Number(r['v'])]));
    expect(versions(local)).toEqual(versions(server.rows));
    expect(new Set(local.map((r) => r['v']))).toEqual(new Set([1, 2]));
    // An edit of a tricky key goes up on the version the device holds: no conflict.
    await d.db.run('UPDATE kinds SET big = 42 WHERE code = ?', ['quote"d']);
    const pushed = await d.client.sync();
    expect(pushed.push).toMatchObject({ status: 'committed', conflictsResolved: 0 });
    const after = await s.t.exec(`SELECT big FROM app.kinds WHERE _sync_scope_id = $1 AND code = 'quote"d'`, [user]);
    expect(after.rows).toEqual([{ big: '42' }]);
  });

  it('uploads a large bundle in chunks sized by rows and request bytes', async () => {
    const a = await device('u-chunks', { config: { pushChunkRows: 400 } });
    await a.client.attach('u-chunks');
    const listId = uuid();
    await write.list(a.db, listId, 'big');
    const big = new Uint8Array(1024 * 1024).fill(7);
    for (let i = 0; i < 1500; i++) await write.item(a.db, uuid(), listId, `row ${i}`, { attachment: i < 12 ? big : null });
    const from = h.requests.length;
    expect(await a.client.sync()).toMatchObject({ push: { status: 'committed', rowCount: 1501 } });
    const chunks = h.requests.slice(from).filter((r) => r.endsWith('/chunks')).length;
    // 1501 rows at ≤ 400 per chunk is 4 chunks; 12 rows of 1.4 MB base64 each, at most two per
    // chunk under the 4 MB request limit, need at least 6 (and the rows spread over the chunks).
    expect(chunks).toBeGreaterThanOrEqual(6);
    expect(Object.keys((await serverState(s, 'u-chunks')).items)).toHaveLength(1500);
  });

  it('a sync that pushed asks for its first pull page while its bundle is replayed, and applies it after', async () => {
    // The replay reads its bundle back (no prediction): the test holds that read.
    const { a, b, listId } = await pair('u-pull-ahead', { config: { predictReplay: false } });
    // Behind by one bundle of b's: the pull starts at a's checkpoint, not past a's own bundle.
    await write.item(b.db, uuid(), listId, 'from b');
    await b.client.sync();
    const checkpoint = (await a.client.pendingStatus()).checkpoint;
    await write.item(a.db, uuid(), listId, 'from a');
    let pullAsked = (): void => undefined;
    const pullSeen = new Promise<void>((resolve) => { pullAsked = resolve; });
    let pullBeforeReplay: boolean | undefined;
    // The replay's rows are held until the pull page was asked for, within a bound of a minute:
    // a client that asks only after applying the replay never sends it meanwhile.
    const hold: Hook = async (event, next) => {
      if (event.rawPath === '/sync/pull') pullAsked();
      if (event.rawPath.startsWith('/sync/committed-bundles/')) {
        pullBeforeReplay = await settlesWithin(pullSeen, 60_000);
      }
      return next();
    };
    h.hooks.push(...Array.from({ length: 20 }, () => hold));
    const from = h.requests.length;
    const result = await a.client.sync();
    h.hooks.length = 0;
    expect(result.push).toMatchObject({ status: 'committed', rowCount: 1 });
    expect(pullBeforeReplay).toBe(true);
    // The page asked for ahead was the one the pull needed: asked once, at a's checkpoint.
    const pulls = h.requests.slice(from).flatMap((r, i) => (r === 'GET /sync/pull' ? [new URLSearchParams(h.queries[from + i]).get('after_bundle_seq')] : []));
    expect(pulls).toEqual([String(checkpoint)]);
    // Not behind: once its bundle is replayed the device is at the ceiling its commit saw, and
    // asks for no page (a commit made meanwhile is the wake source's to announce).
    await write.item(a.db, uuid(), listId, 'again from a');
    const next = h.requests.length;
    const again = await a.client.sync();
    expect(again.push).toMatchObject({ status: 'committed', rowCount: 1 });
    const own = again.push.status === 'committed' ? again.push.bundleSeq : -1;
    expect(h.requests.slice(next).filter((r) => r === 'GET /sync/pull')).toEqual([]);
    expect(again.pull).toMatchObject({ checkpoint: own, bundlesApplied: 0 });
    await b.client.sync();
    await expectConverged(s, 'u-pull-ahead', a, b);
    // An attach that pushes what the device wrote offline does not pull after it: no page asked for.
    const c = await device('u-pull-ahead-attach');
    await write.list(c.db, uuid(), 'written before the attach');
    const before = h.requests.length;
    expect(await c.client.attach('u-pull-ahead-attach')).toMatchObject({ status: 'attached', resolution: 'initialize_local' });
    const asked = h.requests.slice(before);
    expect(asked.filter((r) => r.endsWith('/push-sessions'))).toHaveLength(1);
    expect(asked.filter((r) => r === 'GET /sync/pull')).toHaveLength(0);
  });

  it('an attach answers without waiting for its snapshot session delete, which the next run waits for first', async () => {
    await pair('u-trailing');
    const c = await device('u-trailing');
    let release = (): void => undefined;
    const released = new Promise<void>((resolve) => { release = resolve; });
    let heldUntilAttached: boolean | undefined;
    let deleteEndedAt = -1;
    // The delete is held until attach() answered, within a bound of a minute: an attach that
    // waits for its delete never answers meanwhile.
    const hold: Hook = async (event, next) => {
      if (event.requestContext.http.method !== 'DELETE' || !event.rawPath.startsWith('/sync/snapshot-sessions/')) return next();
      heldUntilAttached = await settlesWithin(released, 60_000);
      const answer = await next();
      deleteEndedAt = h.requests.length;
      return answer;
    };
    h.hooks.push(...Array.from({ length: 10 }, () => hold));
    const attached = await c.client.attach('u-trailing');
    release();
    expect(attached).toMatchObject({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 2 });
    const from = h.requests.length;
    await c.client.sync();
    h.hooks.length = 0;
    expect(heldUntilAttached).toBe(true);
    // The sync's first request left only once the delete had been answered (the delete itself
    // may reach the server after attach() answered).
    const firstOfSync = h.requests.findIndex((r, i) => i >= from && !r.startsWith('DELETE /sync/snapshot-sessions/'));
    expect(deleteEndedAt).toBeGreaterThanOrEqual(0);
    expect(firstOfSync).toBeGreaterThanOrEqual(deleteEndedAt);
    const open = await s.t.exec(`SELECT count(*)::int AS n FROM sync.snapshot_sessions WHERE user_id = 'u-trailing'`);
    expect(open.rows[0].n).toBe(0);
  });

  it('uploads in chunks of the most rows the server takes, and sends a bundle that fits one with its create', async () => {
    const a = await device('u-chunk-max');
    await a.client.attach('u-chunk-max');
    const listId = uuid();
    await write.list(a.db, listId, 'many');
    // Small rows, so only the server's max_rows_per_push_chunk (5,000) bounds a chunk.
    const items = (from: number, to: number) => a.db.run(
      `WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       INSERT INTO items (id, list_id, body, done) SELECT printf('00000000-0000-4000-8000-%012d', i), ?, 'row ' || i, 0 FROM n`,
      [from, to, blobOfUuid(listId)]);
    await items(1, 6000);
    let from = h.requests.length;
    expect(await a.client.sync()).toMatchObject({ push: { status: 'committed', rowCount: 6001 } });
    // 6,001 rows: 5,000 and 1,001 (in chunks of the server's default 1,000 it took seven).
    expect(h.requests.slice(from).filter((r) => r.endsWith('/chunks'))).toHaveLength(2);
    await items(6001, 9000);
    from = h.requests.length;
    expect(await a.client.sync()).toMatchObject({ push: { status: 'committed', rowCount: 3000 } });
    // 3,000 rows fit one chunk: the create carries them and commits them, no chunk request.
    const seen = h.requests.slice(from);
    expect(seen.filter((r) => r.endsWith('/chunks') || r.endsWith('/commit'))).toHaveLength(0);
    expect(seen.filter((r) => r.endsWith('/push-sessions'))).toHaveLength(1);
    expect(Object.keys((await serverState(s, 'u-chunk-max')).items)).toHaveLength(9000);
  });
});

describe('web client: pruned history and small responses', () => {
  const h = hookedServer({ SYNC_LIMIT_RETAINED_BUNDLES_PER_USER: '3', SYNC_LIMIT_MAX_RESPONSE_BYTES: '65536' });
  let s: TestServer;
  const devices: Device[] = [];
  const device = async (user: string, options: DeviceOptions = {}) => {
    const d = await openDevice(s, user, options);
    devices.push(d);
    return d;
  };
  const prune = () => runMaintenance(s.t.db, s.runtime.config.limits);
  const serverBundle = (user: string, title: string) =>
    serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: 3 }, (tx, scope) =>
      tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES (${uuid()}, ${scope}, ${title})`));
  beforeAll(async () => {
    s = await h.start();
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('a client behind the retained floor gets history_pruned, rebuilds, and keeps its unpushed rows', async () => {
    const a = await device('u-pruned');
    const b = await device('u-pruned');
    await a.client.attach('u-pruned');
    await b.client.attach('u-pruned');
    for (let i = 0; i < 6; i++) {
      await write.list(a.db, uuid(), `bundle ${i}`);
      await a.client.sync();
    }
    await prune();
    const mine = uuid();
    await write.list(b.db, mine, 'unpushed on B');
    const pulled = await b.client.pullToStable();
    expect(pulled.rebuilt).toBe(true);
    expect(pulled.checkpoint).toBe(6);
    expect((await localState(b.db)).lists[mine]?.title).toBe('unpushed on B');
    expect((await b.client.pendingStatus()).dirtyRows).toBe(1);
    await b.client.sync();
    await a.client.sync();
    const state = await expectConverged(s, 'u-pruned', a, b);
    expect(Object.keys(state.lists)).toHaveLength(7);
  });

  it('a rebuild cut off midway stays required and the next sync resumes it from the staged pages (rule 6)', async () => {
    const a = await device('u-resume');
    const b = await device('u-resume', { config: { pageRows: 2 } });
    await a.client.attach('u-resume');
    await b.client.attach('u-resume');
    for (let i = 0; i < 5; i++) {
      await write.list(a.db, uuid(), `bundle ${i}`);
      await a.client.sync();
    }
    await prune();
    // The first snapshot page arrives; every later page request fails until the retries run out.
    h.hooks.push(...failSnapshotPagesAfterFirst());
    await expect(b.client.pullToStable()).rejects.toMatchObject({ code: 'service_unavailable' });
    h.hooks.length = 0;
    expect((await b.client.pendingStatus()).rebuildRequired).toBe(true);
    expect(await localState(b.db)).toEqual({ lists: {}, items: {} });
    const from = h.requests.length;
    const result = await b.client.sync();
    expect(result.pull?.checkpoint).toBe(5);
    const after = h.requests.slice(from);
    // Resumed: no new snapshot session, and the first page was not fetched again: the pages asked
    // for start at rows 2 and 4. (A request the cut-off download abandoned while it was on its way
    // may still reach the server now, for one of those pages too.)
    expect(after.filter((r) => r === 'POST /sync/snapshot-sessions')).toHaveLength(0);
    const pagesAfter = after.flatMap((r, i) => (r.startsWith('GET /sync/snapshot-sessions/') ? [new URLSearchParams(h.queries[from + i]).get('after_row_ordinal')] : []));
    expect(new Set(pagesAfter)).toEqual(new Set(['2', '4']));
    await expectConverged(s, 'u-resume', a, b);
    expect((await b.client.pendingStatus()).rebuildRequired).toBe(false);
  });

  it('the hydration of an attach writes untouched tables page by page; cut off, the next sync resumes it and keeps what the app wrote meanwhile', async () => {
    const user = 'u-direct';
    const a = await device(user);
    await a.client.attach(user);
    const listIds = Array.from({ length: 5 }, () => uuid());
    for (const [i, id] of listIds.entries()) await write.list(a.db, id, `list ${i}`);
    await write.item(a.db, uuid(), listIds[0] as string, 'an item');
    await a.client.sync();
    const b = await device(user, { config: { pageRows: 2 } });
    const triggers = () => b.db.query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name");
    const installed = await triggers();
    expect(installed.map((t) => t['name'])).toContain('_sync_trg_lists_ins');
    // The first snapshot page arrives; every later page request fails until the retries run out.
    h.hooks.push(...failSnapshotPagesAfterFirst());
    await expect(b.client.attach(user)).rejects.toMatchObject({ code: 'service_unavailable' });
    h.hooks.length = 0;
    // A page is written with the capture triggers of its table dropped: they are back, as they were.
    expect(await triggers()).toEqual(installed);
    // The first page (two lists) is in the table already, as the server's rows (not local changes).
    // Items has a foreign key to lists, which the server's snapshot sends first: written straight
    // in as well, so no table is staged.
    const mid = await localState(b.db);
    expect(Object.keys(mid.lists)).toHaveLength(2);
    expect(mid.items).toEqual({});
    expect(await b.db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '\\_sync\\_stage\\_%' ESCAPE '\\'")).toEqual([]);
    expect(await b.client.pendingStatus()).toMatchObject({ dirtyRows: 0, rebuildRequired: true });
    // The app writes meanwhile; the next sync resumes the same download and keeps that row.
    const mine = uuid();
    await write.list(b.db, mine, 'written during the hydration');
    const from = h.requests.length;
    await b.client.sync();
    expect(h.requests.slice(from).filter((r) => r === 'POST /sync/snapshot-sessions')).toHaveLength(0);
    await a.client.sync();
    const state = await expectConverged(s, user, a, b);
    expect(Object.keys(state.lists)).toHaveLength(6);
    expect(state.lists[mine]?.title).toBe('written during the hydration');
  });

  it('the hydration of an attach writes a table with a foreign key page by page after its parents; a parent the app deletes meanwhile takes the children of later pages along, as a pull would', async () => {
    const user = 'u-direct-children';
    const a = await device(user);
    await a.client.attach(user);
    const listIds = Array.from({ length: 3 }, () => uuid());
    for (const [i, id] of listIds.entries()) {
      await write.list(a.db, id, `list ${i}`);
      for (let n = 0; n < 3; n++) await write.item(a.db, uuid(), id, `item ${i}.${n}`);
    }
    await a.client.sync();
    const server = await serverState(s, user);
    const b = await device(user, { config: { pageRows: 4 } });
    h.hooks.push(...failSnapshotPagesAfterFirst());
    await expect(b.client.attach(user)).rejects.toMatchObject({ code: 'service_unavailable' });
    h.hooks.length = 0;
    // The first page: the three lists, then the first item (the lowest key), in the table already.
    const mid = await localState(b.db);
    expect(Object.keys(mid.lists).sort()).toEqual([...listIds].sort());
    const [firstItem, ...otherItems] = Object.keys(server.items).sort();
    expect(Object.keys(mid.items)).toEqual([firstItem]);
    expect(mid.items[firstItem as string]).toEqual(server.items[firstItem as string]);
    expect(await b.client.pendingStatus()).toMatchObject({ dirtyRows: 0, rebuildRequired: true });
    // The app deletes a list whose items are all in later pages: they arrive under a parent deleted
    // here, and go with it (captured, so the push deletes them on the server too).
    const gone = listIds.find((id) => id !== mid.items[firstItem as string]?.list_id) as string;
    expect(otherItems.filter((id) => server.items[id]?.list_id === gone)).toHaveLength(3);
    await write.deleteList(b.db, gone);
    await b.client.sync();
    await b.client.sync();
    await a.client.sync();
    const state = await expectConverged(s, user, a, b);
    expect(Object.keys(state.lists).sort()).toEqual(listIds.filter((id) => id !== gone).sort());
    expect(Object.values(state.items).filter((item) => item.list_id === gone)).toEqual([]);
    expect(Object.keys(state.items)).toHaveLength(6);
  });

  it('a snapshot that sends a child before its parent (a server whose order lags its foreign keys) makes the hydration start over staged, and it converges', async () => {
    const user = 'u-children-first';
    const a = await device(user);
    await a.client.attach(user);
    for (let i = 0; i < 2; i++) {
      const listId = uuid();
      await write.list(a.db, listId, `list ${i}`);
      for (let n = 0; n < 3; n++) await write.item(a.db, uuid(), listId, `item ${i}.${n}`);
    }
    await a.client.sync();
    // The server's snapshot renders each table with its place in the order: swap lists and items.
    const swap = (from: string, to: string) =>
      // As an operator repairs by hand: the owner, holding the bootstrap lock.
      s.t.exec(`BEGIN; SELECT pg_advisory_xact_lock(7020140421);
        UPDATE sync.table_catalog SET snapshot_sql = replace(snapshot_sql, '${from}', '${to}'),
               snapshot_v1_sql = replace(snapshot_v1_sql, '${from}', '${to}'),
               snapshot_array_sql = replace(snapshot_array_sql, '${from}', '${to}'); COMMIT`);
    const orders = await s.t.db.query<{ table_name: string; apply_order: number }>(sql`SELECT table_name, apply_order FROM sync.table_catalog`);
    const order = (name: string) => orders.find((o) => o.table_name === name)?.apply_order as number;
    expect(order('lists')).toBeLessThan(order('items'));
    await swap(`${order('lists')} AS apply_order`, '9999 AS apply_order');
    try {
      // Every page asked for on its own, then the first one carried by the create's answer.
      for (const snapshotFirstPage of [false, true]) {
        const b = await device(user, { config: { pageRows: 4, snapshotFirstPage } });
        const from = h.requests.length;
        await b.client.attach(user);
        const pages = h.requests.map((r, i) => ({ r, after: new URLSearchParams(h.queries[i]).get('after_row_ordinal') })).slice(from)
          .filter(({ r }) => r.startsWith('GET /sync/snapshot-sessions/'));
        // 8 rows in pages of 4, items first: the first page could not commit, the download started
        // over from row 0 with every table staged (the second page, fetched meanwhile, is dropped).
        // The first page of the create's answer is asked for again, by request, when it starts over.
        if (snapshotFirstPage) expect(pages.filter(({ after }) => after === '0')).toHaveLength(1);
        else expect(pages).toHaveLength(4);
        // The page that could not commit dropped the capture triggers of its table: rolled back with it.
        expect(await b.db.query("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name IN ('_sync_trg_lists_ins', '_sync_trg_items_ins') ORDER BY name"))
          .toEqual([{ name: '_sync_trg_items_ins' }, { name: '_sync_trg_lists_ins' }]);
        await expectConverged(s, user, a, b);
        expect((await b.client.pendingStatus()).dirtyRows).toBe(0);
      }
    } finally {
      await swap('9999 AS apply_order', `${order('lists')} AS apply_order`);
    }
  });

  for (const oneRequest of [false, true]) {
    it(`a committed push whose replay fell below the floor acknowledges its tuple and rebuilds (rule 4; ${oneRequest ? 'one request' : 'staged session'})`, async () => {
      const user = `u-floor-${oneRequest ? 'one' : 'staged'}`;
      // The replay reads its bundle back (no prediction), which the pruning takes away.
      const a = await device(user, { config: { pushInOneRequest: oneRequest, predictReplay: false } });
      await a.client.attach(user);
      await write.list(a.db, uuid(), 'mine');
      const commitThenPrune: Hook = async (event, next) => {
        expect(event.rawPath).toMatch(oneRequest ? /\/push-sessions$/ : /\/commit$/);
        const answer = await next();
        // Other writers commit and maintenance prunes before the client can fetch its rows.
        for (let i = 0; i < 4; i++) await serverBundle(user, `server ${i}`);
        await prune();
        return answer;
      };
      if (oneRequest) h.hooks.push(commitThenPrune);
      else {
        h.hooks.push(async (event, next) => {
          if (!event.rawPath.endsWith('/push-sessions')) throw new Error(`unexpected ${event.rawPath}`);
          return next();
        });
        h.hooks.push((_e, next) => next());
        h.hooks.push(commitThenPrune);
      }
      const result = await a.client.pushPending();
      expect(result).toMatchObject({ status: 'committed', sourceBundleId: 1 });
      expect(await a.client.pendingStatus()).toMatchObject({ nextSourceBundleId: 2, frozenRows: 0, dirtyRows: 0, rebuildRequired: false, checkpoint: 5 });
      await expectConverged(s, user, a);
    });
  }

  it('bundles too big for one pull response arrive with rows_omitted and are completed page by page', async () => {
    const a = await device('u-omitted');
    const b = await device('u-omitted');
    await a.client.attach('u-omitted');
    await b.client.attach('u-omitted');
    const listId = uuid();
    await write.list(a.db, listId, 'big');
    for (let i = 0; i < 2000; i++) await write.item(a.db, uuid(), listId, `row ${i} ${'x'.repeat(40)}`);
    await a.client.sync();
    const from = h.requests.length;
    const pulled = await b.client.pullToStable();
    expect(pulled).toMatchObject({ bundlesApplied: 1, rowsApplied: 2001 });
    expect(h.requests.slice(from).filter((r) => r.includes('/committed-bundles/')).length).toBeGreaterThan(1);
    await expectConverged(s, 'u-omitted', a, b);
  });
});
