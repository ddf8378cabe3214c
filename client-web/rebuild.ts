/**
 * Rebuild from a snapshot session (docs/protocol.md §5.6, §10.4–§10.6): fresh installs, pruned
 * history, a committed push whose replay fell below the retained floor, and source recovery.
 *
 * The download is resumable: the session and the next row ordinal are durable, each page is
 * staged into `_sync_stage_<table>` in its own transaction, and only the last transaction
 * touches the application's tables — replacing the synced data set-based, keeping every row with
 * unpushed local changes, and moving the checkpoint to the snapshot's bundle. A crash anywhere
 * resumes at the next page; an expired or vanished session starts over.
 *
 * With `rotate`, the snapshot request carries `source_replacement`: the new source id is recorded
 * before the request (a retry repeats the same rotation, which the server accepts) and adopted
 * as soon as the server confirms, starting again at source bundle id 1. A frozen bundle is
 * returned to the dirty set first: the server refused its tuple, so nothing of it committed, and
 * the local rows still carry every change (the frozen intent is pushed again from the new source).
 */
import { SnapshotSession, type SnapshotPage } from '../core/protocol/read-path.js';
import { SnapshotAnswer } from './wire.js';
import { type SourceReplacementReason } from '../core/protocol/read-path.js';
import { type RebuildResult } from './api.js';
import { applyStagedSnapshot, applyTransaction, inApplyMode, stageSnapshotRows } from './apply.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { isCode } from './http-errors.js';
import { indexStageTables, outboxTables, resetStageTables, stageTable } from './install.js';
import { qi } from './local-schema.js';
import { unfreeze } from './outbox.js';
import { guardSource } from './source-recovery.js';
import { readFrozen, readSource } from './state.js';
import { type SqliteStatements } from './sqlite/port.js';

export interface RebuildOptions {
  /** Rotate to a new source id for this reason (source recovery). */
  readonly rotate?: SourceReplacementReason;
}

interface RebuildState {
  readonly snapshotId: string;
  readonly snapshotBundleSeq: number;
  readonly rowCount: number;
  readonly nextRowOrdinal: number;
  readonly expiresAt: string;
}

async function readRebuildState(db: SqliteStatements): Promise<RebuildState | null> {
  const [row] = await db.query<{ snapshot_id: string | null; snapshot_bundle_seq: number; row_count: number; next_row_ordinal: number; expires_at: string }>(
    'SELECT snapshot_id, snapshot_bundle_seq, row_count, next_row_ordinal, expires_at FROM _sync_rebuild_state WHERE id = 1');
  if (!row?.snapshot_id) return null;
  return {
    snapshotId: row.snapshot_id,
    snapshotBundleSeq: Number(row.snapshot_bundle_seq),
    rowCount: Number(row.row_count),
    nextRowOrdinal: Number(row.next_row_ordinal),
    expiresAt: row.expires_at,
  };
}

async function clearRebuildState(ctx: ClientContext, tx: SqliteStatements): Promise<void> {
  await tx.run('DELETE FROM _sync_rebuild_state WHERE id = 1');
  for (const t of ctx.model.tables) await tx.exec(`DROP TABLE IF EXISTS ${qi(stageTable(t))}`);
}

/** Creates the snapshot session (rotating when asked) and records it with fresh stage tables. */
async function startSession(ctx: ClientContext, rotate: SourceReplacementReason | undefined): Promise<RebuildState & { rotatedTo?: string }> {
  let body: Record<string, unknown> = {};
  let rotatedTo: string | undefined;
  if (rotate) {
    const source = await readSource(ctx.db);
    rotatedTo = source.rotationNewSourceId ?? ctx.newSourceId();
    await ctx.db.run('UPDATE _sync_source_state SET rotation_new_source_id = ?, rotation_reason = ? WHERE id = 1', [rotatedTo, rotate]);
    body = { source_replacement: { previous_source_id: source.sourceId, new_source_id: rotatedTo, reason: rotate } };
  }
  const request = () => ctx.transport.request('POST', '/sync/snapshot-sessions', { body, schema: SnapshotSession });
  // A rotation is the recovery itself; any other snapshot under a refused source needs one.
  const session = rotate ? await request() : await guardSource(ctx, request);
  const state: RebuildState = {
    snapshotId: session.snapshot_id,
    snapshotBundleSeq: session.snapshot_bundle_seq,
    rowCount: session.row_count,
    nextRowOrdinal: 0,
    expiresAt: session.expires_at,
  };
  await ctx.db.transaction(async (tx) => {
    if (rotatedTo) {
      // The server has retired the previous source: adopt the new one at once, so no request
      // goes out under a retired id even if this download never finishes.
      await tx.run(
        'UPDATE _sync_source_state SET source_id = ?, next_source_bundle_id = 1, rotation_new_source_id = NULL, rotation_reason = NULL WHERE id = 1',
        [rotatedTo]);
      ctx.sourceRef.current = rotatedTo;
    }
    await resetStageTables(tx, ctx.model);
    await tx.run(
      `INSERT OR REPLACE INTO _sync_rebuild_state (id, snapshot_id, snapshot_bundle_seq, row_count, next_row_ordinal, expires_at)
       VALUES (1, ?, ?, ?, 0, ?)`,
      [state.snapshotId, state.snapshotBundleSeq, state.rowCount, state.expiresAt]);
  });
  return rotatedTo ? { ...state, rotatedTo } : state;
}

