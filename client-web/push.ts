/**
 * Push (specification items 2–3, rules 1–2, 4): one frozen bundle through a staged push session,
 * then the replay of its authoritative committed rows.
 *
 * Every step is safe to repeat, because the bundle is frozen (its source tuple and canonical
 * request hash are durable in `_sync_push_state`) and the server deduplicates by that tuple:
 *
 *   freeze ─▶ create ─▶ chunks ─▶ commit ─▶ replay
 *               │ already_committed ───────────▶ replay       (a lost answer, rule 2)
 *               │ scope refusals ─▶ connect ─▶ again          (lease expired, scope taken)
 *               │ source refusals ─▶ source_recovery_required (rule 5, explicit)
 *                          chunk out of order ─▶ resume at the server's ordinal
 *                                    push_conflict ─▶ resolve per table ─▶ rewrite ─▶ again
 *                                    commit_outcome_unknown ─▶ create again (same hash)
 *                                    push_rejected ─▶ kept frozen until discardRejected()
 *
 * The replay runs in one local transaction with dropping the outbox and advancing
 * `next_source_bundle_id`, so a crash either keeps the frozen bundle (and the retry converges
 * to `already_committed`) or has finished everything. A replay below the retained floor
 * acknowledges the tuple and rebuilds instead (rule 4).
 */
import { ConnectResponse } from '../core/protocol/connect.js';
import { type Conflict, ErrorBody } from '../core/protocol/meta.js';
import { CommittedRowsAnswer } from './wire.js';
import { type CommittedRow } from '../core/protocol/rows.js';
import { ChunkResponse, CommitResponse, PushSessionCreateResponse, type BundleSummary } from '../core/protocol/push-session.js';
import { jsonStringBytes } from '../core/protocol/wire-bytes.js';
import { type ConflictResolution, type PushResult } from './api.js';
import { applyCommittedRows, applyServerRow, applyTransaction, inApplyMode, setRowMeta, writeLocalRow } from './apply.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { isCode, SOURCE_REFUSALS } from './http-errors.js';
import { dropOutbox, freeze, readOutbox, rewriteOutbox, unfreeze, wireRow, type OutboxRow } from './outbox.js';
import { rebuild } from './rebuild.js';
import { sourceRefused } from './source-recovery.js';
import { type SqliteStatements } from './sqlite/port.js';
import { readAttachment, type FrozenBundle } from './state.js';
import { SyncHttpError } from './transport.js';

/** Rounds of create/upload/commit one push may take (conflict rewrites, unknown outcomes, reconnects). */
const MAX_ROUNDS = 25;
/** Chunks are kept under this share of the server's request limit (JSON framing, headers). */
const REQUEST_BYTES_SHARE = 0.85;

/**
 * A row's share of the request as the server's limit counts it: the invoke event, where the body
 * is an escaped JSON string, so every `"` and `\` of the row's JSON counts twice (contract §10).
 */
const wireBytes = (value: unknown): number => jsonStringBytes(JSON.stringify(value)) - 2;

async function storeRejection(ctx: ClientContext, error: SyncHttpError): Promise<PushResult> {
  const violation = error.body['violation'] ?? error.body['details'] ?? null;
  await ctx.db.run('UPDATE _sync_push_state SET rejected = ? WHERE id = 1', [JSON.stringify({ code: error.code, message: error.message, violation })]);
  return { status: 'rejected', code: error.code, message: error.message, violation };
}

function storedRejection(frozen: FrozenBundle): PushResult {
  const parsed = JSON.parse(frozen.rejected ?? '{}') as { code?: string; message?: string; violation?: unknown };
  return { status: 'rejected', code: parsed.code ?? 'push_rejected', message: parsed.message ?? 'rejected', violation: parsed.violation ?? null };
}

/**
 * Answers a scope refusal at session create by connecting again. The scope may have been
 * initialized meanwhile by another device: then the local data is rebuilt from it (local
 * changes are kept and pushed on top) and the bundle is frozen afresh.
 */
async function reconnect(ctx: ClientContext, frozen: FrozenBundle): Promise<void> {
  const answer = await ctx.transport.request('POST', '/sync/connect', { body: { has_local_pending_rows: true }, schema: ConnectResponse });
  switch (answer.resolution) {
    case 'initialize_local':
    case 'initialize_empty':
      await ctx.db.run('UPDATE _sync_attachment_state SET initialization_id = ? WHERE id = 1', [answer.initialization_id]);
      return;
    case 'retry_later':
      throw new SyncHttpError('scope_initializing', 409, 'another device is initializing this user; try again later', {}, (answer.retry_after_seconds ?? 1) * 1000);
    case 'remote_authoritative':
      await ctx.db.transaction(async (tx) => {
        await unfreeze(tx, frozen);
        await tx.run('UPDATE _sync_attachment_state SET initialization_id = NULL WHERE id = 1');
      });
      await rebuild(ctx);
      return;
  }
}

