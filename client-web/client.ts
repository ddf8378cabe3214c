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
import { buildLocalModel } from './local-schema.js';
import { applicationDb } from './local-writes.js';
import { SyncLoop } from './loop.js';
import { drop, listQuarantine, requeue } from './quarantine.js';
import { type SqlValue, type SqliteDb } from './sqlite/port.js';
import { countDirty, countQuarantine, readAttachment, readFrozen, readSource } from './state.js';
import { SyncHttpError, Transport } from './transport.js';
import { socketWatchFor, type SocketWatch } from './watch-socket.js';
import { longPollWakeSource, webSocketWakeSource, type WakeSourceFactory } from './wake.js';
import { CapabilitiesResponse } from '../core/protocol/meta.js';
import { type ProtocolVersion } from '../core/protocol/version.js';

/** How long opening waits for fresh capabilities when a cached copy exists. */
const CAPABILITIES_TIMEOUT_MS = 3000;

/** A new random source id. */
export function newSourceId(): string {
  return `src-${crypto.randomUUID()}`;
}

async function cachedCapabilities(db: SqliteDb): Promise<CapabilitiesResponse | null> {
  const [row] = await db.query<{ body: string }>('SELECT body FROM _sync_capabilities WHERE id = 1');
  return row ? CapabilitiesResponse.parse(JSON.parse(row.body)) : null;
}

/**
 * The server's capabilities. A first open needs the server (retried like any request); with a
 * cached copy one short attempt decides, so an offline device opens at once on the cache.
 */
async function loadCapabilities(db: SqliteDb, transport: Transport, timeoutMs: number): Promise<CapabilitiesResponse> {
  const cached = await cachedCapabilities(db);
  try {
    const caps = await transport.request('GET', '/sync/capabilities', {
      schema: CapabilitiesResponse,
      ...(cached ? { retry: false, signal: AbortSignal.timeout(timeoutMs) } : {}),
    });
    await db.run('INSERT OR REPLACE INTO _sync_capabilities (id, body) VALUES (1, ?)', [JSON.stringify(caps)]);
    return caps;
  } catch (error) {
    // Offline (or the server is down or slow): the last answer is as good as it gets.
    const passing = error instanceof SyncHttpError && (error.retriable || error.code === 'aborted');
    if (!cached || !passing) throw error;
    return cached;
  }
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
  await installState(db, newSourceId);
  const sourceRef = { current: (await readSource(db)).sourceId };
  const baseUrl = config.baseUrl.replace(/\/+$/, '');
  const transport = new Transport(
    { baseUrl, getToken: config.getToken, ...(config.retry ? { retry: config.retry } : {}), ...(config.fetch ? { fetch: config.fetch } : {}) },
    () => sourceRef.current,
  );
  const caps = await loadCapabilities(db, transport, config.capabilitiesTimeoutMs ?? CAPABILITIES_TIMEOUT_MS);
  // Protocol 2 (json as its text) when the server serves it; a bundle frozen before keeps its own
  // protocol until it is pushed, so what conflict resolution rewrites into it stays in its form.
  const frozen = await readFrozen(db);
  const protocol: ProtocolVersion = frozen?.protocol ?? (caps.protocol_version >= 2 ? 2 : 1);
  transport.protocol = protocol;
  const model = await buildLocalModel(db, config.tables, caps.registered_table_specs, protocol);
  await installTriggers(db, model);
  const grown = await recordLocalModel(db, model);
  const ctx: ClientContext = {
    db,
    model,
    transport,
    limits: clientLimits(caps, config),
    config,
    progress: (p) => config.onProgress?.(p),
    sourceRef,
    newSourceId,
  };
  const client = new Client(ctx, baseUrl);
  if (grown.length > 0) await client.coordinator.localModelGrew();
  return client;
}

