/**
 * Push notifications through the local gateway (protocol §5.9, issue 17 item 5) and waiting
 * without polling (issue 15 item 8):
 * - `GET /sync/ws` sends `{"type":"changed","latest_bundle_seq":n}` after each commit of the
 *   socket's user: pushes and server writes alike, another user's never; bad tokens and sources
 *   are refused before the upgrade;
 * - the client's `watch: 'websocket'` wakes on them, and falls back to long polls by itself when
 *   the server offers no socket;
 * - waiting long polls cost no query per poll interval (the process's one LISTEN connection wakes
 *   them), and an abandoned long poll stops working at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { loadConfig } from '../core/config.js';
import { createPool } from '../core/db/index.js';
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { createFanOut, startCommitFeed, type CommitFeed } from '../core/sync/notify/commit-feed.js';
import { createRuntime, type Runtime } from '../functions/index.js';
import { THIS_BUILD } from '../core/sync/index.js';
import { startGateway, type Gateway } from '../dev/gateway.js';
import { type SyncStatus } from '../client-web/api.js';
import { type WebSocketFactory, type WebSocketLike } from '../client-web/watch-socket.js';
import { expectConverged, openDevice, write, type Device } from './support/client-harness.js';
import { openAppDb, type TestDb } from './support/server-db.js';
import { apiClient, signToken, startTestServer, TEST_JWT_SECRET, type TestServer } from './support/server.js';
import { APP_TABLES } from './support/schemas.js';
import { initEmpty, item, list, pushOk, uuid } from './support/write-helpers.js';
import { HANG_MS, until } from './support/until.js';
import { defaultLimits } from '../core/limits.js';

const wsFactory: WebSocketFactory = (url) => new WebSocket(url) as unknown as WebSocketLike;

interface Socket {
  readonly messages: unknown[];
  next(timeoutMs?: number): Promise<unknown>;
  close(): void;
}

/** Opens /sync/ws; rejects with the HTTP status when the upgrade is refused. */
async function openSocket(baseUrl: string, query: Record<string, string>): Promise<Socket> {
  const url = new URL('/sync/ws', baseUrl.replace('http', 'ws'));
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  const ws = new WebSocket(url);
  const messages: unknown[] = [];
  const waiting: Array<(m: unknown) => void> = [];
  ws.on('message', (data) => {
    const m = JSON.parse(String(data));
    const w = waiting.shift();
    if (w) w(m);
    else messages.push(m);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode })));
    ws.once('error', reject);
  });
  return {
    messages,
    next: (timeoutMs = HANG_MS) =>
      messages.length
        ? Promise.resolve(messages.shift())
        : new Promise((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error('no message')), timeoutMs);
            waiting.push((m) => {
              clearTimeout(timer);
              resolve(m);
            });
          }),
    close: () => ws.close(),
  };
}