/** Uploads rows from `start` on; answers when the server holds all of them. */
async function upload(ctx: ClientContext, pushId: string, rows: readonly OutboxRow[], start: number): Promise<void> {
  const budget = Math.floor(ctx.limits.maxRequestBytes * REQUEST_BYTES_SHARE);
  let next = start;
  let chunkRows = ctx.limits.pushChunkRows;
  while (next < rows.length) {
    const chunk = [];
    let bytes = 64;
    for (let i = next; i < rows.length && chunk.length < chunkRows; i++) {
      const wire = (rows[i] as OutboxRow).wire;
      const size = wireBytes(wire) + 1;
      if (chunk.length > 0 && bytes + size > budget) break;
      bytes += size;
      chunk.push(wire);
    }
    try {
      const answer = await ctx.transport.request('POST', `/sync/push-sessions/${pushId}/chunks`, {
        body: { start_row_ordinal: next, rows: chunk },
        schema: ChunkResponse,
      });
      next = answer.next_expected_row_ordinal;
    } catch (error) {
      if (isCode(error, 'push_chunk_out_of_order') && typeof error.body['next_expected_row_ordinal'] === 'number') {
        next = error.body['next_expected_row_ordinal'];
        continue;
      }
      if (isCode(error, 'payload_too_large') && chunk.length > 1) {
        chunkRows = Math.max(1, Math.floor(chunk.length / 2));
        continue;
      }
      throw error;
    }
    ctx.progress({ phase: 'push', rowsDone: next, rowsTotal: rows.length });
  }
}

/** Fetches every committed row of one bundle, page by page. */
export async function fetchBundleRows(ctx: ClientContext, bundleSeq: number): Promise<{ head: BundleSummary; rows: CommittedRow[] }> {
  const rows: CommittedRow[] = [];
  let after = 0;
  for (;;) {
    const page = await ctx.transport.request('GET', `/sync/committed-bundles/${bundleSeq}/rows`, {
      query: { after_row_ordinal: after, max_rows: ctx.limits.rowsPerPage },
      schema: CommittedRowsAnswer,
    });
    rows.push(...page.rows);
    if (!page.has_more) {
      if (rows.length !== page.row_count) {
        throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundleSeq} announced ${page.row_count} rows but served ${rows.length}`);
      }
      const { bundle_seq, source_id, source_bundle_id, row_count, bundle_hash } = page;
      return { head: { bundle_seq, source_id, source_bundle_id, row_count, bundle_hash }, rows };
    }
    if (page.next_row_ordinal <= after) throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundleSeq} page after ${after} made no progress`);
    after = page.next_row_ordinal;
  }
}

/** Marks the frozen tuple as done: outbox gone, next source bundle id past it, lease used. */
async function acknowledge(tx: SqliteStatements, frozen: FrozenBundle): Promise<void> {
  await dropOutbox(tx, frozen);
  await tx.run('UPDATE _sync_source_state SET next_source_bundle_id = max(next_source_bundle_id, ?) WHERE id = 1', [frozen.sourceBundleId + 1]);
  await tx.run('UPDATE _sync_attachment_state SET initialization_id = NULL WHERE id = 1');
}

/** Replays the committed bundle locally (or, below the retained floor, acknowledges and rebuilds). */
async function replay(ctx: ClientContext, frozen: FrozenBundle, bundle: BundleSummary): Promise<void> {
  // The row counts may differ: the server captures its cascades and triggers into the same
  // bundle (a list delete brings the deletes of items this device never saw).
  if (bundle.source_bundle_id !== frozen.sourceBundleId) {
    throw new ClientError(ClientErrorCode.protocolViolation, `the server committed source bundle ${bundle.source_bundle_id} for frozen bundle ${frozen.sourceBundleId}`);
  }
  let fetched: CommittedRow[];
  try {
    fetched = (await fetchBundleRows(ctx, bundle.bundle_seq)).rows;
  } catch (error) {
    if (!isCode(error, 'history_pruned', 'committed_bundle_not_found')) throw error;
    // Rule 4: the bundle is committed but its rows are gone; the snapshot has them.
    await ctx.db.transaction(async (tx) => {
      await acknowledge(tx, frozen);
      await tx.run('UPDATE _sync_attachment_state SET rebuild_required = 1 WHERE id = 1');
    });
    await rebuild(ctx);
    return;
  }
  await applyTransaction(ctx.db, ctx.model, async (tx) => {
    await inApplyMode(tx, () => applyCommittedRows(tx, ctx.model, fetched, true));
    await acknowledge(tx, frozen);
    // The checkpoint moves only when no earlier bundle is missing locally.
    await tx.run('UPDATE _sync_attachment_state SET last_bundle_seq_seen = ? WHERE id = 1 AND last_bundle_seq_seen = ?', [bundle.bundle_seq, bundle.bundle_seq - 1]);
    // An interrupted snapshot download older than this bundle would take its rows away again.
    await tx.run('DELETE FROM _sync_rebuild_state WHERE snapshot_bundle_seq < ?', [bundle.bundle_seq]);
  });
}

