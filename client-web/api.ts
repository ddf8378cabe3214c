/**
 * The public shapes of the client: configuration, results and progress. Outcomes a caller must
 * handle (a blocked detach, a retry_later attach, a rejected bundle) are results, not errors;
 * failures are `ClientError` (client-web/errors.ts) with a stable `code`.
 */
import { type SourceReplacementReason } from '../core/protocol/read-path.js';
import { type SqliteDb } from './sqlite/port.js';
import { type RetryPolicy } from './transport.js';
import { type WebSocketFactory } from './watch-socket.js';

/** A row as the application stores it locally, by column name. */
export type LocalRow = Record<string, unknown>;

/** What a conflict resolver sees: the frozen local change and the server's row. */
export interface ConflictInput {
  readonly schema: string;
  readonly table: string;
  /** The key as a wire string (dashed UUID or text). */
  readonly key: string;
  readonly localOp: 'INSERT' | 'UPDATE' | 'DELETE';
  /** The local row's wire payload, or null for a local delete. */
  readonly localPayload: Record<string, unknown> | null;
  readonly serverRowVersion: number;
  readonly serverRowDeleted: boolean;
  /** The server row's wire payload, or null when the server row is deleted or never existed. */
  readonly serverPayload: Record<string, unknown> | null;
}

/**
 * A resolver's answer: `server` (the default) takes the server's row and drops the local change;
 * `local` pushes the local change again on top of the server's version; `merged` pushes the given
 * wire payload instead (a full row, or null to delete).
 */
export type ConflictResolution =
  | { readonly keep: 'server' }
  | { readonly keep: 'local' }
  | { readonly keep: 'merged'; readonly payload: Record<string, unknown> | null };

export type ConflictResolver = (conflict: ConflictInput) => ConflictResolution | Promise<ConflictResolution>;

/** One server table the client keeps a local copy of. */
export interface TableConfig {
  /** Server schema, e.g. `demo`. */
  readonly schema: string;
  /** Server table, e.g. `todos`. */
  readonly table: string;
  /** Local SQLite table name; defaults to `table`. */
  readonly local?: string;
  /** Conflict policy of this table; server wins when absent. */
  readonly resolver?: ConflictResolver;
}

/** Progress of a long pull or a hydration: rows applied so far out of the total known. */
export interface Progress {
  readonly phase: 'push' | 'pull' | 'hydrate';
  readonly rowsDone: number;
  readonly rowsTotal: number;
}

export interface ClientConfig {
  /** Origin of the sync API, e.g. `http://localhost:8787`. */
  readonly baseUrl: string;
  /** Credential provider; called before every request. */
  readonly getToken: () => string | Promise<string>;
  /** The local database (see client-web/sqlite). The app's own tables must already exist. */
  readonly db: SqliteDb;
  readonly tables: readonly TableConfig[];
  /**
   * Bundle-change watch mode: `watch()` waits for other devices' commits. `websocket` listens for
   * push notifications (`GET /sync/ws`, or the WebSocket API in AWS) and falls back to long polls
   * by itself while no socket can be had; `long-poll` only polls (`GET /sync/watch`).
   */
  readonly watch?: 'off' | 'long-poll' | 'websocket';
  /**
   * Where the push notifications are: default `ws(s)://<baseUrl host>/sync/ws` (the local
   * gateway); in AWS the stack's `WebSocketUrl` output (`wss://…/{stage}`).
   */
  readonly webSocketUrl?: string;
  /** Opens a WebSocket; default the platform's (browsers, Node 22+). Under Node 20 pass the `ws` package's. */
  readonly webSocket?: WebSocketFactory;
  readonly onProgress?: (progress: Progress) => void;
  readonly retry?: RetryPolicy;
  readonly fetch?: typeof fetch;
  /** Rows per uploaded chunk; defaults to the server's `default_rows_per_push_chunk`. */
  readonly pushChunkRows?: number;
  /** Bundles per pull page; defaults to the server's `default_bundles_per_pull`. */
  readonly pullBundles?: number;
  /** Rows per snapshot or committed-bundle page; defaults to the server's `default_rows_per_page`. */
  readonly pageRows?: number;
}