function wakeFactory(config: ClientConfig): WakeSourceFactory | null {
  const watch = config.watch;
  if (watch === undefined || watch === 'off') return null;
  if (typeof watch === 'function') return watch;
  return watch === 'websocket' ? webSocketWakeSource({ url: config.webSocketUrl, connect: config.webSocket }) : longPollWakeSource;
}

class Client implements SyncClient {
  private readonly exclusive = mutex();
  readonly coordinator: Coordinator;
  private readonly loop: SyncLoop;
  private closed = false;
  /** `watch: 'websocket'`: the push-notification socket, opened by the first watch(). */
  private socketWatch: SocketWatch | null | undefined;
  readonly db: SqliteDb;

  constructor(private readonly ctx: ClientContext, baseUrl: string) {
    this.coordinator = new Coordinator(ctx);
    const wake = wakeFactory(ctx.config);
    this.loop = new SyncLoop(this, (onWake, afterNextSync) => wake?.({
      transport: ctx.transport,
      baseUrl,
      getToken: ctx.config.getToken,
      sourceId: () => ctx.sourceRef.current,
      checkpoint: async () => (await readAttachment(ctx.db)).checkpoint,
      afterNextSync,
      watchMaxWaitSeconds: ctx.limits.watchMaxWaitSeconds,
    }, onWake) ?? null);
    this.db = applicationDb(ctx.db, () => this.loop.localWrite());
  }

  private open(): void {
    if (this.closed) throw new ClientError(ClientErrorCode.closed, 'the client is closed');
  }

  private run<T>(task: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ClientError(ClientErrorCode.closed, 'the client is closed'));
    return this.exclusive(task);
  }

  private async requireAttached(): Promise<string> {
    const { userId } = await readAttachment(this.ctx.db);
    if (!userId) throw new ClientError(ClientErrorCode.notAttached, 'attach a user first');
    return userId;
  }

  attach(userId: string): Promise<AttachResult> {
    return this.run(async () => {
      const result = await this.coordinator.attach(userId);
      if (result.status === 'attached' && result.resolution !== 'already_attached') this.loop.attachmentChanged();
      return result;
    });
  }

  sync(): Promise<SyncResult> {
    return this.run(async () => {
      await this.requireAttached();
      const report = await this.coordinator.run('sync');
      return { push: report.push, pull: report.pull };
    });
  }

  pushPending(): Promise<PushResult> {
    return this.run(async () => {
      await this.requireAttached();
      return (await this.coordinator.run('push', { retryRejected: true })).push;
    });
  }

  pullToStable(): Promise<PullResult> {
    return this.run(async () => {
      await this.requireAttached();
      const report = await this.coordinator.run('pull');
      return report.pull as PullResult;
    });
  }

  rebuild(options: { rotateSource?: SourceReplacementReason } = {}): Promise<RebuildResult> {
    return this.run(async () => {
      await this.requireAttached();
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
      await requeue(this.ctx, id, fix);
      this.loop.localWrite();
    });
  }

  dropQuarantined(id: number): Promise<void> {
    return this.run(() => drop(this.ctx, id));
  }

  detach(): Promise<DetachResult> {
    return this.run(async () => {
      const result = await this.coordinator.detach();
      if (result.status === 'detached') this.loop.attachmentChanged();
      return result;
    });
  }

  /** Reads only, so it does not wait for a sync in progress (the database queue orders it). */
  async pendingStatus(): Promise<PendingStatus> {
    this.open();
    const db = this.ctx.db;
    const [attachment, source, frozen, counts, quarantinedRows] = [await readAttachment(db), await readSource(db), await readFrozen(db), await countDirty(db), await countQuarantine(db)];
    return {
      attachedUserId: attachment.userId,
      sourceId: source.sourceId,
      dirtyRows: counts.dirty,
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

  async close(): Promise<void> {
    if (this.closed) return;
    await this.loop.stop();
    await this.run(async () => {
      this.closed = true;
      this.socketWatch?.close();
      await this.ctx.db.close();
    });
  }
}
