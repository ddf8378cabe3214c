/**
 * Messages between a tab's main thread and its sync worker, and between the workers of several
 * tabs (over a BroadcastChannel). Everything here is structured-clone data: BLOBs travel as
 * Uint8Array, errors as `{code, message}`.
 */
import type { Progress, StartOptions, SyncStatus } from '../api.js';
import { isSyncErrorCode, type SyncErrorCode } from '../errors.js';
import type { PrefetchedRows } from '../live-query.js';
import type { SqlValue } from '../sqlite/port.js';

/** What the main thread tells its worker when it opens the database. */
export interface WorkerOpenConfig {
  /** Name of the local database; also names the lock and the channel shared by the tabs. */
  readonly dbName: string;
  /** Origin of the sync API. */
  readonly baseUrl: string;
  /** Bearer token; replace it with `setToken` when it is refreshed. */
  readonly token: string;
}

/** One statement of `transaction()`. */
export interface SqlStatement {
  readonly sql: string;
  readonly params?: readonly SqlValue[];
}

/** The methods a worker serves: every SyncClient method by name, plus the app's own SQL. */
export const REMOTE_METHODS = [
  'attach',
  'sync',
  'pushPending',
  'pullToStable',
  'rebuild',
  'discardRejected',
  'quarantineRejected',
  'quarantined',
  'requeueQuarantined',
  'dropQuarantined',
  'conflicts',
  'dismissConflicts',
  'detach',
  'pendingStatus',
  'watch',
  'start',
  'stop',
  'requestSync',
  'query',
  'tablesRead',
  'run',
  'exec',
  'transaction',
] as const;
export type RemoteMethod = (typeof REMOTE_METHODS)[number];

/** Methods that change no data (reads, and the loop's controls): every other method may. */
const READ_ONLY_METHODS: ReadonlySet<RemoteMethod> = new Set(['pendingStatus', 'watch', 'query', 'tablesRead', 'quarantined', 'conflicts', 'start', 'stop', 'requestSync']);

/**
 * The sync loop's options as a worker takes them: structured-clone data only, so no environment
 * (a worker listens to its own `online`/`offline`; the main thread forwards visibility).
 */
export type WorkerStartOptions = Omit<StartOptions, 'environment'>;

/** Methods after which the owner announces a `change`, so every tab can re-read its data. */
export const CHANGING_METHODS: ReadonlySet<RemoteMethod> = new Set(REMOTE_METHODS.filter((m) => !READ_ONLY_METHODS.has(m)));

/** Failures of the worker machinery itself (on top of the client's SyncErrorCode). */
export const WorkerErrorCode = {
  /** The tab that owned the database went away before answering; the call's outcome is unknown. */
  ownerChanged: 'owner_changed',
  /** The owner could not open the database or the client (the first open needs the server). */
  openFailed: 'open_failed',
  /** The worker is closed. */
  closed: 'closed',
  /** The worker script failed (it did not load, or threw). */
  workerFailed: 'worker_failed',
  /** Something without a code was thrown in the worker (a SQLite error, a bug). */
  workerError: 'worker_error',
} as const;
export type WorkerErrorCode = (typeof WorkerErrorCode)[keyof typeof WorkerErrorCode];

/** A failure carried across a thread boundary. */
export interface WireError {
  readonly code: SyncErrorCode | WorkerErrorCode;
  readonly message: string;
  readonly name: string;
  readonly status?: number;
  /** Structured details of the failure (e.g. `quarantine_parent_missing`'s missing rows). */
  readonly details?: unknown;
}

/** Which tab holds the database: this one (`owner`) or another (`follower`). */
export type WorkerRole = 'starting' | 'owner' | 'follower';

/** Events the owner sends to every tab. */
export type HostEvent =
  | { readonly type: 'progress'; readonly progress: Progress }
  /** The database may have changed: `method` succeeded (in any tab). */
  | { readonly type: 'change'; readonly method: RemoteMethod }
  /**
   * A transaction committed in the owner's database and wrote these tables (live queries re-run).
   * To the owner's own tab, with the rows of its watched queries read after the commit; commits
   * made while such a read was out come together, as one event with every table they wrote.
   */
  | { readonly type: 'tables'; readonly tables: readonly string[]; readonly prefetched?: readonly PrefetchedRows[] }
  /** The owner's sync loop reported its status. */
  | { readonly type: 'status'; readonly status: SyncStatus };

/** Main thread → its own worker. */
export type ToWorker =
  | { readonly t: 'open'; readonly config: WorkerOpenConfig }
  | { readonly t: 'token'; readonly token: string }
  /**
   * The answer to a worker's `token-refresh`: the page's fresh token, or `token: null` when the page
   * has no way to refresh (the worker keeps its token), or the provider's failure.
   */
  | { readonly t: 'token-refreshed'; readonly id: number; readonly token: string | null; readonly error?: string }
  | { readonly t: 'call'; readonly id: number; readonly method: RemoteMethod; readonly args: readonly unknown[] }
  | { readonly t: 'abort'; readonly id: number }
  /** A live query of this tab the worker runs after each commit while it owns the database (live-prefetch.ts). */
  | { readonly t: 'live-watch'; readonly id: number; readonly sql: string; readonly params: readonly SqlValue[] }
  | { readonly t: 'live-unwatch'; readonly id: number }
  | { readonly t: 'close'; readonly id: number };

/** A worker → its main thread. */
export type FromWorker =
  | { readonly t: 'role'; readonly role: WorkerRole }
  | { readonly t: 'result'; readonly id: number; readonly value: unknown }
  | { readonly t: 'error'; readonly id: number; readonly error: WireError }
  | { readonly t: 'event'; readonly event: HostEvent }
  /** The server refused the token (401): the worker asks its page for a fresh one, once per request. */
  | { readonly t: 'token-refresh'; readonly id: number };

/** Between the workers of the tabs that share one database. */
export type OnChannel =
  | { readonly t: 'hello'; readonly from: string }
  | { readonly t: 'owner'; readonly ownerId: string }
  | { readonly t: 'call'; readonly from: string; readonly to: string; readonly id: number; readonly method: RemoteMethod; readonly args: readonly unknown[] }
  | { readonly t: 'abort'; readonly from: string; readonly to: string; readonly id: number }
  | { readonly t: 'result'; readonly to: string; readonly id: number; readonly value: unknown }
  | { readonly t: 'error'; readonly to: string; readonly id: number; readonly error: WireError }
  | { readonly t: 'event'; readonly event: HostEvent };

/** Turns anything thrown into a WireError, keeping a `code` when the error has one. */
export function toWireError(error: unknown): WireError {
  if (error instanceof Error) {
    const e = error as Error & { code?: unknown; status?: unknown; details?: unknown };
    let details: unknown;
    try {
      // Only what survives a structured clone crosses the thread boundary.
      details = e.details === undefined ? undefined : structuredClone(e.details);
    } catch {
      details = undefined;
    }
    return {
      code: isSyncErrorCode(e.code) ? e.code : 'worker_error',
      message: e.message,
      name: e.name,
      ...(typeof e.status === 'number' ? { status: e.status } : {}),
      ...(details === undefined ? {} : { details }),
    };
  }
  return { code: 'worker_error', message: String(error), name: 'Error' };
}