describe('push notifications through the local gateway', () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('a socket hears every commit of its user (pushes and server writes), never another user\'s', async () => {
    const alice = s.client('ws-alice', 'src-a');
    const bob = s.client('ws-bob', 'src-b');
    await initEmpty(alice);
    await initEmpty(bob);
    const socket = await openSocket(s.url, { token: await signToken('ws-alice'), source_id: 'src-watch' });
    try {
      const listId = uuid();
      await pushOk(bob, [list(uuid(), 'bob only')], { sourceBundleId: 1 });
      await pushOk(alice, [list(listId, 'first')], { sourceBundleId: 1 });
      expect(await socket.next()).toEqual({ type: 'changed', latest_bundle_seq: 1 });
      await pushOk(alice, [item(uuid(), listId, 'second')], { sourceBundleId: 2 });
      expect(await socket.next()).toEqual({ type: 'changed', latest_bundle_seq: 2 });
      // A server write (the application's backend) commits a bundle too.
      await serverWrite(s.t.db, { userId: 'ws-alice', sourceId: 'server:test', retainedBundlesPerUser: 100 }, (tx, scope) =>
        tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES (${uuid()}::uuid, ${scope}, 'from the server')`));
      expect(await socket.next()).toEqual({ type: 'changed', latest_bundle_seq: 3 });
      // Bob's commit never reached Alice's socket.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(socket.messages).toEqual([]);
      expect(s.gateway.sockets.count()).toBe(1);
    } finally {
      socket.close();
    }
  });

  it('refuses a bad token (401) and a bad source (400) before the upgrade', async () => {
    await expect(openSocket(s.url, { token: 'not-a-jwt', source_id: 'src-x' })).rejects.toMatchObject({ status: 401 });
    await expect(openSocket(s.url, { token: await signToken('ws-alice', { secret: 'another-secret-0123456789abcdef' }), source_id: 'src-x' })).rejects.toMatchObject({ status: 401 });
    await expect(openSocket(s.url, { token: await signToken('ws-alice'), source_id: 'bad source!' })).rejects.toMatchObject({ status: 400 });
  });

  it("the client's watch: 'websocket' wakes on another device's commit", async () => {
    const a = await openDevice(s, 'ws-devices');
    const b = await openDevice(s, 'ws-devices', { config: { watch: 'websocket', webSocket: wsFactory } });
    devices.push(a, b);
    const listId = uuid();
    await write.list(a.db, listId, 'shared');
    await a.client.attach('ws-devices');
    await b.client.attach('ws-devices');
    // A fresh socket first says "check": commits before it opened were not announced on it.
    expect((await b.client.watch()).changed).toBe(true);
    await b.client.sync();
    const waiting = b.client.watch();
    await write.item(a.db, uuid(), listId, 'from a');
    await a.client.sync();
    const woke = await waiting;
    expect(woke).toEqual({ changed: true, latestBundleSeq: 2 });
    await b.client.sync();
    expect((await b.db.query('SELECT body FROM items')).map((r) => r['body'])).toEqual(['from a']);
  });
});

describe('without a commit feed (as in Lambda)', () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({ feed: false });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('the socket is refused with 503 and the client falls back to long polls by itself', async () => {
    await expect(openSocket(s.url, { token: await signToken('fb-user'), source_id: 'src-x' })).rejects.toMatchObject({ status: 503 });
    const a = await openDevice(s, 'fb-user');
    const b = await openDevice(s, 'fb-user', { config: { watch: 'websocket', webSocket: wsFactory } });
    devices.push(a, b);
    const listId = uuid();
    await write.list(a.db, listId, 'shared');
    await a.client.attach('fb-user');
    await b.client.attach('fb-user');
    const waiting = b.client.watch();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await write.item(a.db, uuid(), listId, 'polled');
    await a.client.sync();
    expect(await waiting).toEqual({ changed: true, latestBundleSeq: 2 });
  });
});

describe('waiting long polls cost no queries; abandoned ones stop', () => {
  let t: TestDb;
  let queries = 0;
  const started: Array<{ gateway: Gateway; feed?: CommitFeed }> = [];

  /** Watch requests the gateway's handlers are still working on. */
  let watching = 0;

  /** A gateway whose runtime pool counts every statement it runs. */
  async function serve(withFeed: boolean): Promise<{ url: string; runtime: Runtime; feed: CommitFeed | undefined }> {
    const pool = t.db.pool;
    const counting = new Proxy(pool, {
      get(target, prop, receiver) {
        if (prop === 'query') return (...args: unknown[]) => (queries++, (target.query as (...a: unknown[]) => unknown).apply(target, args));
        if (prop === 'connect') {
          return async () => {
            const client = await target.connect();
            return new Proxy(client, {
              get(c, p, r) {
                if (p === 'query') return (...args: unknown[]) => (queries++, (c.query as (...a: unknown[]) => unknown).apply(c, args));
                const v = Reflect.get(c, p, r);
                return typeof v === 'function' ? v.bind(c) : v;
              },
            });
          };
        }
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const config = loadConfig({ DATABASE_URL: t.url, SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(',') });
    const feed = withFeed ? await startCommitFeed(t.url) : undefined;
    const runtime = createRuntime(config, counting, THIS_BUILD, { feed });
    const gateway = await startGateway({
      runtime,
      auth: { secret: TEST_JWT_SECRET },
      intercept: async (event, next) => {
        if (!event.rawPath.endsWith('/watch')) return next();
        watching++;
        try {
          return await next();
        } finally {
          watching--;
        }
      },
    });
    started.push({ gateway, ...(feed ? { feed } : {}) });
    return { url: gateway.url, runtime, feed };
  }

  beforeAll(async () => {
    t = await openAppDb();
  });
  afterAll(async () => {
    for (const s of started) {
      await s.gateway.close();
      await s.feed?.close();
    }
    await t?.close();
  });

  it('40 waiting watches run no query while they wait, and wake on their user\'s commit', async () => {
    const { url, feed } = await serve(true);
    const writer = apiClient(url, 'lp-user', 'src-writer');
    await initEmpty(writer);
    const watchers = Array.from({ length: 40 }, (_, i) => apiClient(url, 'lp-user', `src-w${i}`));
    await watchers[0]!.get('/sync/capabilities');
    const before = queries;
    const waits = watchers.map((c) => c.get(`/sync/watch?after_bundle_seq=0&wait_seconds=${defaultLimits.watchMaxWaitSeconds}`));
    // Every watch has read once and waits on the feed (a state, however long the machine takes).
    await until('40 watches wait on the feed', () => feed?.size().subscribers, (n) => n === 40);
    const afterFirstReads = queries;
    // One point read each, then nothing for a second (polling: 40 × 4 reads per second). Load can
    // only slow a poller down, never make these waiters query.
    expect(afterFirstReads - before).toBeLessThanOrEqual(40);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(queries - afterFirstReads).toBe(0);
    await pushOk(writer, [list(uuid(), 'wake')], { sourceBundleId: 1 });
    const answers = await Promise.all(waits);
    for (const a of answers) expect(a.body).toEqual({ latest_bundle_seq: 1, changed: true });
  });

  for (const withFeed of [true, false]) {
    it(`abandoned watches stop working when their callers go (${withFeed ? 'feed' : 'polling'})`, async () => {
      const { url, feed } = await serve(withFeed);
      const user = `gone-${withFeed}`;
      const token = await signToken(user);
      await initEmpty(apiClient(url, user, 'src-init'));
      const controllers = Array.from({ length: 40 }, () => new AbortController());
      const wait = defaultLimits.watchMaxWaitSeconds;
      const opened = Date.now();
      const calls = controllers.map((c, i) =>
        fetch(`${url}/sync/watch?after_bundle_seq=0&wait_seconds=${wait}`, { headers: { authorization: `Bearer ${token}`, 'sync-source-id': `src-g${i}` }, signal: c.signal }).catch(() => undefined));
      // Every handler is waiting (on the feed, or between polls) before the callers go.
      await until('40 watches waiting', () => (withFeed ? feed?.size().subscribers : watching), (n) => n === 40);
      const beforeAbort = queries;
      for (const c of controllers) c.abort();
      await Promise.all(calls);
      // Each handler notices, reads once more at most, and is done: counted, not timed (a handler
      // whose first read was still due counts twice). A poller that missed the abort would read
      // every 250 ms until its deadline, about 100 reads each.
      await until('every watch handler finished', () => watching, (n) => n === 0);
      expect(queries - beforeAbort).toBeLessThanOrEqual(2 * 40);
      // ...and it finished because its caller went, not at its own deadline (the one bound here,
      // far above the cost of noticing an abort).
      expect(Date.now() - opened).toBeLessThan(wait * 1000);
      const settled = queries;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(queries - settled).toBe(0);
    });
  }

  it('closing the gateway waits for the work of the requests it cut, so the pool can end right after', async () => {
    const pool = await createPool({ connectionString: t.url, max: 2, driver: 'pg' });
    const config = loadConfig({ DATABASE_URL: t.url, SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(',') });
    const answers: Array<Promise<number>> = [];
    let waiting = 0;
    const gateway = await startGateway({
      runtime: createRuntime(config, pool, THIS_BUILD),
      auth: { secret: TEST_JWT_SECRET },
      intercept: (event, next) => {
        if (event.rawPath.endsWith('/watch')) waiting++;
        const result = next();
        answers.push(result.then((r) => (r as { statusCode: number }).statusCode, () => 500));
        return result;
      },
    });
    await initEmpty(apiClient(gateway.url, 'close-user', 'src-init'));
    // A long poll (polling, as in Lambda) is waiting when the gateway closes and the pool ends:
    // the aborted poll reads once more on its way out, which must not meet an ended pool (a 500).
    const polling = apiClient(gateway.url, 'close-user', 'src-w').get(`/sync/watch?after_bundle_seq=1&wait_seconds=${defaultLimits.watchMaxWaitSeconds}`).catch(() => undefined);
    await until('the long poll waits', () => waiting, (n) => n === 1);
    await gateway.close();
    await pool.end();
    await polling;
    expect((await Promise.all(answers)).filter((status) => status >= 500)).toEqual([]);
  });

  it('a dropped LISTEN connection is re-established, and waiters re-check meanwhile', async () => {
    const feed = await startCommitFeed(t.url);
    try {
      const signals: Array<number | null> = [];
      feed.subscribe('feed-user', (seq) => signals.push(seq));
      await t.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lockstep-listener' AND datname = current_database()`);
      await until('the feed listens again after telling its waiters to re-check', () => feed.listening && signals.includes(null), (ok) => ok);
      await t.exec(`SELECT pg_notify('lockstep_commit', '{"user_id":"feed-user","bundle_seq":7}')`);
      await until('a notification on the new connection arrives', () => signals.includes(7), (ok) => ok);
    } finally {
      await feed.close();
    }
  });
});

