/**
 * The main-thread side of the sync worker (see worker-host.ts for the picture): a typed proxy
 * with the SyncClient's method names, each answering a promise, plus the app's own SQL. Errors
 * from the worker are rethrown as `WorkerCallError` with the original `code`; progress, data
 * changes and the tab's role (owner of the database or follower of another tab) are events.
 */
import type {
  AttachResult,
  ConflictRecord,
  DetachResult,
  PendingStatus,
  Progress,
  PullResult,
  PushResult,
  QuarantinedRow,
  RebuildResult,
  SyncResult,
  SyncStatus,
  WatchResult,
} from '../api.js';
import type { SourceReplacementReason } from '../../core/protocol/read-path.js';
import type { SqlRow, SqlValue } from '../sqlite/port.js';
import { LiveQueries, type LiveQuery, type LiveQueryResult, type LiveSource, type PrefetchedRows } from '../live-query.js';
import type { SyncErrorCode } from '../errors.js';
import type { FromWorker, RemoteMethod, SqlStatement, ToWorker, WireError, WorkerErrorCode, WorkerOpenConfig, WorkerRole, WorkerStartOptions } from './protocol.js';

/** A failure in the worker (or at the owning tab), with the code the client gave it. */
export class WorkerCallError extends Error {
  override readonly name = 'WorkerCallError';
  /** The client's code (e.g. `network_error`, `source_recovery_required`), or the worker's own (`owner_changed`, `open_failed`, `closed`). */
  readonly code: SyncErrorCode | WorkerErrorCode;
  /** The HTTP status when the failure came from the server. */
  readonly status: number | undefined;
  /** The class name of the original error. */
  readonly remoteName: string;
  /** Structured details the original error carried (ClientError.details), when any. */
  readonly details: unknown;
  constructor(error: WireError) {
    super(error.message);
    this.code = error.code;
    this.status = error.status;
    this.remoteName = error.name;
    this.details = error.details;
  }
}

export interface WorkerClientEvents {
  progress: Progress;
  /** The database may have changed: `method` succeeded in some tab. */
  change: { readonly method: RemoteMethod };
  role: WorkerRole;
  /** The sync loop's status (from the tab that owns the database), see `start()`. */
  status: SyncStatus;
  /**
   * A transaction committed (in whichever tab's call, or the owner's sync) and wrote these tables;
   * a burst of commits may come as one event with every table they wrote.
   */
  tables: ReadonlySet<string>;
}

/** The sync client as seen from the main thread. */
export interface WorkerSyncClient {
  /** `owner` when this tab holds the database, `follower` when another tab does. */
  readonly role: WorkerRole;
  on<K extends keyof WorkerClientEvents>(type: K, listener: (value: WorkerClientEvents[K]) => void): () => void;
  /** Replaces the bearer token the worker sends. */
  setToken(token: string): void;
  attach(userId: string): Promise<AttachResult>;
  sync(): Promise<SyncResult>;
  pushPending(): Promise<PushResult>;
  pullToStable(): Promise<PullResult>;
  rebuild(options?: { readonly rotateSource?: SourceReplacementReason }): Promise<RebuildResult>;
  discardRejected(): Promise<{ readonly discardedRows: number }>;
  quarantineRejected(): Promise<{ readonly quarantinedRows: number }>;
  quarantined(): Promise<QuarantinedRow[]>;
  requeueQuarantined(id: number, fix?: Readonly<Record<string, SqlValue>>): Promise<void>;
  dropQuarantined(id: number): Promise<void>;
  conflicts(): Promise<ConflictRecord[]>;
  dismissConflicts(ids?: readonly number[]): Promise<void>;
  detach(): Promise<DetachResult>;
  pendingStatus(): Promise<PendingStatus>;
  watch(signal?: AbortSignal): Promise<WatchResult>;
  /**
   * Starts the sync loop (SyncClient.start) in the tab that owns the database, and again in
   * whichever tab takes over; status arrives as `status` events in every tab. While started, this
   * tab's becoming visible asks for a sync.
   */
  start(options?: WorkerStartOptions): Promise<void>;
  /** Stops the sync loop. */
  stop(): Promise<void>;
  /** Asks the loop for a sync now. */
  requestSync(): Promise<void>;
  /** The last status the loop reported, or null before the first. */
  readonly status: SyncStatus | null;
  /** Subscribes to the loop's status (called at once with the last one, if any), like SyncClient.onStatus. */
  onStatus(listener: (status: SyncStatus) => void): () => void;
  /** The app's own reads. */
  query<T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  /** The app's own writes, captured by the client's triggers like any local write. */
  run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }>;
  exec(sql: string): Promise<void>;
  /** Runs the statements in one transaction; answers the changed rows of each. */
  transaction(statements: readonly SqlStatement[]): Promise<number[]>;
  /** The tables a statement reads, as SQLite reports them (SqliteDb.tablesRead). */
  tablesRead(sql: string): Promise<string[]>;
  /**
   * A query kept up to date in this tab (SyncClient.liveQuery): it runs through the owner, and
   * again whenever a transaction in any tab or the owner's sync wrote a table it reads. While this
   * tab's worker owns the database, it reads the query itself right after such a commit and sends
   * the rows with the commit's news (no round trip). When another tab takes the database over,
   * every live query runs again.
   */
  liveQuery<T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[], listener?: (result: LiveQueryResult<T>) => void): LiveQuery<T>;
  /** Closes the database (another tab may take it over) and ends the worker. */
  close(): Promise<void>;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: WorkerCallError): void;
}

