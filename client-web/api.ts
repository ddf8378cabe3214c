/**
 * The public shapes of the client: configuration, results and progress. Outcomes a caller must
 * handle (a blocked detach, a retry_later attach, a rejected bundle) are results, not errors;
 * failures are `ClientError` (client-web/errors.ts) with a stable `code`.
 */
import { type SourceReplacementReason } from '../core/protocol/read-path.js';
import { type ServerErrorCode, type SyncErrorCode } from './errors.js';
import { type LiveQuery, type LiveQueryResult } from './live-query.js';
import { type SqlRow, type SqlValue, type SqliteDb } from './sqlite/port.js';
import { type Rejection, type RejectionCode, type Violation } from './state.js';
import { type RetryPolicy, type TokenProvider } from './transport.js';
import { type WebSocketFactory } from './watch-socket.js';
import { type WakeSourceFactory } from './wake.js';

export type { Rejection, RejectionCode, Violation } from './state.js';
export type { LiveQuery, LiveQueryResult } from './live-query.js';

/** A row as the application stores it locally, by column name. */
export type LocalRow = Record<string, unknown>;

/** What a conflict resolver sees: the base the local change started from, the local change, and the server's row. */
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
  /**
   * The server row the local change started from, as this device last saw it: its version and wire
   * payload. Null for a local insert (the device never had the row from the server).
   */
  readonly base: { readonly rowVersion: number; readonly payload: Record<string, unknown> } | null;
  /**
   * The default policy's column-by-column merge of base, local and server (null when a side deleted
   * the row): the merged payload, and which columns came from where. Answer
   * `{ keep: 'merged', payload: { ...merged.payload, … } }` to take it with changes of your own.
   */
  readonly merged: MergeProposal | null;
}

/** The default merge of one conflicting row (see ConflictInput.merged). */
export interface MergeProposal {
  readonly payload: Record<string, unknown>;
  /** Columns only the device changed: its values are in `payload`. */
  readonly fromLocal: readonly string[];
  /** Columns only the server changed: its values are in `payload`. */
  readonly fromServer: readonly string[];
  /** Columns both changed to different values: the server's are in `payload` (the device's edit is overwritten). */
  readonly bothChanged: readonly string[];
}

/**
 * A resolver's answer: `server` takes the server's row whole and drops the local change; `local`
 * pushes the local change again on top of the server's version; `merged` pushes the given wire
 * payload instead (a full row, or null to delete). Without a resolver (or when it answers
 * `{ keep: 'merged', payload: input.merged.payload }`) the default policy merges column by column.
 */
export type ConflictResolution =
  | { readonly keep: 'server' }
  | { readonly keep: 'local' }
  | { readonly keep: 'merged'; readonly payload: Record<string, unknown> | null };

/**
 * One conflict this device resolved (`client.conflicts()`): what the device changed, what the
 * server had, and what became of each column.
 */
export interface ConflictRecord {
  readonly id: number;
  readonly schema: string;
  readonly table: string;
  readonly localTable: string;
  /** The key as a wire string. */
  readonly key: string;
  readonly localOp: 'INSERT' | 'UPDATE' | 'DELETE';
  /**
   * `merged`: column by column (the default policy); `server`: the server's row whole; `local`: the
   * device's change pushed again over it; `resolver`: a row the table's resolver gave.
   */
  readonly resolution: 'merged' | 'server' | 'local' | 'resolver';
  /** The version the device's change started from (null for a local insert). */
  readonly baseRowVersion: number | null;
  readonly serverRowVersion: number;
  readonly serverRowDeleted: boolean;
  /** Columns the device changed whose values were kept. */
  readonly keptLocal: readonly string[];
  /** Columns another device or the server changed, taken from the server. */
  readonly tookServer: readonly string[];
  /** Columns the device changed whose values were overwritten by the server's. */
  readonly overwritten: readonly string[];
  /** Wire payloads: the base, the device's change, the server's row, and what the row is now (null: deleted or none). */
  readonly base: Record<string, unknown> | null;
  readonly local: Record<string, unknown> | null;
  readonly server: Record<string, unknown> | null;
  readonly result: Record<string, unknown> | null;
  /** RFC 3339. */
  readonly resolvedAt: string;
}

export type ConflictResolver = (conflict: ConflictInput) => ConflictResolution | Promise<ConflictResolution>;

