/**
 * The main-thread side of the sync worker (see worker-host.ts for the picture): a typed proxy
 * with the SyncClient's method names, each answering a promise, plus the app's own SQL. Errors
 * from the worker are rethrown as `WorkerCallError` with the original `code`; progress, data
 * changes and the tab's role (owner of the database or follower of another tab) are events.
 */
import type {
  AttachResult,
  DetachResult,
  PendingStatus,
  Progress,
  PullResult,
  PushResult,
  RebuildResult,
  SyncResult,
  WatchResult,
} from '../api.js';
import type { SqlRow, SqlValue } from '../sqlite/port.js';
import type { FromWorker, RemoteMethod, SqlStatement, ToWorker, WireError, WorkerOpenConfig, WorkerRole } from './protocol.js';

/** A failure in the worker (or at the owning tab), with the code the client gave it. */
export class WorkerCallError extends Error {
  override readonly name = 'WorkerCallError';
  /** e.g. `network_error`, `push_rejected`, `owner_changed`, `open_failed`, `closed`, `aborted`. */
  readonly code: string;
  /** The HTTP status when the failure came from the server. */
  readonly status: number | undefined;
  /** The class name of the original error. */
  readonly remoteName: string;
  constructor(error: WireError) {
    super(error.message);
    this.code = error.code;
    this.status = error.status;
    this.remoteName = error.name;
  }
}

export interface WorkerClientEvents {
  progress: Progress;
  /** The database may have changed: `method` succeeded in some tab. */
  change: { readonly method: RemoteMethod };
  role: WorkerRole;
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
  rebuild(): Promise<RebuildResult>;
  discardRejected(): Promise<{ readonly discardedRows: number }>;
  detach(): Promise<DetachResult>;
  pendingStatus(): Promise<PendingStatus>;
  watch(signal?: AbortSignal): Promise<WatchResult>;
  /** The app's own reads. */
  query<T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  /** The app's own writes, captured by the client's triggers like any local write. */
  run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }>;
  exec(sql: string): Promise<void>;
  /** Runs the statements in one transaction; answers the changed rows of each. */
  transaction(statements: readonly SqlStatement[]): Promise<number[]>;
  /** Closes the database (another tab may take it over) and ends the worker. */
  close(): Promise<void>;
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: WorkerCallError): void;
}

/**
 * Opens the database in `worker` (a module worker whose entry calls hostSyncWorker). Answers at
 * once: calls made before the worker knows its role wait there.
 */
export function connectSyncWorker(worker: Worker, config: WorkerOpenConfig): WorkerSyncClient {
  let nextId = 1;
  let role: WorkerRole = 'starting';
  let ended: WireError | undefined;
  const pending = new Map<number, Pending>();
  const listeners: { [K in keyof WorkerClientEvents]: Set<(value: WorkerClientEvents[K]) => void> } = {
    progress: new Set(),
    change: new Set(),
    role: new Set(),
  };

  const post = (message: ToWorker) => worker.postMessage(message);

  function fire<K extends keyof WorkerClientEvents>(type: K, value: WorkerClientEvents[K]): void {
    for (const listener of listeners[type]) listener(value);
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
        return;
      case 'event':
        if (message.event.type === 'progress') fire('progress', message.event.progress);
        else fire('change', { method: message.event.method });
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
    rebuild: () => call('rebuild', []),
    discardRejected: () => call('discardRejected', []),
    detach: () => call('detach', []),
    pendingStatus: () => call('pendingStatus', []),
    watch: (signal) => call('watch', [], signal),
    query: (sql, params = []) => call('query', [sql, params]),
    run: (sql, params = []) => call('run', [sql, params]),
    exec: (sql) => call('exec', [sql]),
    transaction: (statements) => call('transaction', [statements]),
    async close() {
      if (ended) return;
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