export type AttachResult =
  | {
      readonly status: 'attached';
      /** How the server resolved the first connect of this device for this user. */
      readonly resolution: 'initialize_local' | 'initialize_empty' | 'remote_authoritative' | 'already_attached';
      readonly hydratedRows: number;
    }
  | { readonly status: 'retry_later'; readonly retryAfterMs: number };

export type PushResult =
  | { readonly status: 'nothing_to_push' }
  | {
      readonly status: 'committed';
      readonly bundleSeq: number;
      readonly sourceBundleId: number;
      readonly rowCount: number;
      /** Conflicts resolved on the way (each by its table's policy). */
      readonly conflictsResolved: number;
      /** True when the commit had already happened (an earlier unknown outcome) and nothing was re-uploaded. */
      readonly alreadyCommitted: boolean;
    }
  | {
      /** Every frozen change lost to the server by conflict resolution; nothing left to push. */
      readonly status: 'resolved_without_commit';
      readonly conflictsResolved: number;
    }
  | {
      /** The bundle breaks a server constraint; it stays frozen until `discardRejected()`. */
      readonly status: 'rejected';
      readonly code: string;
      readonly message: string;
      readonly violation: unknown;
    };

export interface PullResult {
  readonly bundlesApplied: number;
  readonly rowsApplied: number;
  /** Rows skipped because they have unpushed local changes. */
  readonly rowsSkippedPending: number;
  readonly checkpoint: number;
  /** True when the pull had to rebuild from a snapshot (history_pruned). */
  readonly rebuilt: boolean;
}

export interface RebuildResult {
  readonly snapshotBundleSeq: number;
  readonly rowsApplied: number;
  /** The new source id when the rebuild rotated the source. */
  readonly rotatedTo?: string;
  readonly resumed: boolean;
}

export interface SyncResult {
  readonly push: PushResult;
  readonly pull: PullResult | null;
}

export type DetachResult = { readonly status: 'detached' } | { readonly status: 'blocked'; readonly pendingRows: number };

export interface PendingStatus {
  readonly attachedUserId: string | null;
  readonly sourceId: string;
  /** Changed local rows not yet frozen into a bundle. */
  readonly dirtyRows: number;
  /** Rows of the frozen bundle awaiting commit, 0 when none. */
  readonly frozenRows: number;
  readonly frozenSourceBundleId: number | null;
  readonly checkpoint: number;
  readonly rebuildRequired: boolean;
  readonly nextSourceBundleId: number;
  /** Set when the server refused this device's source: call `rebuild()` to rotate (rule 5). */
  readonly sourceRecovery: string | null;
  /** The server's refusal of the frozen bundle, until `discardRejected()` or a successful push. */
  readonly rejected: { readonly code: string; readonly message: string } | null;
}

export interface WatchResult {
  readonly changed: boolean;
  readonly latestBundleSeq: number;
}

/** The client. Every method is safe to call again after any failure; state is durable in SQLite. */
export interface SyncClient {
  /** The local database, for the application's own reads and writes. */
  readonly db: SqliteDb;
  /**
   * Attaches this device to the user the token names (`POST /sync/connect`): pushes local pending
   * rows when the scope is new, hydrates from a snapshot when it already exists.
   */
  attach(userId: string): Promise<AttachResult>;
  /** Push then pull; resumes a required rebuild first. */
  sync(): Promise<SyncResult>;
  /** Freezes pending changes into one bundle and pushes it (or resumes the frozen one). */
  pushPending(): Promise<PushResult>;
  /** Applies complete committed bundles up to the frozen stable ceiling. */
  pullToStable(): Promise<PullResult>;
  /**
   * Rebuilds the synced data from a snapshot session, keeping unpushed local changes. Rotates to
   * a new source when the server refused this one (`source_recovery_required`) or when asked.
   */
  rebuild(options?: { readonly rotateSource?: SourceReplacementReason }): Promise<RebuildResult>;
  /** Drops a frozen bundle the server rejected; the synced data is rebuilt on the next sync. */
  discardRejected(): Promise<{ readonly discardedRows: number }>;
  /** Detaches the user; blocked (a result) while unsynced rows exist. */
  detach(): Promise<DetachResult>;
  pendingStatus(): Promise<PendingStatus>;
  /** Waits (long poll) until the server has bundles past the checkpoint, or the wait ends. */
  watch(signal?: AbortSignal): Promise<WatchResult>;
  close(): Promise<void>;
}