describe('a commit reaches the sockets from the process that answered it', () => {
  let t: TestDb;
  let gateway: Gateway | undefined;
  beforeAll(async () => {
    t = await openAppDb();
  });
  afterAll(async () => {
    await gateway?.close();
    await t?.close();
  });

  it('a push committed through this gateway is announced to its sockets without PostgreSQL\'s signal', async () => {
    // A feed that says it listens but never hears PostgreSQL: only the gateway's own announcement can arrive.
    const feed = createFanOut();
    feed.listener = { listening: true, close: async () => undefined };
    const config = loadConfig({ DATABASE_URL: t.url, SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(',') });
    gateway = await startGateway({ runtime: createRuntime(config, t.db.pool, THIS_BUILD, { feed }), auth: { secret: TEST_JWT_SECRET } });
    const writer = apiClient(gateway.url, 'announce-user', 'src-writer');
    await initEmpty(writer);
    const socket = await openSocket(gateway.url, { token: await signToken('announce-user'), source_id: 'src-reader' });
    try {
      await pushOk(writer, [list(uuid(), 'announced')], { sourceBundleId: 1 });
      expect(await socket.next(2000)).toEqual({ type: 'changed', latest_bundle_seq: 1 });
    } finally {
      socket.close();
    }
  });
});

describe('a notification carries the pull page of a commit this gateway answered (§5.9)', () => {
  let s: TestServer;
  const devices: Device[] = [];
  /** Pull requests, by source id. */
  const pulls: string[] = [];
  beforeAll(async () => {
    s = await startTestServer({
      intercept: async (event, next) => {
        if (event.rawPath === '/sync/pull') pulls.push(String(event.headers['sync-source-id']));
        return next();
      },
    });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('a socket that named its protocol gets the bundle\'s pull page, as the pull answers it; one that did not gets none, nor does the pushing device\'s own', async () => {
    const writer = s.client('page-user', 'src-writer');
    await initEmpty(writer);
    const token = await signToken('page-user');
    const withPage = await openSocket(s.url, { token, source_id: 'src-page', protocol: '2' });
    const plain = await openSocket(s.url, { token, source_id: 'src-plain' });
    const own = await openSocket(s.url, { token, source_id: 'src-writer', protocol: '2' });
    try {
      const listId = uuid();
      await pushOk(writer, [list(listId, 'carried'), item(uuid(), listId, 'along')], { sourceBundleId: 1 });
      type Changed = { type: string; latest_bundle_seq: number; pull?: { bundles: { rows: unknown[] }[] } };
      // PostgreSQL's signal of the commit may come first, plain; the page follows it.
      let message = (await withPage.next()) as Changed;
      if (!message.pull) {
        expect(message).toEqual({ type: 'changed', latest_bundle_seq: 1 });
        message = (await withPage.next()) as Changed;
      }
      const pulled = await writer.request('GET', '/sync/pull?after_bundle_seq=0&target_bundle_seq=1', undefined, { 'sync-protocol-version': '2' });
      expect(message).toEqual({ type: 'changed', latest_bundle_seq: 1, pull: pulled.body });
      expect(message.pull?.bundles[0]?.rows).toHaveLength(2);
      expect(await plain.next()).toEqual({ type: 'changed', latest_bundle_seq: 1 });
      // The pushing device has the rows (its answer, its replay): one plain message, no page.
      expect(await own.next()).toEqual({ type: 'changed', latest_bundle_seq: 1 });
      await pushOk(writer, [list(uuid(), 'second')], { sourceBundleId: 2 });
      expect(await own.next()).toEqual({ type: 'changed', latest_bundle_seq: 2 });
    } finally {
      withPage.close();
      plain.close();
      own.close();
    }
  });

  it('a device\'s own commit, announced on its socket while its sync replays it, starts no second sync; another device\'s commit wakes it', async () => {
    const user = 'own-announce';
    const a = await openDevice(s, user, { config: { watch: 'websocket', webSocket: wsFactory } });
    const b = await openDevice(s, user);
    devices.push(a, b);
    const statuses: SyncStatus[] = [];
    a.client.onStatus((st) => statuses.push(st));
    const last = () => statuses.at(-1) as SyncStatus;
    // Each sync the loop runs: a status that enters `syncing`.
    const cycles = () => statuses.filter((st, i) => st.phase === 'syncing' && statuses[i - 1]?.phase !== 'syncing').length;
    const sockets = s.gateway.sockets.count();
    // Attached before the loop starts, which then runs two syncs and no more: its first, and the
    // one the socket's first answer asks for (a fresh socket re-checks). An attach by the loop
    // would add one (the attachment changed), and the counts below must start after the last.
    await a.client.attach(user);
    a.client.start({ userId: user, debounceMs: 0, periodicMs: 0 });
    await until('the socket is open', () => s.gateway.sockets.count(), (n) => n > sockets);
    await until('idle after the re-check', () => ({ st: last(), n: cycles() }), ({ st, n }) => st.phase === 'idle' && n >= 2);
    expect(cycles()).toBe(2);
    const before = cycles();
    const source = (await a.client.pendingStatus()).sourceId;
    const pullsBefore = pulls.filter((p) => p === source).length;
    const listId = uuid();
    await write.list(a.client.db, listId, 'mine');
    await until('pushed and replayed', last, (st) => st.phase === 'idle' && st.pendingRows === 0 && st.checkpoint === 1);
    // B's commit is announced after A's own: once A has pulled it, any sync A's own announcement
    // started has run before, and counts.
    await b.client.attach(user);
    await write.item(b.db, uuid(), listId, 'from b');
    await b.client.sync();
    await until('A pulled B\'s row', () => a.db.query('SELECT body FROM items'), (rows) => rows.length === 1);
    await until('idle at B\'s bundle', last, (st) => st.phase === 'idle' && st.checkpoint === 2);
    // One sync for the write (its push and the replay: nothing before the bundle was missing, so
    // no page to ask for), one for B's commit, whose page the notification carried; none for A's
    // own announcement. Not one pull request.
    expect(cycles() - before).toBe(2);
    expect(pulls.filter((p) => p === source).length - pullsBefore).toBe(0);
    await a.client.stop();
    await expectConverged(s, user, a, b);
  });

  it('the client applies the page its notification brought, without a pull', async () => {
    const a = await openDevice(s, 'page-devices');
    const b = await openDevice(s, 'page-devices', { config: { watch: 'websocket', webSocket: wsFactory } });
    devices.push(a, b);
    const listId = uuid();
    await write.list(a.db, listId, 'shared');
    await a.client.attach('page-devices');
    await b.client.attach('page-devices');
    expect((await b.client.watch()).changed).toBe(true);
    await b.client.sync();
    const waiting = b.client.watch();
    await write.item(a.db, uuid(), listId, 'carried to b');
    await a.client.sync();
    expect(await waiting).toEqual({ changed: true, latestBundleSeq: 2 });
    const bSource = (await b.client.pendingStatus()).sourceId;
    const before = pulls.filter((p) => p === bSource).length;
    const result = await b.client.sync();
    expect(result.pull).toMatchObject({ bundlesApplied: 1, rowsApplied: 1, checkpoint: 2 });
    expect(pulls.filter((p) => p === bSource).length).toBe(before);
    expect((await b.db.query('SELECT body FROM items')).map((r) => r['body'])).toEqual(['carried to b']);
    await expectConverged(s, 'page-devices', a, b);
  });
});