/**
 * Downloads the remaining pages into the stage tables; false when the session is gone. The next
 * page is requested as soon as a page arrives, so the network and the staging transaction overlap;
 * the durable position still moves only after a page is staged.
 */
async function download(ctx: ClientContext, state: RebuildState): Promise<boolean> {
  type Fetched = { readonly page: SnapshotPage } | { readonly error: unknown };
  const fetchPage = (after: number): Promise<Fetched> =>
    ctx.transport
      .request('GET', `/sync/snapshot-sessions/${state.snapshotId}`, {
        query: { after_row_ordinal: after, max_rows: ctx.limits.snapshotPageRows },
        schema: SnapshotAnswer,
      })
      .then((page) => ({ page }), (error: unknown) => ({ error }));
  let next = state.nextRowOrdinal;
  ctx.progress({ phase: 'hydrate', rowsDone: next, rowsTotal: state.rowCount });
  let inflight = next < state.rowCount ? fetchPage(next) : null;
  while (inflight) {
    const fetched = await inflight;
    if ('error' in fetched) {
      if (isCode(fetched.error, 'snapshot_session_not_found', 'snapshot_session_expired')) return false;
      throw fetched.error;
    }
    const { page } = fetched;
    const after = page.next_row_ordinal;
    if (after <= next && page.has_more) {
      throw new ClientError(ClientErrorCode.protocolViolation, `snapshot page after ${next} made no progress`);
    }
    inflight = page.has_more && after < state.rowCount ? fetchPage(after) : null;
    await ctx.db.transaction(async (tx) => {
      await stageSnapshotRows(tx, ctx.model, page.rows);
      await tx.run('UPDATE _sync_rebuild_state SET next_row_ordinal = ? WHERE id = 1', [after]);
    });
    next = after;
    ctx.progress({ phase: 'hydrate', rowsDone: next, rowsTotal: state.rowCount });
  }
  return true;
}

/**
 * Rebuilds the synced tables from a snapshot. Fails closed while a frozen bundle exists, except
 * on the rotate path, which returns it to the dirty set first (see the module comment).
 */
export async function rebuild(ctx: ClientContext, options: RebuildOptions = {}): Promise<RebuildResult> {
  const frozen = await readFrozen(ctx.db);
  if (frozen) {
    if (!options.rotate) {
      throw new ClientError(ClientErrorCode.outboxPending, `a frozen bundle (source bundle ${frozen.sourceBundleId}) must be pushed or discarded before a rebuild`);
    }
    await ctx.db.transaction((tx) => unfreeze(tx, frozen));
  }
  if ((await outboxTables(ctx.db)).length > 0) {
    throw new ClientError(ClientErrorCode.outboxPending, 'an outbox table exists without its push state; refusing to rebuild over it');
  }
  let state = await readRebuildState(ctx.db);
  const resumed = state !== null && !options.rotate;
  let rotatedTo: string | undefined;
  // A rotation always asks for its own session: an older download cannot vouch for the new source.
  if (options.rotate) state = null;
  for (let attempt = 1; ; attempt++) {
    if (!state || Date.parse(state.expiresAt) <= Date.now()) {
      const started = await startSession(ctx, attempt === 1 ? options.rotate : undefined);
      rotatedTo ??= started.rotatedTo;
      state = started;
    }
    if (await download(ctx, state)) break;
    if (attempt >= 3) throw new ClientError(ClientErrorCode.protocolViolation, 'snapshot sessions keep vanishing during download');
    state = null;
  }
  const done = state;
  const rowsApplied = await applyTransaction(ctx.db, ctx.model, async (tx) => {
    await indexStageTables(tx, ctx.model);
    const applied = await inApplyMode(tx, () => applyStagedSnapshot(tx, ctx.model));
    await tx.run('UPDATE _sync_attachment_state SET last_bundle_seq_seen = ?, rebuild_required = 0 WHERE id = 1', [done.snapshotBundleSeq]);
    await clearRebuildState(ctx, tx);
    return applied;
  });
  // Best effort: the server expires it anyway.
  await ctx.transport.request('DELETE', `/sync/snapshot-sessions/${done.snapshotId}`, { retry: false }).catch(() => undefined);
  return { snapshotBundleSeq: done.snapshotBundleSeq, rowsApplied, resumed, ...(rotatedTo ? { rotatedTo } : {}) };
}