/** One server table the client keeps a local copy of. */
export interface TableConfig {
  /** Server schema, e.g. `demo`. */
  readonly schema: string;
  /** Server table, e.g. `todos`. */
  readonly table: string;
  /** Local SQLite table name; defaults to `table`. */
  readonly local?: string;
  /** Conflict policy of this table; without one, conflicts merge column by column against the base. */
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
  /**
   * Credential provider; called before every request. After a 401 it is called once more with
   * `{ refresh: true }` (return a fresh token, not a cached one) and the request is retried; a
   * provider that throws fails the request with `authentication_failed`.
   */
  readonly getToken: TokenProvider;
  /** The local database (see client-web/sqlite). The app's own tables must already exist. */
  readonly db: SqliteDb;
  readonly tables: readonly TableConfig[];
  /**
   * How the client learns of other devices' commits (protocol §5.5, §5.9): `websocket` listens for
   * push notifications (`GET /sync/ws` locally, the WebSocket API in AWS) and falls back to long
   * polls by itself while no socket can be had; `long-poll` only polls (`GET /sync/watch`); `off`
   * (the loop syncs after local writes, on `online` and periodically); or a wake-source factory
   * of the app's own (client-web/wake.ts). Used by `watch()` and the sync loop's wake-ups.
   */
  readonly watch?: 'off' | 'long-poll' | 'websocket' | WakeSourceFactory;
  /**
   * Where the push notifications are: default `ws(s)://<baseUrl host>/sync/ws` (the local
   * gateway); in AWS the stack's `WebSocketUrl` output (`wss://…/{stage}`).
   */
  readonly webSocketUrl?: string;
  /** Opens a WebSocket; default the platform's (browsers, Node 22+). Under Node 20 pass the `ws` package's. */
  readonly webSocket?: WebSocketFactory;
  /**
   * What a push does with a bundle the server rejects (`push_rejected`, or `payload_too_large` or
   * `invalid_request` naming a row): `hold` (the default) keeps it frozen until
   * `quarantineRejected()` or `discardRejected()`; `quarantine` moves the offending row (and rows
   * depending on it) into the quarantine at once and pushes the rest. Either way a rejection that
   * names no row of a bundle of several is first narrowed by pushing halves (those that pass
   * commit), and a row the client cannot encode for the wire at all is quarantined at freeze
   * (`invalid_local_row`): it could never be pushed, so holding it would hold the device.
   */
  readonly onRejected?: 'hold' | 'quarantine';
  readonly onProgress?: (progress: Progress) => void;
  readonly retry?: RetryPolicy;
  readonly fetch?: typeof fetch;
  /**
   * Rows per uploaded chunk; defaults to the most the server accepts (`max_rows_per_push_chunk`),
   * so a push makes the fewest round trips. A chunk is cut earlier where its bytes would pass the
   * server's request limit.
   */
  readonly pushChunkRows?: number;
  /**
   * A bundle that fits one chunk and one request goes with its push-session create, which stages
   * and commits it (one round trip instead of three), when the server offers it (capabilities'
   * `single_request_push`). Default true; false always uses create, chunks and commit.
   */
  readonly pushInOneRequest?: boolean;
  /**
   * A snapshot's rows travel as arrays under one list of column names per table, where the server
   * offers it (capabilities' `snapshot_row_arrays`): about half the bytes of self-describing
   * objects, parsed in a fraction of the time. Default true; false asks for objects.
   */
  readonly snapshotRowArrays?: boolean;
  /**
   * A snapshot create asks for the session's first page in its answer, where the server offers it
   * (capabilities' `snapshot_first_page`): the rows start one round trip sooner (an attach of a
   * small user on a link adding 40 ms a request: 2 requests waited for instead of 3). Default
   * true; false asks for every page with its own request.
   */
  readonly snapshotFirstPage?: boolean;
  /**
   * After a commit, this device's own bundle is built from its pushed rows instead of read back,
   * when the bundle hash the server answered proves them to be the committed rows (every value
   * already as the server renders it, no rows added by its triggers; client-web/replay-prediction.ts):
   * one request fewer per push, and no download of what was just uploaded. Default true; false
   * always reads the bundle back.
   */
  readonly predictReplay?: boolean;
  /**
   * Bundles per pull page, every page. Unset, the client sizes its pages: 25 bundles first (at most
   * the server's `default_bundles_per_pull`), then about 2,500 rows' worth from the rows a bundle
   * carried, at most `max_bundles_per_pull`, so the pages after the one being applied are asked
   * for ahead (client-web/pull.ts).
   */
  readonly pullBundles?: number;
  /** Rows per snapshot or committed-bundle page; defaults to the largest the server serves (`max_rows_per_page`). */
  readonly pageRows?: number;
  /**
   * Pages a hydration, a pull or the fetch of one committed bundle's rows (a replay) asks for
   * while it applies one: default 3, at most 8; 1 asks for the next page only. Where the rows'
   * count and size are known up front (a new snapshot session, a bundle's row count), that many go
   * out together from the first request. More hides more of a slow link's latency, at the cost of
   * pages held in memory and requests open at once.
   */
  readonly pagesAhead?: number;
  /**
   * How long opening waits for the server's capabilities when a cached copy exists (one attempt,
   * no retries: an offline device opens on the cached copy at once). Default 3000.
   */
  readonly capabilitiesTimeoutMs?: number;
}