/** What only the page can do for its worker. */
export interface WorkerClientOptions {
  /**
   * A fresh token, from the app's identity provider, when the server refused the worker's (a
   * 401): the request is then sent once more with it, as `getToken({ refresh: true })` does for
   * `openClient`. It also replaces the worker's token for later requests. A provider that throws
   * fails that request with `authentication_failed`. Without it the worker keeps its token until
   * `setToken`.
   */
  readonly refreshToken?: () => string | Promise<string>;
}

/**
 * Opens the database in `worker` (a module worker whose entry calls hostSyncWorker). Answers at
 * once: calls made before the worker knows its role wait there.
 */
export function connectSyncWorker(worker: Worker, config: WorkerOpenConfig, options: WorkerClientOptions = {}): WorkerSyncClient {
  let nextId = 1;
  let role: WorkerRole = 'starting';
  let status: SyncStatus | null = null;
  let stopVisibility: (() => void) | undefined;
  let ended: WireError | undefined;
  const pending = new Map<number, Pending>();
  const listeners: { [K in keyof WorkerClientEvents]: Set<(value: WorkerClientEvents[K]) => void> } = {
    progress: new Set(),
    change: new Set(),
    role: new Set(),
    status: new Set(),
    tables: new Set(),
  };

  const post = (message: ToWorker) => worker.postMessage(message);

  async function answerRefresh(id: number): Promise<void> {
    if (!options.refreshToken) return post({ t: 'token-refreshed', id, token: null });
    try {
      post({ t: 'token-refreshed', id, token: await options.refreshToken() });
    } catch (error) {
      post({ t: 'token-refreshed', id, token: null, error: error instanceof Error ? error.message : String(error) });
    }
  }

  function fire<K extends keyof WorkerClientEvents>(type: K, value: WorkerClientEvents[K]): void {
    for (const listener of listeners[type]) listener(value);
  }

  function tablesChanged(tables: ReadonlySet<string>, prefetched: readonly PrefetchedRows[] | undefined): void {
    for (const listener of liveListeners) listener(tables, prefetched);
    fire('tables', tables);
  }

  function fail(error: WireError): void {
    ended = error;
    for (const [id, p] of pending) {
      pending.delete(id);
      p.reject(new WorkerCallError(error));
    }
  }

  worker.addEventListener('message', (event: MessageEvent<FromWorker>) => {
    const message = event.data;
    switch (message.t) {
      case 'role':
        role = message.role;
        fire('role', role);
        // A new owner: commits made meanwhile were announced to nobody here.
        live.refreshAll();
        return;
      case 'event': {
        const event = message.event;
        if (event.type === 'progress') fire('progress', event.progress);
        else if (event.type === 'status') fire('status', (status = event.status));
        else if (event.type === 'tables') tablesChanged(new Set(event.tables), event.prefetched);
        else fire('change', { method: event.method });
        return;
      }
      case 'token-refresh':
        void answerRefresh(message.id);
        return;
      case 'result':
      case 'error': {
        const p = pending.get(message.id);
        if (!p) return;
        pending.delete(message.id);
        if (message.t === 'result') p.resolve(message.value);
        else p.reject(new WorkerCallError(message.error));
        return;
      }
    }
  });
  worker.addEventListener('error', (event: ErrorEvent) => {
    fail({ code: 'worker_failed', message: `the sync worker failed: ${event.message}`, name: 'Error' });
  });

  function call<T>(method: RemoteMethod, args: readonly unknown[], signal?: AbortSignal): Promise<T> {
    if (ended) return Promise.reject(new WorkerCallError(ended));
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      if (signal) {
        if (signal.aborted) return reject(new WorkerCallError({ code: 'aborted', message: 'the call was aborted', name: 'AbortError' }));
        signal.addEventListener('abort', () => post({ t: 'abort', id }), { once: true });
      }
      post({ t: 'call', id, method, args });
    });
  }

  // The worker runs this tab's live queries after each commit while it owns the database, and
  // sends their rows with the commit's tables: no round trip per re-run (live-prefetch.ts).
  const liveListeners = new Set<Parameters<LiveSource['onTablesChanged']>[0]>();
  const live = new LiveQueries({
    query: (sql, params) => call('query', [sql, params]),
    tablesRead: (sql) => call('tablesRead', [sql]),
    onTablesChanged: (listener) => {
      liveListeners.add(listener);
      return () => liveListeners.delete(listener);
    },
    watchQuery: (id, sql, params) => post({ t: 'live-watch', id, sql, params }),
    unwatchQuery: (id) => post({ t: 'live-unwatch', id }),
  });

  post({ t: 'open', config });

  return {
    get role() {
      return role;
    },
    on(type, listener) {
      listeners[type].add(listener);
      return () => listeners[type].delete(listener);
    },
    setToken: (token) => post({ t: 'token', token }),
    attach: (userId) => call('attach', [userId]),
    sync: () => call('sync', []),
    pushPending: () => call('pushPending', []),
    pullToStable: () => call('pullToStable', []),
    rebuild: (options = {}) => call('rebuild', [options]),
    discardRejected: () => call('discardRejected', []),
    quarantineRejected: () => call('quarantineRejected', []),
    quarantined: () => call('quarantined', []),
    requeueQuarantined: (id, fix) => call('requeueQuarantined', fix === undefined ? [id] : [id, fix]),
    dropQuarantined: (id) => call('dropQuarantined', [id]),
    conflicts: () => call('conflicts', []),
    dismissConflicts: (ids) => call('dismissConflicts', ids === undefined ? [] : [ids]),
    detach: () => call('detach', []),
    pendingStatus: () => call('pendingStatus', []),
    watch: (signal) => call('watch', [], signal),
    get status() {
      return status;
    },
    onStatus(listener) {
      listeners.status.add(listener);
      if (status) listener(status);
      return () => listeners.status.delete(listener);
    },
    async start(options = {}) {
      await call('start', [options]);
      // A worker has no document: this tab tells it when the app is visible again, and when the
      // network is back (a worker's own `online` event is not sent by every browser or emulation).
      const doc = (globalThis as { document?: Document }).document;
      if (doc && !stopVisibility) {
        const nudge = () => void call('requestSync', []).catch(() => undefined);
        const onVisible = () => doc.visibilityState === 'visible' && nudge();
        doc.addEventListener('visibilitychange', onVisible);
        globalThis.addEventListener('online', nudge);
        stopVisibility = () => {
          doc.removeEventListener('visibilitychange', onVisible);
          globalThis.removeEventListener('online', nudge);
        };
      }
    },
    async stop() {
      stopVisibility?.();
      stopVisibility = undefined;
      await call('stop', []);
    },
    requestSync: () => call('requestSync', []),
    query: (sql, params = []) => call('query', [sql, params]),
    run: (sql, params = []) => call('run', [sql, params]),
    exec: (sql) => call('exec', [sql]),
    transaction: (statements) => call('transaction', [statements]),
    tablesRead: (sql) => call('tablesRead', [sql]),
    liveQuery: (sql, params = [], listener) => live.liveQuery(sql, params, listener),
    async close() {
      if (ended) return;
      live.closeAll();
      stopVisibility?.();
      const id = nextId++;
      const done = new Promise<void>((resolve) => pending.set(id, { resolve: () => resolve(), reject: () => resolve() }));
      post({ t: 'close', id });
      // A worker that does not answer within the timeout is ended anyway; the lock goes with it.
      await Promise.race([done, new Promise((resolve) => setTimeout(resolve, 3000))]);
      fail({ code: 'closed', message: 'the sync worker is closed', name: 'WorkerCallError' });
      worker.terminate();
    },
  };
}
