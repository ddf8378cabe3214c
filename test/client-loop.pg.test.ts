/**
 * Issue 16, the sync loop in the library (`client.start()`): it attaches and syncs, syncs after
 * local writes through `client.db` (debounced into one bundle), wakes on another device's commit
 * through the long poll, rests while offline and syncs when the network is back, backs off after
 * failures that may pass, asks for attention when waiting cannot help, and stops. The network and
 * visibility signals come from an environment the test controls; the server, HTTP and SQLite are
 * real.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LoopEnvironment, type SyncStatus } from '../client-web/api.js';
import { openClient } from '../client-web/client.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type TokenProvider } from '../client-web/transport.js';
import { LOCAL_APP_SQL, LOCAL_APP_TABLES, TEST_RETRY, openDevice, type Device, type DeviceOptions } from './support/client-harness.js';
import { NO_FAULTS, startFaultProxy, type FaultProxy } from './support/fault-proxy.js';
import { signToken, startTestServer, type TestServer } from './support/server.js';
import { until } from './support/until.js';

/** Network and visibility signals the test switches. */
function controlledEnvironment() {
  let online = true;
  const listeners = { online: new Set<() => void>(), offline: new Set<() => void>(), visible: new Set<() => void>() };
  const subscribe = (set: Set<() => void>) => (listener: () => void) => {
    set.add(listener);
    return () => set.delete(listener);
  };
  const environment: LoopEnvironment = {
    isOnline: () => online,
    onOnline: subscribe(listeners.online),
    onOffline: subscribe(listeners.offline),
    onVisible: subscribe(listeners.visible),
  };
  return {
    environment,
    goOffline: () => ((online = false), listeners.offline.forEach((l) => l())),
    goOnline: () => ((online = true), listeners.online.forEach((l) => l())),
  };
}