export type AttachResult =
  | {
      readonly status: 'attached';
      /** How the server resolved the first connect of this device for this user. */
      readonly resolution: 'initialize_local' | 'initialize_empty' | 'remote_authoritative' | 'already_attached';
      readonly hydratedRows: number;
    }
  | {
      readonly status: 'retry_later';
      readonly retryAfterMs: number;
      /**
       * Why: another device is initializing the user's data, or the server does not publish yet a
       * table or column this app version declares (`server_schema_behind`).
       */
      readonly reason?: 'scope_initializing' | 'server_schema_behind';
    };

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
      /** Rows moved into the quarantine on the way (only with `onRejected: 'quarantine'`). */
      readonly quarantinedRows?: number;
    }
  | {
      /** Every frozen change lost to the server by conflict resolution, or quarantined; nothing left to push. */
      readonly status: 'resolved_without_commit';
      readonly conflictsResolved: number;
      readonly quarantinedRows?: number;
    }
  | {
      /**
       * The bundle breaks a server constraint (`push_rejected`), or the server cannot take a row
       * (`invalid_request`, `payload_too_large`); it stays frozen until `quarantineRejected()` or
       * `discardRejected()`.
       */
      readonly status: 'rejected';
      readonly code: ServerErrorCode;
      readonly message: string;
      /** The broken constraint, with the offending row's table and key where the server names them. */
      readonly violation: Violation | null;
      readonly details?: unknown;
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
  readonly sourceRecovery: SourceReplacementReason | null;
  /** The server's refusal of the frozen bundle, until it is quarantined, discarded or pushed. */
  readonly rejected: Rejection | null;
  /** Rows waiting in the quarantine (`quarantined()`). */
  readonly quarantinedRows: number;
}

/** A row moved out of a rejected bundle, with the server's reason (the quarantine, quarantine.ts). */
export interface QuarantinedRow {
  readonly id: number;
  /** Server schema and table. */
  readonly schema: string;
  readonly table: string;
  readonly localTable: string;
  /** The sync key as wire text (dashed UUID or text). */
  readonly key: string;
  /** The change that was refused. */
  readonly op: 'INSERT' | 'UPDATE' | 'DELETE';
  /** The refused row's local values by column, or null for a delete. */
  readonly row: Readonly<Record<string, SqlValue>> | null;
  /**
   * The server's code, or `invalid_local_row` for a row the client could not encode for the wire
   * (set aside at freeze; `violation.column` names the column, `row` holds the values as written).
   */
  readonly code: RejectionCode;
  readonly message: string;
  readonly violation: Violation | null;
  /** Set when this row was moved only because it depends (foreign key) on quarantined row `dependsOn`. */
  readonly dependsOn: number | null;
  readonly sourceBundleId: number;
  /** RFC 3339. */
  readonly quarantinedAt: string;
}

/**
 * What the sync loop is doing:
 * - `stopped`: not started, or stopped;
 * - `idle`: a sync answered and nothing is pending as far as it knows, waiting for a write, a
 *   wake-up or the next period (a wake-up whose wait failed syncs, so an outage never shows here);
 * - `syncing`: attaching or syncing now (also right after `start()`, before the first answer);
 * - `backoff`: the last attempt failed in a way that may pass (offline server, 503, 429): it tries
 *   again at `nextAttemptAt`;
 * - `offline`: the environment reports no network; it tries again when it comes back;
 * - `needs_attention`: the last attempt failed in a way that waiting does not cure (a rejected
 *   bundle held, a refused source, a local schema mismatch, no user to attach): it tries again
 *   after the next local write, an `attach()` or `requestSync()`.
 */
export type SyncPhase = 'stopped' | 'idle' | 'syncing' | 'backoff' | 'offline' | 'needs_attention';

/** One event of `onStatus`: the loop's phase and the device's sync state. */
export interface SyncStatus {
  readonly phase: SyncPhase;
  readonly attachedUserId: string | null;
  /** Local changes not yet committed: dirty and frozen rows. */
  readonly pendingRows: number;
  readonly quarantinedRows: number;
  /** The last bundle applied (`last_bundle_seq_seen`). */
  readonly checkpoint: number;
  /** The last failure, until a sync succeeds. */
  readonly lastError: { readonly code: SyncErrorCode | 'unknown'; readonly message: string } | null;
  /** When a sync last succeeded (ms since the epoch). */
  readonly lastSyncedAt: number | null;
  /** When the loop tries again after a failure (ms since the epoch). */
  readonly nextAttemptAt: number | null;
  /** The server's refusal of the frozen bundle, while one is held. */
  readonly rejected: Rejection | null;
  /** Conflicts resolved by the tables' policies since `start()`. */
  readonly conflictsResolved: number;
  /** How the loop's attach went, when it attached this device. */
  readonly attach: AttachResult | null;
}

