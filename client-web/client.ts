/**
 * `openClient`: the lifecycle around push, pull and rebuild (specification rules 6–8, contract
 * §9). Every public method runs under one in-process mutex, so a sync never interleaves with an
 * attach or a detach of the same database; `watch` waits outside it.
 *
 * Opening works offline: the server's capabilities are cached in `_sync_capabilities`, so local
 * tables are validated against the last known specs, and refreshed whenever the server answers.
 */
import { CapabilitiesResponse } from '../core/protocol/meta.js';
import { ConnectResponse } from '../core/protocol/connect.js';
import { WatchResponse, type SourceReplacementReason } from '../core/protocol/read-path.js';
import {
  type AttachResult,
  type ClientConfig,
  type DetachResult,
  type PendingStatus,
  type PullResult,
  type PushResult,
  type RebuildResult,
  type SyncClient,
  type SyncResult,
  type WatchResult,
} from './api.js';
import { inApplyMode } from './apply.js';
import { clientLimits, type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { installState, installTriggers, outboxTables, recordLocalModel } from './install.js';
import { buildLocalModel, qi } from './local-schema.js';
import { dropOutbox } from './outbox.js';
import { pullToStable } from './pull.js';
import { pushOnce } from './push.js';
import { rebuild } from './rebuild.js';
import { type SqliteDb } from './sqlite/port.js';
import { countDirty, readAttachment, readFrozen, readSource, setRebuildRequired } from './state.js';
import { SyncHttpError, Transport } from './transport.js';
import { socketWatchFor, type SocketWatch } from './watch-socket.js';

/** Bundles one `sync()` pushes at most before it pulls (a dirty set over the bundle limits splits). */
const MAX_BUNDLES_PER_SYNC = 100;

export function newSourceId(): string {
  return `src-${crypto.randomUUID()}`;
}

async function loadCapabilities(db: SqliteDb, transport: Transport): Promise<CapabilitiesResponse> {
  try {
    const caps = await transport.request('GET', '/sync/capabilities', { schema: CapabilitiesResponse });
    await db.run('INSERT OR REPLACE INTO _sync_capabilities (id, body) VALUES (1, ?)', [JSON.stringify(caps)]);
    return caps;
  } catch (error) {
    // Offline (or the server is down): the last answer is as good as it gets; the first open needs the server.
    if (!(error instanceof SyncHttpError) || !error.retriable) throw error;
    const [row] = await db.query<{ body: string }>('SELECT body FROM _sync_capabilities WHERE id = 1');
    if (!row) throw error;
    return CapabilitiesResponse.parse(JSON.parse(row.body));
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
  const transport = new Transport(
    { baseUrl: config.baseUrl.replace(/\/+$/, ''), getToken: config.getToken, ...(config.retry ? { retry: config.retry } : {}), ...(config.fetch ? { fetch: config.fetch } : {}) },
    () => sourceRef.current,
  );
  const caps = await loadCapabilities(db, transport);
  const model = await buildLocalModel(db, config.tables, caps.registered_table_specs);
  await installTriggers(db, model);
  // A new app version added a local column or table: its synced rows lack those values, so the
  // next sync rebuilds from a snapshot, keeping every pending local change.
  const grown = await recordLocalModel(db, model);
  if (grown.length > 0 && (await readAttachment(db)).userId !== null) await setRebuildRequired(db, true);
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
  return new Client(ctx);
}

class Client implements SyncClient {
  private readonly exclusive = mutex();
  private closed = false;
  /** `watch: 'websocket'`: the push-notification socket, opened by the first watch(). */
  private socketWatch: SocketWatch | null | undefined;

  constructor(private readonly ctx: ClientContext) {}

  get db(): SqliteDb {
    return this.ctx.db;
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

  private async hasLocalPending(): Promise<boolean> {
    const { dirty, frozen } = await countDirty(this.ctx.db);
    return dirty + frozen > 0 || (await readFrozen(this.ctx.db)) !== null;
  }

  attach(userId: string): Promise<AttachResult> {
    return this.run(async () => {
      const current = await readAttachment(this.ctx.db);
      if (current.userId === userId) return { status: 'attached', resolution: 'already_attached', hydratedRows: 0 };
      if (current.userId !== null) {
        throw new ClientError(ClientErrorCode.attachedToOtherUser, `this database is attached to another user; detach first`);
      }
      const pending = await this.hasLocalPending();
      const answer = await this.ctx.transport.request('POST', '/sync/connect', { body: { has_local_pending_rows: pending }, schema: ConnectResponse });
      if (answer.resolution === 'retry_later') return { status: 'retry_later', retryAfterMs: (answer.retry_after_seconds ?? 1) * 1000 };
      await this.ctx.db.run(
        'UPDATE _sync_attachment_state SET user_id = ?, last_bundle_seq_seen = 0, rebuild_required = ?, initialization_id = ? WHERE id = 1',
        [userId, answer.resolution === 'remote_authoritative' ? 1 : 0, answer.initialization_id]);
      let hydratedRows = 0;
      if (answer.resolution === 'remote_authoritative') {
        // A bundle frozen before (an earlier attempt) goes first: it may already have committed.
        if (await readFrozen(this.ctx.db)) await pushOnce(this.ctx, { retryRejected: false });
        if ((await readAttachment(this.ctx.db)).rebuildRequired) hydratedRows = (await rebuild(this.ctx)).rowsApplied;
      }
      if (answer.resolution !== 'initialize_empty') await this.pushAll();
      return { status: 'attached', resolution: answer.resolution, hydratedRows };
    });
  }

  /** Pushes bundle after bundle until nothing is pending (or a bundle is refused). */
  private async pushAll(): Promise<PushResult> {
    let last: PushResult = { status: 'nothing_to_push' };
    let rows = 0;
    let conflicts = 0;
    for (let i = 0; i < MAX_BUNDLES_PER_SYNC; i++) {
      const result = await pushOnce(this.ctx, { retryRejected: false });
      if (result.status === 'nothing_to_push') break;
      if (result.status === 'rejected') return result;
      conflicts += result.conflictsResolved;
      if (result.status === 'committed') {
        rows += result.rowCount;
        last = { ...result, rowCount: rows, conflictsResolved: conflicts };
      } else if (last.status !== 'committed') {
        last = { status: 'resolved_without_commit', conflictsResolved: conflicts };
      }
    }
    return last;
  }

  sync(): Promise<SyncResult> {
    return this.run(async () => {
      await this.requireAttached();
      const frozen = await readFrozen(this.ctx.db);
      // Rule 6: checkpoint recovery resumes by itself (a frozen bundle is pushed first, as it must).
      if (!frozen && (await readAttachment(this.ctx.db)).rebuildRequired) await rebuild(this.ctx);
      const push = await this.pushAll();
      if (push.status === 'rejected') return { push, pull: null };
      const pull = await pullToStable(this.ctx);
      return { push, pull };
    });
  }

  pushPending(): Promise<PushResult> {
    return this.run(async () => {
      await this.requireAttached();
      return pushOnce(this.ctx, { retryRejected: true });
    });
  }

  pullToStable(): Promise<PullResult> {
    return this.run(async () => {
      await this.requireAttached();
      return pullToStable(this.ctx);
    });
  }

  rebuild(options: { rotateSource?: SourceReplacementReason } = {}): Promise<RebuildResult> {
    return this.run(async () => {
      await this.requireAttached();
      const source = await readSource(this.ctx.db);
      const rotate = options.rotateSource ?? (source.rotationReason as SourceReplacementReason | null) ?? undefined;
      return rebuild(this.ctx, rotate ? { rotate } : {});
    });
  }

  discardRejected(): Promise<{ readonly discardedRows: number }> {
    return this.run(async () => {
      const frozen = await readFrozen(this.ctx.db);
      if (!frozen?.rejected) return { discardedRows: 0 };
      await this.ctx.db.transaction(async (tx) => {
        await dropOutbox(tx, frozen);
        // The local rows still hold the rejected values: the next sync restores the server's.
        await tx.run('UPDATE _sync_attachment_state SET rebuild_required = 1 WHERE id = 1');
      });
      return { discardedRows: frozen.rowCount };
    });
  }

  detach(): Promise<DetachResult> {
    return this.run(async () => {
      if ((await readAttachment(this.ctx.db)).userId === null) return { status: 'detached' };
      const [pending] = await this.ctx.db.query<{ n: number }>('SELECT count(*) AS n FROM _sync_dirty');
      const pendingRows = Number(pending?.n ?? 0);
      if (pendingRows > 0 || (await outboxTables(this.ctx.db)).length > 0) return { status: 'blocked', pendingRows };
      const fresh = newSourceId();
      await this.ctx.db.transaction(async (tx) => {
        await inApplyMode(tx, async () => {
          for (const t of [...this.ctx.model.tables].reverse()) await tx.run(`DELETE FROM ${qi(t.local)}`);
        });
        await tx.run('DELETE FROM _sync_row_meta');
        await tx.run('DELETE FROM _sync_skipped');
        await tx.run('DELETE FROM _sync_rebuild_state');
        await tx.run('UPDATE _sync_attachment_state SET user_id = NULL, last_bundle_seq_seen = 0, rebuild_required = 0, initialization_id = NULL WHERE id = 1');
        // A new source for whoever attaches next: the old one belongs to the old user's stream.
        await tx.run('UPDATE _sync_source_state SET source_id = ?, next_source_bundle_id = 1, rotation_new_source_id = NULL, rotation_reason = NULL WHERE id = 1', [fresh]);
      });
      this.ctx.sourceRef.current = fresh;
      return { status: 'detached' };
    });
  }

  /** Reads only, so it does not wait for a sync in progress (the database queue orders it). */
  async pendingStatus(): Promise<PendingStatus> {
    if (this.closed) throw new ClientError(ClientErrorCode.closed, 'the client is closed');
    const [attachment, source, frozen, counts] = [await readAttachment(this.ctx.db), await readSource(this.ctx.db), await readFrozen(this.ctx.db), await countDirty(this.ctx.db)];
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
      rejected: frozen?.rejected ? (JSON.parse(frozen.rejected) as { code: string; message: string }) : null,
    };
  }

  async watch(signal?: AbortSignal): Promise<WatchResult> {
    const mode = this.ctx.config.watch;
    if (mode !== 'long-poll' && mode !== 'websocket') throw new ClientError(ClientErrorCode.watchDisabled, "watch mode is 'off'; open the client with watch: 'websocket' or 'long-poll'");
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

  close(): Promise<void> {
    return this.run(async () => {
      this.closed = true;
      this.socketWatch?.close();
      await this.ctx.db.close();
    });
  }
}