describe('web client: the sync loop (start/stop/onStatus)', () => {
  let s: TestServer;
  const devices: Device[] = [];
  const proxies: FaultProxy[] = [];
  const device = async (user: string, options: DeviceOptions = {}) => {
    const d = await openDevice(s, user, options);
    devices.push(d);
    return d;
  };
  const serverCodes = async (user: string) => (await s.t.exec('SELECT code FROM app.kinds WHERE _sync_scope_id = $1 ORDER BY code', [user])).rows.map((r) => r.code as string);
  const bundlesOf = async (user: string) => Number((await s.t.exec('SELECT count(*) AS n FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1', [user])).rows[0].n);
  /** A device whose loop runs in a controlled environment, with every status recorded. */
  const looping = async (user: string, options: DeviceOptions = {}) => {
    const d = await device(user, { ...options, config: { watch: 'long-poll', ...options.config } });
    const env = controlledEnvironment();
    const statuses: SyncStatus[] = [];
    d.client.onStatus((st) => statuses.push(st));
    const last = () => statuses.at(-1) as SyncStatus;
    return { d, env, statuses, last };
  };
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    for (const p of proxies) await p.close();
    await s?.close();
  });

  it('attaches and syncs, syncs local writes after a quiet moment as one bundle, and wakes on another device\'s commit', async () => {
    const user = 'loop-main';
    const { d: a, env, statuses, last } = await looping(user);
    expect(last().phase).toBe('stopped');
    a.client.start({ userId: user, environment: env.environment, debounceMs: 100, periodicMs: 0 });
    await until('attached and synced', last, (st) => st.phase === 'idle' && st.lastSyncedAt !== null);
    expect(last()).toMatchObject({ attachedUserId: user, pendingRows: 0, lastError: null, attach: { status: 'attached', resolution: 'initialize_empty' } });
    expect(statuses.map((st) => st.phase)).toContain('syncing');
    // Never idle before it attached and a sync answered (issue 23 item 9).
    expect(statuses.filter((st) => st.phase === 'idle').every((st) => st.attachedUserId === user && st.lastSyncedAt !== null)).toBe(true);

    // Three writes within the quiet time: one sync, one bundle.
    const before = await bundlesOf(user);
    for (const code of ['w1', 'w2', 'w3']) await a.client.db.run('INSERT INTO kinds (code, label) VALUES (?, ?)', [code, `label ${code}`]);
    await until('the writes reached the server', () => serverCodes(user), (codes) => codes.length === 3);
    expect(await bundlesOf(user)).toBe(before + 1);
    await until('nothing pending', last, (st) => st.pendingRows === 0 && st.phase === 'idle');

    // Another device commits; the long poll wakes the loop (periodic syncs are off).
    const b = await device(user);
    await b.client.attach(user);
    await b.db.run("INSERT INTO kinds (code, label) VALUES ('from-b', 'b')");
    await b.client.sync();
    await until('A pulled B\'s row', () => a.db.query("SELECT code FROM kinds WHERE code = 'from-b'"), (rows) => rows.length === 1);
    await until('the checkpoint moved', last, (st) => st.checkpoint === before + 2);
    await a.client.stop();
    expect(last().phase).toBe('stopped');
    // Stopped: a write stays local.
    await a.client.db.run("INSERT INTO kinds (code, label) VALUES ('after-stop', 'x')");
    await new Promise((r) => setTimeout(r, 400));
    expect(await serverCodes(user)).not.toContain('after-stop');
  });

  it('reads the pending status in one statement: the loop reads it before and after every sync, ahead of the app\'s own queries', async () => {
    const user = 'loop-status-read';
    const raw = await openNodeSqlite();
    await raw.exec(LOCAL_APP_SQL);
    let statements = 0;
    const db = { ...raw, query: ((q: string, p?: readonly (null | number | bigint | string | Uint8Array)[]) => {
      statements++;
      return raw.query(q, p);
    }) as typeof raw.query };
    const token = signToken(user);
    const client = await openClient({ baseUrl: s.url, getToken: () => token, db, tables: LOCAL_APP_TABLES, retry: TEST_RETRY });
    try {
      await client.attach(user);
      await client.db.run("INSERT INTO kinds (code, label) VALUES ('s1', 'one')");
      await client.db.run("INSERT INTO kinds (code, label) VALUES ('s2', 'two')");
      statements = 0;
      const status = await client.pendingStatus();
      expect(statements).toBe(1);
      expect(status).toMatchObject({ attachedUserId: user, dirtyRows: 2, frozenRows: 0, frozenSourceBundleId: null, quarantinedRows: 0, rejected: null, sourceRecovery: null, rebuildRequired: false });
      await client.sync();
      const synced = await client.pendingStatus();
      expect(synced).toMatchObject({ attachedUserId: user, dirtyRows: 0, frozenRows: 0, checkpoint: status.checkpoint + 1, nextSourceBundleId: status.nextSourceBundleId + 1 });
    } finally {
      await client.close();
    }
  });

  it('rests while offline and syncs as soon as the network is back', async () => {
    const user = 'loop-offline';
    const { d: a, env, last } = await looping(user);
    a.client.start({ userId: user, environment: env.environment, debounceMs: 50, periodicMs: 0 });
    await until('synced', last, (st) => st.phase === 'idle' && st.lastSyncedAt !== null);
    env.goOffline();
    await until('offline', last, (st) => st.phase === 'offline');
    await a.client.db.run("INSERT INTO kinds (code, label) VALUES ('offline', 'written offline')");
    await until('counted as pending', last, (st) => st.pendingRows === 1 && st.phase === 'offline');
    await new Promise((r) => setTimeout(r, 300));
    expect(await serverCodes(user)).toEqual([]);
    env.goOnline();
    await until('synced after coming back', () => serverCodes(user), (codes) => codes.length === 1);
    await a.client.stop();
  });

  it('backs off after a failure that may pass; online retries at once; the status says why', async () => {
    const user = 'loop-backoff';
    const proxy = await startFaultProxy(s.url, 7, NO_FAULTS);
    proxies.push(proxy);
    const { d: a, env, last } = await looping(user, { url: proxy.url, config: { retry: { maxAttempts: 1, baseDelayMs: 5, maxDelayMs: 5 } } });
    await a.client.attach(user);
    proxy.rates = { ...NO_FAULTS, unavailable: 1 };
    await a.client.db.run("INSERT INTO kinds (code, label) VALUES ('held', 'while the server is down')");
    // A backoff of many minutes: only `online` can end it before the wait below gives up.
    a.client.start({ environment: env.environment, backoff: { baseMs: 20 * 60_000, maxMs: 40 * 60_000 }, periodicMs: 0 });
    const failed = await until('backing off', last, (st) => st.phase === 'backoff');
    expect(failed.lastError?.code).toBe('service_unavailable');
    expect(failed.nextAttemptAt).toBeGreaterThan(Date.now() + 5 * 60_000);
    expect(failed.pendingRows).toBe(1);
    // A write during the backoff does not cut it short.
    await a.client.db.run("INSERT INTO kinds (code, label) VALUES ('held-2', 'still down')");
    await new Promise((r) => setTimeout(r, 300));
    expect(last().phase).toBe('backoff');
    proxy.rates = NO_FAULTS;
    env.goOnline();
    await until('synced right away', last, (st) => st.phase === 'idle' && st.lastError === null);
    expect(await serverCodes(user)).toEqual(['held', 'held-2']);
    await a.client.stop();
  });

  it('a stale cached token is refreshed once on a 401 and the loop syncs; a provider that throws is authentication_failed (issue 23 item 8)', async () => {
    const user = 'loop-token';
    // A cache refreshed only when asked; it goes stale after the open (a key the server does not know).
    let cached = await signToken(user);
    const refreshes: boolean[] = [];
    const getToken: TokenProvider = async (request) => {
      refreshes.push(request?.refresh ?? false);
      if (request?.refresh) cached = await signToken(user);
      return cached;
    };
    const db = await openNodeSqlite();
    await db.exec(LOCAL_APP_SQL);
    const client = await openClient({ baseUrl: s.url, getToken, db, tables: LOCAL_APP_TABLES, retry: TEST_RETRY, watch: 'long-poll' });
    cached = await signToken(user, { secret: 'a-key-the-server-does-not-know-0123456789' });
    const env = controlledEnvironment();
    const statuses: SyncStatus[] = [];
    client.onStatus((st) => statuses.push(st));
    await client.db.run("INSERT INTO kinds (code, label) VALUES ('t1', 'with a refreshed token')");
    client.start({ userId: user, environment: env.environment, periodicMs: 0 });
    await until('synced', () => statuses.at(-1) as SyncStatus, (st) => st.phase === 'idle' && st.lastSyncedAt !== null && st.pendingRows === 0);
    expect(refreshes.filter((r) => r)).toHaveLength(1);
    expect(statuses.map((st) => st.phase)).not.toContain('needs_attention');
    expect(await serverCodes(user)).toEqual(['t1']);
    await client.close();

    // A provider that throws (signed out): typed as the credential's failure, and not retried.
    let calls = 0;
    const db2 = await openNodeSqlite();
    await db2.exec(LOCAL_APP_SQL);
    const signedOut = openClient({ baseUrl: s.url, getToken: () => { calls++; throw new Error('signed out'); }, db: db2, tables: LOCAL_APP_TABLES, retry: TEST_RETRY });
    await expect(signedOut).rejects.toMatchObject({ code: 'authentication_failed' });
    expect(calls).toBe(1);
    await db2.close();
  });

  it('started without a user to attach, the loop needs attention (not idle) until the app attaches (issue 23 item 9)', async () => {
    const user = 'loop-no-user';
    const { d: a, env, statuses, last } = await looping(user);
    a.client.start({ environment: env.environment, periodicMs: 0 });
    await until('needs attention', last, (st) => st.phase === 'needs_attention');
    expect(last()).toMatchObject({ attachedUserId: null, lastError: { code: 'not_attached' } });
    expect(statuses.map((st) => st.phase)).not.toContain('idle');
    await a.client.attach(user);
    await until('synced', last, (st) => st.phase === 'idle' && st.attachedUserId === user && st.lastError === null);
    await a.client.stop();
  });

  it('a held rejection needs attention; a discard brings the loop back to idle', async () => {
    const user = 'loop-rejected';
    const { d: a, env, last } = await looping(user);
    await a.client.attach(user);
    await a.db.run("INSERT INTO kinds (code, label) VALUES ('k1', 'same'), ('k2', 'same')");
    a.client.start({ environment: env.environment, periodicMs: 0 });
    const held = await until('needs attention', last, (st) => st.phase === 'needs_attention');
    expect(held).toMatchObject({ lastError: { code: 'push_rejected' }, rejected: { code: 'push_rejected', violation: expect.objectContaining({ constraint: 'kinds_label_key' }) } });
    expect(await a.client.discardRejected()).toEqual({ discardedRows: 2 });
    await until('idle again', last, (st) => st.phase === 'idle' && st.rejected === null && st.pendingRows === 0);
    await a.client.close();
    expect(last().phase).toBe('stopped');
  });
});

