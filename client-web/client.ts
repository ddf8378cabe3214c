/**
 * `openClient`: the public client over the coordinator (coordinator.ts), the sync loop (loop.ts)
 * and the quarantine (quarantine.ts). Every operation that changes sync state runs under one
 * in-process mutex, so a sync never interleaves with an attach or a detach of the same database;
 * reads (`pendingStatus`, `quarantined`) and `watch` wait outside it.
 *
 * Opening works offline: the server's capabilities are cached in `_sync_capabilities`, so local
 * tables are validated against the last known specs, and refreshed whenever the server answers.
 * With a cached copy, opening asks the server once, briefly, and never retries.
 */
import { WatchResponse, type SourceReplacementReason } from '../core/protocol/read-path.js';
import {
  type AttachResult,
  type ClientConfig,
  type ConflictRecord,
  type DetachResult,
  type PendingStatus,
  type PullResult,
  type PushResult,
  type QuarantinedRow,
  type RebuildResult,
  type StartOptions,
  type SyncClient,
  type SyncResult,
  type SyncStatus,
  type WatchResult,
} from './api.js';
import { clientLimits, type ClientContext } from './context.js';
import { Coordinator } from './coordinator.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { installState, installTriggers, recordLocalModel } from './install.js';
import { installBaseCapture } from './base-rows.js';
import { dismissConflicts, installConflictLog, readConflicts } from './conflict-log.js';
import { buildLocalModelAhead, type LocalModel } from './local-schema.js';
import { applicationDb } from './local-writes.js';
import { LiveQueries, type LiveQuery, type LiveQueryResult } from './live-query.js';
import { SyncLoop } from './loop.js';
import { drop, listQuarantine, requeue } from './quarantine.js';
import { missingParents } from './requeue-check.js';
import { type SqlRow, type SqlValue, type SqliteDb } from './sqlite/port.js';
import { readAttachment, readFrozen, readPendingStatus, readSource } from './state.js';
import { SyncHttpError, Transport } from './transport.js';
import { socketWatchFor, type SocketWatch } from './watch-socket.js';
import { NotifiedPages } from './notified-pages.js';
import { longPollWakeSource, webSocketWakeSource, type WakeSourceFactory } from './wake.js';
import { CapabilitiesResponse } from '../core/protocol/meta.js';
import { type ProtocolVersion } from '../core/protocol/version.js';

/** How long opening waits for fresh capabilities when a cached copy exists. */
const CAPABILITIES_TIMEOUT_MS = 3000;
/** While the server does not publish what the app declares: how soon `attach` says to try again. */
const SERVER_BEHIND_RETRY_MS = 5000;

/** A new random source id. */
export function newSourceId(): string {
  return `src-${crypto.randomUUID()}`;
}

/**
 * What earlier opens left, read before the state tables are installed (a fresh database has none):
 * the device's source id and the last capabilities, so the capabilities request can go out first.
 */