/** The resolution of one conflict by its table's policy (server wins without a resolver). */
async function decide(row: OutboxRow, conflict: Conflict): Promise<ConflictResolution> {
  if (!row.table.resolver) return { keep: 'server' };
  return row.table.resolver({
    schema: row.table.schema,
    table: row.table.table,
    key: row.keyWire,
    localOp: row.wire.op,
    localPayload: row.wire.payload,
    serverRowVersion: conflict.server_row_version,
    serverRowDeleted: conflict.server_row_deleted,
    serverPayload: conflict.server_row_deleted ? null : conflict.server_row,
  });
}

/**
 * Resolves the conflicts the server reported and rewrites the frozen bundle (same tuple; a
 * refused commit consumed nothing). Answers the new bundle, or null when nothing is left.
 */
async function resolveConflicts(ctx: ClientContext, frozen: FrozenBundle, rows: readonly OutboxRow[], conflicts: readonly Conflict[]): Promise<FrozenBundle | null> {
  const index = new Map(rows.map((r, i) => [`${r.table.wireName}\u0000${r.keyWire}`, i]));
  const decisions: { at: number; conflict: Conflict; resolution: ConflictResolution }[] = [];
  for (const conflict of conflicts) {
    const keyText = Object.values(conflict.key)[0] ?? '';
    const at = index.get(`${conflict.schema}.${conflict.table}\u0000${keyText}`);
    if (at === undefined) throw new ClientError(ClientErrorCode.protocolViolation, `a conflict names ${conflict.schema}.${conflict.table} ${keyText}, which is not in the pushed bundle`);
    // Resolvers run before the transaction: they are application code and may be slow.
    decisions.push({ at, conflict, resolution: await decide(rows[at] as OutboxRow, conflict) });
  }
  const next: (OutboxRow | null)[] = [...rows];
  return applyTransaction(ctx.db, ctx.model, async (tx) => {
    await inApplyMode(tx, async () => {
      for (const { at, conflict, resolution } of decisions) {
        const row = rows[at] as OutboxRow;
        const serverVersion = conflict.server_row_version;
        const serverGone = conflict.server_row_deleted || conflict.server_row === null;
        const [dirty] = await tx.query<{ state: number }>('SELECT state FROM _sync_dirty WHERE tbl = ? AND key = ?', [row.table.local, row.keyLocal]);
        if (resolution.keep === 'server') {
          next[at] = null;
          if (dirty?.state === 2) {
            // Changed again after the freeze: that newer edit stays and is pushed on top of the server's row.
            await setRowMeta(tx, row.table, row.keyLocal, serverVersion, serverGone);
            await tx.run('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ?', [row.table.local, row.keyLocal]);
          } else {
            await applyServerRow(tx, row.table, row.keyLocal, serverVersion, serverGone ? null : conflict.server_row);
          }
          continue;
        }
        const payload = resolution.keep === 'local' ? row.wire.payload : resolution.payload;
        await setRowMeta(tx, row.table, row.keyLocal, serverVersion, serverGone);
        if (payload === null) {
          next[at] = serverGone ? null : { ...row, wire: wireRow(row.table, row.keyWire, 'DELETE', serverVersion, null) };
          if (resolution.keep === 'merged') await writeLocalRow(tx, row.table, row.keyLocal, null);
          if (serverGone) {
            // Both sides deleted: nothing to push; a newer local edit (state 2) stays dirty.
            await tx.run('DELETE FROM _sync_dirty WHERE tbl = ? AND key = ? AND state = 1', [row.table.local, row.keyLocal]);
            await tx.run('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ? AND state = 2', [row.table.local, row.keyLocal]);
          }
          continue;
        }
        const full = { ...payload, [row.table.key.name]: row.keyWire };
        next[at] = { ...row, wire: wireRow(row.table, row.keyWire, serverGone ? 'INSERT' : 'UPDATE', serverVersion, full) };
        // Capture is off: the merged row is already in the outbox.
        if (resolution.keep === 'merged') await writeLocalRow(tx, row.table, row.keyLocal, full);
      }
    });
    return rewriteOutbox(tx, frozen, next.filter((r): r is OutboxRow => r !== null));
  });
}

export interface PushOptions {
  /** Push a bundle the server rejected before (pushPending), instead of reporting it (sync). */
  readonly retryRejected: boolean;
}

