/**
 * The worker side of running the sync client in a dedicated Web Worker, shared by every tab that
 * opens the same database.
 *
 *   tab 1 (owner)                                 tab 2 (follower)
 *   main ──postMessage──▶ worker                  main ──postMessage──▶ worker
 *                         │ holds Web Lock                              │ waits for the lock
 *                         │ 'lockstep:<db>'                             │
 *                         │ OPFS SQLite + SyncClient                    │
 *                         ▲                                             │
 *                         └──── BroadcastChannel 'lockstep:<db>' ◀──────┘
 *                               calls ──▶ owner;  results, events ──▶ tabs
 *
 * OPFS access handles are exclusive, so exactly one worker may open the database: the one that
 * holds the Web Lock. Every other tab's worker forwards its calls to that owner over the
 * channel. Locks are released when a worker ends (its tab closed or reloaded), so a waiting tab
 * then takes over: it opens the database (retrying while the old owner's handles close),
 * announces itself, and calls still waiting for an answer from the old owner fail with
 * `owner_changed` (their outcome is unknown; every client method is safe to call again).
 */
import type { ClientConfig, Progress, SyncClient, TableConfig } from '../api.js';
import type { SourceReplacementReason } from '../../core/protocol/read-path.js';
import { openClient } from '../client.js';
import { LivePrefetch } from '../live-prefetch.js';
import type { PrefetchedRows } from '../live-query.js';
import { openOpfsSqlite } from '../sqlite/opfs.js';
import type { SqlValue, SqliteDb } from '../sqlite/port.js';
import type { RetryPolicy } from '../transport.js';
import {
  CHANGING_METHODS,
  toWireError,
  type FromWorker,
  type HostEvent,
  type OnChannel,
  type RemoteMethod,
  type SqlStatement,
  type ToWorker,
  type WireError,
  type WorkerOpenConfig,
  type WorkerRole,
  type WorkerStartOptions,
} from './protocol.js';

/** What the app's worker entry fixes once: its local schema and how the client runs. */
export interface WorkerHostOptions {
  /** Idempotent DDL of the app's own tables (CREATE TABLE IF NOT EXISTS …), run before openClient. */
  readonly schemaSql: string;
  readonly tables: readonly TableConfig[];
  /**
   * How the owner hears of other devices' commits (ClientConfig.watch): `websocket` (push
   * notifications, falling back to long polls by itself; the default), `long-poll` or `off`.
   */
  readonly watch?: 'off' | 'long-poll' | 'websocket';
  /** Where the push notifications are (ClientConfig.webSocketUrl): in AWS the stack's `WebSocketUrl`. */
  readonly webSocketUrl?: string;
  /** What a push does with a rejected bundle (ClientConfig.onRejected); default `hold`. */
  readonly onRejected?: 'hold' | 'quarantine';
  readonly retry?: RetryPolicy;
  readonly pageRows?: number;
  /** Opens the database; defaults to OPFS (openOpfsSqlite). */
  readonly openDb?: (dbName: string) => Promise<SqliteDb>;
  /** How long the new owner keeps retrying to open the database while the old one closes. */
  readonly openTimeoutMs?: number;
}

interface Call {
  readonly from: string;
  readonly id: number;
  readonly method: RemoteMethod;
  readonly args: readonly unknown[];
}

/** The part of a dedicated worker's global scope this file uses. */
interface WorkerScope {
  postMessage(message: FromWorker): void;
  addEventListener(type: 'message', listener: (event: MessageEvent<ToWorker>) => void): void;
}

const ownerChanged: WireError = { code: 'owner_changed', message: 'the tab that owned the database went away before answering', name: 'WorkerCallError' };
const aborted: WireError = { code: 'aborted', message: 'the call was aborted', name: 'AbortError' };
const closed: WireError = { code: 'closed', message: 'the sync worker is closed', name: 'WorkerCallError' };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Opens with retries: right after a tab closes, its access handles can take a moment to go. */
async function openWithRetry(open: () => Promise<SqliteDb>, timeoutMs: number): Promise<SqliteDb> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await open();
    } catch (error) {
      if (Date.now() >= deadline) throw error;
      await sleep(Math.min(1000, 50 * 2 ** attempt));
    }
  }
}