/** Where the sync loop runs and what it listens to; defaults to the global scope (window or worker). */
export interface LoopEnvironment {
  /** Whether the network is up (`navigator.onLine`); assumed up when unknown. */
  isOnline(): boolean;
  /** Subscribes to the network coming back (`online`); answers the unsubscribe. */
  onOnline(listener: () => void): () => void;
  /** Subscribes to the network going away (`offline`); answers the unsubscribe. */
  onOffline(listener: () => void): () => void;
  /** Subscribes to the app becoming visible again (`visibilitychange`); answers the unsubscribe. */
  onVisible(listener: () => void): () => void;
}

/** How `start()` runs the loop. */
export interface StartOptions {
  /** Attach this user first when the database is not attached (retrying `retry_later`). */
  readonly userId?: string;
  /** Quiet time after a local write before the sync (default 25 ms: a sync in flight gathers the rest). */
  readonly debounceMs?: number;
  /** A sync at least this often while idle (default 60 s; 0: never). */
  readonly periodicMs?: number;
  /** Backoff after a failure that may pass: full jitter from `baseMs` doubling up to `maxMs` (default 1 s … 60 s). */
  readonly backoff?: { readonly baseMs: number; readonly maxMs: number };
  /**
   * When the server refuses this device's source (`source_recovery_required`), rebuild with a new
   * source at once instead of waiting for the app's `rebuild()` (protocol §10.6: recovery stays
   * the app's choice, made here once). Default false.
   */
  readonly recoverSource?: boolean;
  readonly environment?: LoopEnvironment;
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
  /**
   * Moves the offending rows of a rejected bundle (the row the server names, and the rows depending
   * on it) into the quarantine; the rest is pushed by the next sync. `quarantinedRows` is 0 when the
   * rejection names no row of the bundle (then only `discardRejected()` helps).
   */
  quarantineRejected(): Promise<{ readonly quarantinedRows: number }>;
  /** The quarantined rows, oldest first. */
  quarantined(): Promise<QuarantinedRow[]>;
  /**
   * Writes a quarantined row back as a local change (pushed with the next bundle), with `fix` (local
   * values by column) applied over it; the row leaves the quarantine.
   */
  requeueQuarantined(id: number, fix?: Readonly<Record<string, SqlValue>>): Promise<void>;
  /** Forgets a quarantined row (the local table already holds the server's version of it). */
  dropQuarantined(id: number): Promise<void>;
  /** The conflicts this device resolved (the newest 500), oldest first: what was merged and what was overwritten. */
  conflicts(): Promise<ConflictRecord[]>;
  /** Forgets the given conflict records (all of them without ids), e.g. once the app showed them. */
  dismissConflicts(ids?: readonly number[]): Promise<void>;
  /** Detaches the user; blocked (a result) while unsynced rows exist. */
  detach(): Promise<DetachResult>;
  pendingStatus(): Promise<PendingStatus>;
  /** Waits (long poll) until the server has bundles past the checkpoint, or the wait ends. */
  watch(signal?: AbortSignal): Promise<WatchResult>;
  /**
   * Starts the sync loop: a sync after local writes through `db` (debounced), on wake-ups from the
   * watch source, when the network comes back, when the app becomes visible and periodically,
   * with backoff after failures. Calling it again replaces the options.
   */
  start(options?: StartOptions): void;
  /** Stops the loop (a sync in progress finishes first). */
  stop(): Promise<void>;
  /** Asks the loop for a sync now, cutting a backoff short (a "sync now" button, writes through another handle). */
  requestSync(): void;
  /** Subscribes to the loop's status (called at once with the current one); answers the unsubscribe. */
  onStatus(listener: (status: SyncStatus) => void): () => void;
  /**
   * A query kept up to date: it runs now, and again after every committed transaction that wrote
   * a table it reads — the app's writes through `db`, and every transaction of the client (pull
   * pages, replays, the final apply of a hydration, conflicts, quarantine, rebuild, detach) — with
   * bursts coalesced. `listener` gets each new result; rows that did not change keep their objects.
   * `close()` the answer when done.
   */
  liveQuery<T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[], listener?: (result: LiveQueryResult<T>) => void): LiveQuery<T>;
  /** Subscribes to the local tables each committed transaction wrote (the app's and the client's); answers the unsubscribe. */
  onTablesChanged(listener: (tables: ReadonlySet<string>) => void): () => void;
  /** Stops the loop and closes the database. */
  close(): Promise<void>;
}