/** Freezes (or resumes) one bundle and pushes it to the end. */
export async function pushOnce(ctx: ClientContext, options: PushOptions): Promise<PushResult> {
  const limits = { maxRows: ctx.limits.maxRowsPerBundle, maxBytes: Math.floor(ctx.limits.maxBytesPerBundle * 0.9) };
  const first = await ctx.db.transaction((tx) => freeze(tx, ctx.model, limits));
  if (!first) return { status: 'nothing_to_push' };
  let frozen: FrozenBundle = first;
  if (frozen.rejected && !options.retryRejected) return storedRejection(frozen);
  let conflictsResolved = 0;
  let reconnects = 0;
  for (let round = 1; round <= MAX_ROUNDS; round++) {
    const attachment = await readAttachment(ctx.db);
    let created: PushSessionCreateResponse;
    try {
      created = await ctx.transport.request('POST', '/sync/push-sessions', {
        body: {
          source_bundle_id: frozen.sourceBundleId,
          planned_row_count: frozen.rowCount,
          request_hash: frozen.requestHash,
          ...(attachment.initializationId ? { initialization_id: attachment.initializationId } : {}),
        },
        schema: PushSessionCreateResponse,
      });
    } catch (error) {
      if (isCode(error, ...SOURCE_REFUSALS)) return sourceRefused(ctx, error);
      if (isCode(error, 'scope_uninitialized', 'initialization_expired', 'initialization_stale') && reconnects++ < 3) {
        await reconnect(ctx, frozen);
        const again = await ctx.db.transaction((tx) => freeze(tx, ctx.model, limits));
        if (!again) return { status: 'nothing_to_push' };
        frozen = again;
        continue;
      }
      if (isCode(error, 'payload_too_large') && frozen.rowCount > 1) {
        // The server measures the bundle larger than the freeze did: freeze half as many rows.
        const smaller: typeof limits = { maxRows: Math.floor(frozen.rowCount / 2), maxBytes: limits.maxBytes };
        const toSplit = frozen;
        const again: FrozenBundle | null = await ctx.db.transaction(async (tx) => {
          await unfreeze(tx, toSplit);
          return freeze(tx, ctx.model, smaller);
        });
        if (!again) return { status: 'nothing_to_push' };
        frozen = again;
        continue;
      }
      if (isCode(error, 'invalid_request', 'payload_too_large')) return storeRejection(ctx, error);
      throw error;
    }
    if (created.status === 'already_committed') {
      await replay(ctx, frozen, created);
      return { status: 'committed', bundleSeq: created.bundle_seq, sourceBundleId: created.source_bundle_id, rowCount: created.row_count, conflictsResolved, alreadyCommitted: true };
    }
    const rows = await readOutbox(ctx.db, ctx.model, frozen);
    let start = created.next_expected_row_ordinal;
    let committed: CommitResponse | null = null;
    let restart = false;
    for (let attempt = 0; attempt < 4 && !committed && !restart; attempt++) {
      try {
        await upload(ctx, created.push_id, rows, start);
        committed = await ctx.transport.request('POST', `/sync/push-sessions/${created.push_id}/commit`, { body: {}, schema: CommitResponse });
      } catch (error) {
        if (isCode(error, 'push_incomplete') && typeof error.body['next_expected_row_ordinal'] === 'number') {
          start = error.body['next_expected_row_ordinal'];
          continue;
        }
        if (isCode(error, 'push_session_not_found', 'push_session_expired', 'commit_outcome_unknown')) {
          // Start over from create: the same tuple and hash converge to already_committed if it landed.
          restart = true;
          continue;
        }
        if (isCode(error, 'push_conflict')) {
          const body = ErrorBody.parse(error.body);
          const conflicts = body.conflicts ?? (body.conflict ? [body.conflict] : []);
          if (conflicts.length === 0) throw error;
          conflictsResolved += conflicts.length;
          const rewritten = await resolveConflicts(ctx, frozen, rows, conflicts);
          if (!rewritten) return { status: 'resolved_without_commit', conflictsResolved };
          frozen = rewritten;
          restart = true;
          continue;
        }
        if (isCode(error, 'push_rejected', 'invalid_request', 'payload_too_large')) return storeRejection(ctx, error);
        if (isCode(error, ...SOURCE_REFUSALS)) return sourceRefused(ctx, error);
        throw error;
      }
    }
    if (!committed) continue;
    await replay(ctx, frozen, committed);
    return { status: 'committed', bundleSeq: committed.bundle_seq, sourceBundleId: committed.source_bundle_id, rowCount: committed.row_count, conflictsResolved, alreadyCommitted: false };
  }
  throw new ClientError(ClientErrorCode.pushNotConverging, `source bundle ${frozen.sourceBundleId} did not commit within ${MAX_ROUNDS} rounds`);
}