/**
 * Runs one method against the open client and database. The app's SQL goes through `client.db`,
 * so its writes reach the sync loop (a sync after a quiet moment) and its key checks.
 */
async function execute(client: SyncClient, call: Call, signal: AbortSignal, loop: { start(options: WorkerStartOptions): void }): Promise<unknown> {
  const db = client.db;
  const [a, b] = call.args;
  switch (call.method) {
    case 'query':
      return db.query(a as string, (b ?? []) as []);
    case 'tablesRead':
      return db.tablesRead(a as string);
    case 'run':
      return db.run(a as string, (b ?? []) as []);
    case 'exec':
      return db.exec(a as string);
    case 'transaction':
      return db.transaction(async (tx) => {
        const changes: number[] = [];
        for (const s of a as readonly SqlStatement[]) changes.push((await tx.run(s.sql, s.params ?? [])).changes);
        return changes;
      });
    case 'attach':
      return client.attach(a as string);
    case 'watch':
      return client.watch(signal);
    case 'sync':
      return client.sync();
    case 'pushPending':
      return client.pushPending();
    case 'pullToStable':
      return client.pullToStable();
    case 'rebuild':
      return client.rebuild((a ?? {}) as { rotateSource?: SourceReplacementReason });
    case 'discardRejected':
      return client.discardRejected();
    case 'quarantineRejected':
      return client.quarantineRejected();
    case 'quarantined':
      return client.quarantined();
    case 'requeueQuarantined':
      return client.requeueQuarantined(a as number, b as Readonly<Record<string, SqlValue>> | undefined);
    case 'dropQuarantined':
      return client.dropQuarantined(a as number);
    case 'conflicts':
      return client.conflicts();
    case 'dismissConflicts':
      return client.dismissConflicts(a as readonly number[] | undefined);
    case 'start':
      return loop.start((a ?? {}) as WorkerStartOptions);
    case 'stop':
      return client.stop();
    case 'requestSync':
      return client.requestSync();
    case 'detach':
      return client.detach();
    case 'pendingStatus':
      return client.pendingStatus();
  }
}

/**
 * How long the worker waits for its page's fresh token (an identity provider's round trip) before
 * failing the request that needed it.
 */
const TOKEN_REFRESH_TIMEOUT_MS = 30_000;