describe('web client: the loop tells the truth through a server outage (issue 23 item 9)', () => {
  let s: TestServer;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    // Short long polls, so a wait in flight when the outage starts ends soon.
    s = await startTestServer({ env: { SYNC_LIMIT_WATCH_MAX_WAIT_SECONDS: '1' } });
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await s?.close();
  });

  for (const watch of ['long-poll', 'websocket'] as const) {
    it(`a ${watch} device with nothing to push shows the outage (backoff with the error), not idle, and idle again after it`, async () => {
      const user = `loop-outage-${watch}`;
      const proxy = await startFaultProxy(s.url, 11, NO_FAULTS);
      closers.push(() => proxy.close());
      // The proxy forwards no WebSocket upgrade: the websocket source waits by long polls, as behind such a proxy.
      const d = await openDevice(s, user, { url: proxy.url, config: { watch, retry: { maxAttempts: 1, baseDelayMs: 5, maxDelayMs: 5 } } });
      closers.push(() => d.close());
      const env = controlledEnvironment();
      const statuses: SyncStatus[] = [];
      d.client.onStatus((st) => statuses.push(st));
      const last = () => statuses.at(-1) as SyncStatus;
      // Attached first: the loop's one sync then leaves nothing scheduled but the watch.
      await d.client.attach(user);
      d.client.start({ environment: env.environment, periodicMs: 0, backoff: { baseMs: 30_000, maxMs: 60_000 } });
      await until('synced', last, (st) => st.phase === 'idle' && st.lastSyncedAt !== null);
      proxy.rates = { ...NO_FAULTS, unavailable: 1 };
      const down = await until('the outage shows', last, (st) => st.phase !== 'idle' && st.phase !== 'syncing', 15_000);
      expect(down).toMatchObject({ phase: 'backoff', lastError: { code: 'service_unavailable' }, pendingRows: 0 });
      proxy.rates = NO_FAULTS;
      env.goOnline();
      await until('idle again', last, (st) => st.phase === 'idle' && st.lastError === null, 10_000);
      await d.client.stop();
    });
  }
});