async function earlierState(db: SqliteDb): Promise<{ readonly sourceId: string | null; readonly cached: CapabilitiesResponse | null }> {
  const tables = new Set((await db.query<{ name: string }>(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('_sync_source_state', '_sync_capabilities')")).map((t) => t.name));
  const [source] = tables.has('_sync_source_state') ? await db.query<{ source_id: string }>('SELECT source_id FROM _sync_source_state WHERE id = 1') : [];
  const [caps] = tables.has('_sync_capabilities') ? await db.query<{ body: string }>('SELECT body FROM _sync_capabilities WHERE id = 1') : [];
  return { sourceId: source?.source_id ?? null, cached: caps ? parsedCapabilities(caps.body) : null };
}

/** A cached answer this client cannot read (an earlier release's, a damaged row) counts as none. */
function parsedCapabilities(body: string): CapabilitiesResponse | null {
  try {
    return CapabilitiesResponse.parse(JSON.parse(body));
  } catch {
    return null;
  }
}

type CapabilitiesAnswer = { readonly caps: CapabilitiesResponse } | { readonly error: unknown };

/**
 * Asks for the server's capabilities; the answer or the failure, never a rejection (the caller may
 * fail before it looks). A first open needs the server (retried like any request); with a cached
 * copy one short attempt decides, so an offline device opens at once on the cache.
 */
function askCapabilities(transport: Transport, cached: boolean, timeoutMs: number): Promise<CapabilitiesAnswer> {
  return transport
    .request('GET', '/sync/capabilities', { schema: CapabilitiesResponse, ...(cached ? { retry: false, signal: AbortSignal.timeout(timeoutMs) } : {}) })
    .then((caps) => ({ caps }), (error: unknown) => ({ error }));
}

/** The capabilities `answer` brought, stored; offline (or with the server down or slow) the cached ones. */
async function settleCapabilities(db: SqliteDb, answer: CapabilitiesAnswer, cached: CapabilitiesResponse | null): Promise<CapabilitiesResponse> {
  if ('caps' in answer) {
    await db.run('INSERT OR REPLACE INTO _sync_capabilities (id, body) VALUES (1, ?)', [JSON.stringify(answer.caps)]);
    return answer.caps;
  }
  const passing = answer.error instanceof SyncHttpError && (answer.error.retriable || answer.error.code === 'aborted');
  if (!cached || !passing) throw answer.error;
  return cached;
}

/**
 * Capabilities past any cache (`cache-control: no-cache`: the server checks its catalog is current
 * first), stored like any answer. For an app that declares what the server did not publish.
 */
async function freshCapabilities(db: SqliteDb, transport: Transport, options: { retry?: boolean; signal?: AbortSignal } = {}): Promise<CapabilitiesResponse> {
  const caps = await transport.request('GET', '/sync/capabilities', { schema: CapabilitiesResponse, headers: { 'cache-control': 'no-cache' }, ...options });
  await db.run('INSERT OR REPLACE INTO _sync_capabilities (id, body) VALUES (1, ?)', [JSON.stringify(caps)]);
  return caps;
}

/** A promise chain that runs one task at a time. */
function mutex(): <T>(task: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(task: () => Promise<T>) => {
    const run = tail.then(task, task);
    tail = run.catch(() => undefined);
    return run;
  };
}

/**
 * Opens the client over an open database whose application tables already exist: installs the
 * `_sync_*` state and capture triggers (idempotently) and validates the local tables.
 */
export async function openClient(config: ClientConfig): Promise<SyncClient> {
  const { db } = config;
  const earlier = await earlierState(db);
  // A fresh database's source id is chosen here, so the request can name it before it is stored.
  const fresh = newSourceId();
  const sourceRef = { current: earlier.sourceId ?? fresh };
  const baseUrl = config.baseUrl.replace(/\/+$/, '');
  const transport = new Transport(
    { baseUrl, getToken: config.getToken, ...(config.retry ? { retry: config.retry } : {}), ...(config.fetch ? { fetch: config.fetch } : {}) },
    () => sourceRef.current,
  );
  const timeoutMs = config.capabilitiesTimeoutMs ?? CAPABILITIES_TIMEOUT_MS;
  // The round trip overlaps the install of the state tables, which takes as long on OPFS in a
  // browser (bench/README.md, thirty-ninth pass).
  const asked = askCapabilities(transport, earlier.cached !== null, timeoutMs);
  await installState(db, () => fresh);
  sourceRef.current = (await readSource(db)).sourceId;
  let caps = await settleCapabilities(db, await asked, earlier.cached);
  let built = await buildLocalModelAhead(db, config.tables, caps.registered_table_specs, await protocolFor(db, caps));
  if (built.ahead.length > 0) {
    // A new app version, maybe just after the deploy that adds what it declares: ask once, briefly.
    const fresh = await freshCapabilities(db, transport, { retry: false, signal: AbortSignal.timeout(timeoutMs) }).catch(() => null);
    if (fresh) {
      caps = fresh;
      built = await buildLocalModelAhead(db, config.tables, caps.registered_table_specs, await protocolFor(db, caps));
    }
  }
  const ctx = await contextFor(config, db, transport, sourceRef, caps, built.model, new NotifiedPages());
  const client = new Client(ctx, baseUrl, built.ahead.length > 0 ? built.ahead : null);
  if (ctx.grown) await client.coordinator.localModelGrew();
  return client;
}

/**
 * Protocol 2 (json as its text) when the server serves it; a bundle frozen before keeps its own
 * protocol until it is pushed, so what conflict resolution rewrites into it stays in its form.
 */
async function protocolFor(db: SqliteDb, caps: CapabilitiesResponse): Promise<ProtocolVersion> {
  const frozen = await readFrozen(db);
  return frozen?.protocol ?? (caps.protocol_version >= 2 ? 2 : 1);
}

/**
 * Installs the capture triggers of `model`, records its local columns, and answers the context
 * the steps run on (its transport speaking the model's protocol); `grown`: a table gained a
 * column or is managed for the first time.
 */
async function contextFor(config: ClientConfig, db: SqliteDb, transport: Transport, sourceRef: { current: string }, caps: CapabilitiesResponse, model: LocalModel, notified: NotifiedPages): Promise<ClientContext & { readonly grown: boolean }> {
  transport.protocol = model.protocol;
  await installTriggers(db, model);
  await installBaseCapture(db, model);
  await installConflictLog(db);
  const grown = await recordLocalModel(db, model);
  return {
    db,
    model,
    transport,
    limits: clientLimits(caps, config),
    config,
    progress: (p) => config.onProgress?.(p),
    sourceRef,
    newSourceId,
    notified,
    grown: grown.length > 0,
  };
}

function wakeFactory(config: ClientConfig): WakeSourceFactory | null {
  const watch = config.watch;
  if (watch === undefined || watch === 'off') return null;
  if (typeof watch === 'function') return watch;
  return watch === 'websocket' ? webSocketWakeSource({ url: config.webSocketUrl, connect: config.webSocket }) : longPollWakeSource;
}

class Client implements SyncClient {
  private readonly exclusive = mutex();
  coordinator: Coordinator;
  private readonly loop: SyncLoop;
  private closed = false;
  /** `watch: 'websocket'`: the push-notification socket, opened by the first watch(). */
  private socketWatch: SocketWatch | null | undefined;
  private readonly live: LiveQueries;
  readonly db: SqliteDb;

  /**
   * @param behind What the app declares that the server does not publish yet (null: nothing):
   *   until it does, every operation that talks to the server first asks for fresh capabilities
   *   and waits (`retry_later`, `server_schema_behind`) rather than failing.
   */
  constructor(private ctx: ClientContext, baseUrl: string, private behind: readonly string[] | null) {
    this.coordinator = new Coordinator(ctx);
    const wake = wakeFactory(ctx.config);
    this.loop = new SyncLoop(this, (onWake, afterNextSync, waitFailed, syncing) => wake?.({
      transport: ctx.transport,
      baseUrl,
      getToken: ctx.config.getToken,
      sourceId: () => ctx.sourceRef.current,
      checkpoint: async () => (await readAttachment(ctx.db)).checkpoint,
      afterNextSync,
      syncing,
      watchMaxWaitSeconds: ctx.limits.watchMaxWaitSeconds,
      waitFailed,
      notified: ctx.notified,
    }, onWake) ?? null);
    this.db = applicationDb(ctx.db, () => this.loop.localWrite());
    this.live = new LiveQueries({
      query: (sql, params) => ctx.db.query(sql, params),
      tablesRead: (sql) => ctx.db.tablesRead(sql),
      onTablesChanged: (listener) => ctx.db.onCommit(listener),
    });
  }

  private open(): void {
    if (this.closed) throw new ClientError(ClientErrorCode.closed, 'the client is closed');
  }

  /**
   * The device was attached or detached: its sockets were opened with the old attachment's token,
   * so they are closed (the loop opens its own again) and the pages they brought are forgotten,
   * all at once, before another message can arrive.
   */
  private attachmentChanged(): void {
    this.socketWatch?.close();
    this.socketWatch = undefined;
    this.ctx.notified.clear();
    this.loop.attachmentChanged();
  }

  private run<T>(task: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ClientError(ClientErrorCode.closed, 'the client is closed'));
    return this.exclusive(task);
  }

  /**
   * Whether the server publishes everything the app declares; while it does not, asks it again
   * (past its cache) and, once it does, runs on the real model from then on.
   */
  private async caughtUp(): Promise<boolean> {
    if (!this.behind) return true;
    const caps = await freshCapabilities(this.ctx.db, this.ctx.transport);
    const built = await buildLocalModelAhead(this.ctx.db, this.ctx.config.tables, caps.registered_table_specs, await protocolFor(this.ctx.db, caps));
    if (built.ahead.length > 0) {
      this.behind = built.ahead;
      return false;
    }
    const { grown, ...ctx } = await contextFor(this.ctx.config, this.ctx.db, this.ctx.transport, this.ctx.sourceRef, caps, built.model, this.ctx.notified);
    this.ctx = ctx;
    this.coordinator = new Coordinator(ctx);
    this.behind = null;
    if (grown) await this.coordinator.localModelGrew();
    return true;
  }

  /** Throws the retriable `server_schema_behind` while the server does not publish what the app declares. */
  private async requireCaughtUp(): Promise<void> {
    if (await this.caughtUp()) return;
    const problems = this.behind ?? [];
    throw new ClientError(ClientErrorCode.serverSchemaBehind,
      `the server does not publish yet what this app version declares (${problems.join('; ')}); nothing syncs until its deploy has bootstrapped, retried meanwhile`,
      { problems, retryAfterMs: SERVER_BEHIND_RETRY_MS });
  }

  private async requireAttached(): Promise<string> {
    const { userId } = await readAttachment(this.ctx.db);
    if (!userId) throw new ClientError(ClientErrorCode.notAttached, 'attach a user first');
    return userId;
  }

  attach(userId: string): Promise<AttachResult> {
    return this.run(async () => {
      if (!(await this.caughtUp())) return { status: 'retry_later', retryAfterMs: SERVER_BEHIND_RETRY_MS, reason: 'server_schema_behind' };
      const result = await this.coordinator.attach(userId);
      if (result.status === 'attached' && result.resolution !== 'already_attached') this.attachmentChanged();
      return result;
    });
  }

  sync(): Promise<SyncResult> {
    return this.run(async () => {
      await this.requireAttached();
      await this.requireCaughtUp();
      const report = await this.coordinator.run('sync');
      return { push: report.push, pull: report.pull };
    });
  }

  pushPending(): Promise<PushResult> {
    return this.run(async () => {
      await this.requireAttached();
      await this.requireCaughtUp();
      return (await this.coordinator.run('push', { retryRejected: true })).push;
    });
  }

  pullToStable(): Promise<PullResult> {
    return this.run(async () => {
      await this.requireAttached();
      await this.requireCaughtUp();
      const report = await this.coordinator.run('pull');
      return report.pull as PullResult;
    });
  }

  rebuild(options: { rotateSource?: SourceReplacementReason } = {}): Promise<RebuildResult> {
    return this.run(async () => {
      await this.requireAttached();
      await this.requireCaughtUp();
      const report = await this.coordinator.run('rebuild', options.rotateSource ? { rotate: options.rotateSource } : {});
      return report.rebuild as RebuildResult;
    });
  }

  discardRejected(): Promise<{ readonly discardedRows: number }> {
    return this.run(async () => {
      const result = await this.coordinator.discardRejected();
      if (result.discardedRows > 0) this.loop.requestSync();
      return result;
    });
  }

  quarantineRejected(): Promise<{ readonly quarantinedRows: number }> {
    return this.run(async () => {
      const result = await this.coordinator.quarantineRejected();
      if (result.quarantinedRows > 0) this.loop.requestSync();
      return result;
    });
  }

  async quarantined(): Promise<QuarantinedRow[]> {
    this.open();
    return listQuarantine(this.ctx);
  }

  requeueQuarantined(id: number, fix?: Readonly<Record<string, SqlValue>>): Promise<void> {
    return this.run(async () => {
      await this.requeuePossible(id, fix);
      await requeue(this.ctx, id, fix);
      this.loop.localWrite();
    });
  }

  /** Refuses, with the reason, a re-queue that could never succeed (requeue-check.ts). */
  private async requeuePossible(id: number, fix?: Readonly<Record<string, SqlValue>>): Promise<void> {
    const record = (await listQuarantine(this.ctx)).find((r) => r.id === id);
    if (!record || (record.row === null && fix === undefined)) return;
    const missing = await missingParents(this.ctx.db, this.ctx.model, record.localTable, { ...(record.row ?? {}), ...fix });
    if (missing.length === 0) return;
    const what = missing.map((m) => `${m.table ?? m.localTable} ${m.key} (its ${m.column})`).join(', ');
    throw new ClientError(ClientErrorCode.quarantineParentMissing,
      `quarantined row ${id} cannot be re-queued: it refers to ${what}, which no longer exists here; re-queue it with a fix that points elsewhere, or drop it`,
      { missing });
  }

  dropQuarantined(id: number): Promise<void> {
    return this.run(() => drop(this.ctx, id));
  }

  async conflicts(): Promise<ConflictRecord[]> {
    this.open();
    return readConflicts(this.ctx.db);
  }

  async dismissConflicts(ids?: readonly number[]): Promise<void> {
    this.open();
    await dismissConflicts(this.ctx.db, ids);
  }

  detach(): Promise<DetachResult> {
    return this.run(async () => {
      // Detach clears the synced tables: only once it knows which those are.
      await this.requireCaughtUp();
      const result = await this.coordinator.detach();
      if (result.status === 'detached') this.attachmentChanged();
      return result;
    });
  }

  /** Reads only, so it does not wait for a sync in progress (the database queue orders it). */
  async pendingStatus(): Promise<PendingStatus> {
    this.open();
    const db = this.ctx.db;
    const { attachment, source, frozen, dirtyRows, quarantinedRows } = await readPendingStatus(db);
    return {
      attachedUserId: attachment.userId,
      sourceId: source.sourceId,
      dirtyRows,
      frozenRows: frozen?.rowCount ?? 0,
      frozenSourceBundleId: frozen?.sourceBundleId ?? null,
      checkpoint: attachment.checkpoint,
      rebuildRequired: attachment.rebuildRequired,
      nextSourceBundleId: source.nextSourceBundleId,
      sourceRecovery: source.rotationReason,
      rejected: frozen?.rejected ?? null,
      quarantinedRows,
    };
  }

  async watch(signal?: AbortSignal): Promise<WatchResult> {
    this.open();
    const mode = this.ctx.config.watch;
    if (mode !== 'long-poll' && mode !== 'websocket') throw new ClientError(ClientErrorCode.watchDisabled, "watch mode is neither 'websocket' nor 'long-poll'; open the client with one of them");
    await this.requireAttached();
    const { checkpoint } = await readAttachment(this.ctx.db);
    if (mode === 'websocket') {
      // Push notifications when a socket can be had; otherwise this wait is a long poll.
      this.socketWatch ??= socketWatchFor(this.ctx);
      const pushed = await this.socketWatch?.wait(checkpoint, this.ctx.limits.watchMaxWaitSeconds * 1000, signal);
      if (pushed) return pushed;
    }
    const answer = await this.ctx.transport.request('GET', '/sync/watch', {
      query: { after_bundle_seq: checkpoint, wait_seconds: this.ctx.limits.watchMaxWaitSeconds },
      schema: WatchResponse,
      retry: false,
      ...(signal ? { signal } : {}),
    });
    return { changed: answer.changed, latestBundleSeq: answer.latest_bundle_seq };
  }

  start(options?: StartOptions): void {
    this.open();
    this.loop.start(options);
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  requestSync(): void {
    this.loop.requestSync();
  }

  onStatus(listener: (status: SyncStatus) => void): () => void {
    return this.loop.onStatus(listener);
  }

  liveQuery<T extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = [], listener?: (result: LiveQueryResult<T>) => void): LiveQuery<T> {
    this.open();
    return this.live.liveQuery<T>(sql, params, listener);
  }

  onTablesChanged(listener: (tables: ReadonlySet<string>) => void): () => void {
    return this.ctx.db.onCommit(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.loop.stop();
    await this.run(async () => {
      // A finished snapshot session's delete may still be out (coordinator.ts `trailing`).
      await this.coordinator.settled();
      this.closed = true;
      this.live.closeAll();
      this.socketWatch?.close();
      await this.ctx.db.close();
    });
  }
}