/** Installs the host in this dedicated worker; the main thread drives it with worker-client.ts. */
export function hostSyncWorker(options: WorkerHostOptions): void {
  const scope = globalThis as unknown as WorkerScope;
  const workerId = crypto.randomUUID();
  let config: WorkerOpenConfig | undefined;
  let token = '';
  let role: WorkerRole = 'starting';
  let channel: BroadcastChannel | undefined;
  /** Follower: the owner calls are forwarded to. */
  let ownerId: string | undefined;
  /** Owner: the open client, or why opening failed. */
  let client: SyncClient | undefined;
  let openFailure: WireError | undefined;
  /** Owner: ends the lock callback, which releases the lock. */
  let releaseLock: (() => void) | undefined;
  let isClosed = false;
  /** Calls waiting until this worker knows who owns the database. */
  const queued: Call[] = [];
  /** Follower: ids of this tab's calls in flight at an owner, with the owner they went to. */
  const forwarded = new Map<number, string>();
  /** Owner: abort controllers of running calls (watch), by `from:id`. */
  const running = new Map<string, AbortController>();
  /**
   * The sync loop's options once any tab started it: the owner runs the loop, and a tab that
   * takes over starts it again with the same options.
   */
  let loopOptions: WorkerStartOptions | undefined;
  const loop = {
    start(options: WorkerStartOptions): void {
      loopOptions = options;
      client?.start(options);
    },
  };

  const toMain = (message: FromWorker) => scope.postMessage(message);
  /** Owner: this tab's live queries, run after each commit. */
  const prefetch = new LivePrefetch();

  /** Token refreshes asked of this tab's page and not answered yet. */
  const refreshes = new Map<number, { resolve: (token: string) => void; reject: (error: Error) => void }>();
  let nextRefresh = 1;

  /**
   * A fresh token from the page (its `refreshToken`), after the server refused this one: only the
   * page can reach the app's identity provider. A page that cannot refresh leaves the token as it
   * is (the request's second 401 is then the answer); one that fails, or never answers, fails the
   * request as the provider's failure.
   */
  function refreshedToken(): Promise<string> {
    const id = nextRefresh++;
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        refreshes.delete(id);
        reject(new Error(`the page gave no fresh token within ${TOKEN_REFRESH_TIMEOUT_MS} ms`));
      }, TOKEN_REFRESH_TIMEOUT_MS);
      const settle = () => {
        clearTimeout(timer);
        refreshes.delete(id);
      };
      refreshes.set(id, { resolve: (fresh) => (settle(), resolve(fresh)), reject: (error) => (settle(), reject(error)) });
      toMain({ t: 'token-refresh', id });
    });
  }
  const toChannel = (message: OnChannel) => channel?.postMessage(message);

  function reply(from: string, id: number, outcome: { value: unknown } | { error: WireError }): void {
    if (from === workerId) toMain('error' in outcome ? { t: 'error', id, error: outcome.error } : { t: 'result', id, value: outcome.value });
    else toChannel('error' in outcome ? { t: 'error', to: from, id, error: outcome.error } : { t: 'result', to: from, id, value: outcome.value });
  }

  function emit(event: HostEvent): void {
    toMain({ t: 'event', event });
    toChannel({ t: 'event', event });
  }

  function setRole(next: WorkerRole): void {
    role = next;
    toMain({ t: 'role', role });
  }

  /** Fails every call forwarded to an owner other than `current`. */
  function dropForwarded(current: string | undefined): void {
    for (const [id, owner] of forwarded) {
      if (owner === current) continue;
      forwarded.delete(id);
      toMain({ t: 'error', id, error: ownerChanged });
    }
  }

  async function serve(call: Call): Promise<void> {
    if (!client) return reply(call.from, call.id, { error: openFailure ?? closed });
    const controller = new AbortController();
    const key = `${call.from}:${call.id}`;
    running.set(key, controller);
    try {
      const value = await execute(client, call, controller.signal, loop);
      reply(call.from, call.id, { value });
      if (CHANGING_METHODS.has(call.method)) emit({ type: 'change', method: call.method });
    } catch (error) {
      reply(call.from, call.id, { error: toWireError(error) });
    } finally {
      running.delete(key);
    }
  }

  function dispatch(call: Call): void {
    if (isClosed) return reply(call.from, call.id, { error: closed });
    if (role === 'owner' && (client || openFailure)) {
      void serve(call);
    } else if (role === 'follower' && ownerId && call.from === workerId) {
      forwarded.set(call.id, ownerId);
      toChannel({ t: 'call', from: workerId, to: ownerId, id: call.id, method: call.method, args: call.args });
    } else {
      queued.push(call);
    }
  }

  function flush(): void {
    for (const call of queued.splice(0)) dispatch(call);
  }

  async function becomeOwner(open: WorkerOpenConfig): Promise<void> {
    role = 'owner';
    dropForwarded(undefined);
    try {
      const openDb = options.openDb ?? ((name: string) => openOpfsSqlite(name));
      const db = await openWithRetry(() => openDb(open.dbName), options.openTimeoutMs ?? 10_000);
      await db.exec(options.schemaSql);
      const clientConfig: ClientConfig = {
        baseUrl: open.baseUrl,
        getToken: (request) => (request?.refresh ? refreshedToken() : token),
        db,
        tables: options.tables,
        watch: options.watch ?? 'websocket',
        ...(options.webSocketUrl ? { webSocketUrl: options.webSocketUrl } : {}),
        ...(options.onRejected ? { onRejected: options.onRejected } : {}),
        onProgress: (progress: Progress) => emit({ type: 'progress', progress }),
        ...(options.retry ? { retry: options.retry } : {}),
        ...(options.pageRows ? { pageRows: options.pageRows } : {}),
      };
      client = await openClient(clientConfig);
      client.onStatus((status) => emit({ type: 'status', status }));
      // Every tab's live queries re-run from these (client-web/live-query.ts). This tab's own get
      // the rows of its watched queries with them (live-prefetch.ts), read right behind the commit.
      const appDb = client.db;
      const announce = (tables: ReadonlySet<string>, prefetched: PrefetchedRows[]) => toMain({ t: 'event', event: { type: 'tables', tables: [...tables], prefetched } });
      client.onTablesChanged((tables) => {
        toChannel({ t: 'event', event: { type: 'tables', tables: [...tables] } });
        prefetch.committed(appDb, tables, announce);
      });
      if (loopOptions) client.start(loopOptions);
    } catch (error) {
      openFailure = { ...toWireError(error), code: 'open_failed' };
    }
    setRole('owner');
    toChannel({ t: 'owner', ownerId: workerId });
    flush();
  }

  function onChannel(message: OnChannel): void {
    switch (message.t) {
      case 'hello':
        if (role === 'owner' && (client || openFailure)) toChannel({ t: 'owner', ownerId: workerId });
        return;
      case 'owner':
        if (role === 'owner' || message.ownerId === ownerId) return;
        ownerId = message.ownerId;
        dropForwarded(ownerId);
        setRole('follower');
        flush();
        return;
      case 'call':
        if (message.to === workerId) dispatch(message);
        return;
      case 'abort':
        if (message.to === workerId) running.get(`${message.from}:${message.id}`)?.abort();
        return;
      case 'result':
      case 'error':
        if (message.to !== workerId || !forwarded.delete(message.id)) return;
        toMain(message.t === 'result' ? { t: 'result', id: message.id, value: message.value } : { t: 'error', id: message.id, error: message.error });
        return;
      case 'event':
        if (role === 'follower') toMain({ t: 'event', event: message.event });
        return;
    }
  }

  async function close(id: number): Promise<void> {
    isClosed = true;
    for (const controller of running.values()) controller.abort();
    dropForwarded(undefined);
    for (const call of queued.splice(0)) reply(call.from, call.id, { error: closed });
    try {
      if (client) {
        const db = client.db;
        await client.close();
        await db.close().catch(() => undefined);
      }
    } finally {
      client = undefined;
      channel?.close();
      releaseLock?.();
      toMain({ t: 'result', id, value: undefined });
    }
  }

  scope.addEventListener('message', (event: MessageEvent<ToWorker>) => {
    const message = event.data;
    switch (message.t) {
      case 'open': {
        if (config) return;
        config = message.config;
        token = message.config.token;
        const open = message.config;
        channel = new BroadcastChannel(`lockstep:${open.dbName}`);
        channel.onmessage = (e: MessageEvent<OnChannel>) => onChannel(e.data);
        toChannel({ t: 'hello', from: workerId });
        // The callback holds the lock until close(); if this worker ends first, so does the lock.
        void navigator.locks.request(`lockstep:${open.dbName}`, async () => {
          if (isClosed) return;
          await becomeOwner(open);
          await new Promise<void>((resolve) => (releaseLock = resolve));
        });
        return;
      }
      case 'token':
        token = message.token;
        return;
      case 'token-refreshed': {
        const waiting = refreshes.get(message.id);
        if (message.error !== undefined) waiting?.reject(new Error(message.error));
        else {
          if (message.token !== null) token = message.token;
          waiting?.resolve(token);
        }
        return;
      }
      case 'call':
        // This tab asked for the loop: should it take the database over later, it runs the loop too.
        if (message.method === 'start') loopOptions = (message.args[0] ?? {}) as WorkerStartOptions;
        if (message.method === 'stop') loopOptions = undefined;
        dispatch({ from: workerId, id: message.id, method: message.method, args: message.args });
        return;
      case 'abort': {
        const waiting = queued.findIndex((call) => call.from === workerId && call.id === message.id);
        if (waiting >= 0) {
          queued.splice(waiting, 1);
          toMain({ t: 'error', id: message.id, error: aborted });
        } else if (role === 'owner') running.get(`${workerId}:${message.id}`)?.abort();
        else if (forwarded.has(message.id)) toChannel({ t: 'abort', from: workerId, to: forwarded.get(message.id) as string, id: message.id });
        return;
      }
      case 'live-watch':
        prefetch.watch(message.id, message.sql, message.params);
        return;
      case 'live-unwatch':
        prefetch.unwatch(message.id);
        return;
      case 'close':
        void close(message.id);
        return;
    }
  });
}
