/**
 * The client's durable lifecycle state, and the only module that writes it (the tables are
 * described in install.ts):
 *
 * - `_sync_attachment_state`: the attached user, the read checkpoint, `rebuild_required`, the
 *   initialization lease of a first push;
 * - `_sync_source_state`: this device's source id, the next source bundle id, a rotation in flight
 *   or required;
 * - `_sync_push_state`: the one frozen bundle and the server's rejection of it;
 * - `_sync_rebuild_state`: a resumable snapshot download;
 * - `_sync_quarantine`: rows moved out of rejected bundles;
 * - `_sync_reached_ceiling`: the attached user's data reached the server's frozen ceiling once.
 *
 * Every write here is a named transition taking the caller's transaction. The coordinator
 * (coordinator.ts) decides which transition happens when; steps only record their own progress
 * (a staged snapshot page). A unit test (test/client-architecture.test.ts) keeps every statement
 * that writes these tables in this file.
 */
import { type ServerErrorCode } from './errors.js';
import { type Facts } from './machine.js';
import { type SqlValue, type SqliteStatements } from './sqlite/port.js';
import { type ProtocolVersion } from '../core/protocol/version.js';
import { type SnapshotPage, type SourceReplacementReason } from '../core/protocol/read-path.js';

export interface AttachmentState {
  readonly userId: string | null;
  readonly checkpoint: number;
  readonly rebuildRequired: boolean;
  readonly initializationId: string | null;
}

export interface SourceState {
  readonly sourceId: string;
  readonly nextSourceBundleId: number;
  /** The new source id of a rotation requested from the server but not confirmed yet. */
  readonly rotationNewSourceId: string | null;
  /** Set when the server refused this source: the next rebuild rotates for this reason. */
  readonly rotationReason: SourceReplacementReason | null;
}

/**
 * The SQLSTATE of a row too large to push: the server's for a row no response could carry
 * (LS413), the client's for a row no request can (a one-row chunk refused with 413).
 */
export const ROW_TOO_LARGE = 'LS413';

/** The constraint a rejected bundle broke, as the server names it (`push_rejected`). */
export interface Violation {
  readonly sqlstate: string;
  readonly constraint: string | null;
  readonly schema: string | null;
  readonly table: string | null;
  readonly column?: string | null;
  /** The sync key of the offending row, when the server could tell it. */
  readonly key: Readonly<Record<string, string>> | null;
}

/**
 * Why a row or bundle was refused: the server's code, or `invalid_local_row` for a row the client
 * could not encode for the wire (set aside at freeze).
 */
export type RejectionCode = ServerErrorCode | 'invalid_local_row';

/**
 * The server's refusal of a frozen bundle (`push_rejected`, or a row the server cannot take), or
 * the client's own refusal of a row it cannot encode (`invalid_local_row`, quarantine only).
 */
export interface Rejection {
  readonly code: RejectionCode;
  readonly message: string;
  readonly violation: Violation | null;
  /** The server's `details` (row problems of an `invalid_request`), when it sent any. */
  readonly details?: unknown;
}

export interface FrozenBundle {
  readonly outboxTable: string;
  /** The protocol its rows were frozen in: they are pushed in it, their request hash is over it. */
  readonly protocol: ProtocolVersion;
  readonly sourceId: string;
  readonly sourceBundleId: number;
  readonly rowCount: number;
  readonly requestHash: string;
  readonly initializationId: string | null;
  /** The server's rejection, when the last push of this bundle was rejected. */
  readonly rejected: Rejection | null;
}

/** A snapshot download in progress. */
export interface SnapshotDownload {
  readonly snapshotId: string;
  readonly snapshotBundleSeq: number;
  readonly rowCount: number;
  readonly nextRowOrdinal: number;
  readonly expiresAt: string;
  /**
   * The rows' mean size on the wire (the create's byte_count / row_count), known to the run that
   * created the session only (not stored: a resumed download plans without it).
   */
  readonly bytesPerRow?: number;
  /** The session's first page, where the create answered it (`snapshot_first_page`); not stored either. */
  readonly firstPage?: SnapshotPage;
}

// ── Reads ───────────────────────────────────────────────────────────────────────────────────────

export async function readAttachment(db: SqliteStatements): Promise<AttachmentState> {
  const [row] = await db.query<{ user_id: string | null; last_bundle_seq_seen: number; rebuild_required: number; initialization_id: string | null }>(
    'SELECT user_id, last_bundle_seq_seen, rebuild_required, initialization_id FROM _sync_attachment_state WHERE id = 1');
  return {
    userId: row?.user_id ?? null,
    checkpoint: Number(row?.last_bundle_seq_seen ?? 0),
    rebuildRequired: row?.rebuild_required === 1,
    initializationId: row?.initialization_id ?? null,
  };
}

const NO_SOURCE_ROW = 'lockstep: _sync_source_state is missing its row';

export async function readSource(db: SqliteStatements): Promise<SourceState> {
  const [row] = await db.query<{ source_id: string; next_source_bundle_id: number; rotation_new_source_id: string | null; rotation_reason: string | null }>(
    'SELECT source_id, next_source_bundle_id, rotation_new_source_id, rotation_reason FROM _sync_source_state WHERE id = 1');
  if (!row) throw new Error(NO_SOURCE_ROW);
  return {
    sourceId: row.source_id,
    nextSourceBundleId: Number(row.next_source_bundle_id),
    rotationNewSourceId: row.rotation_new_source_id,
    rotationReason: row.rotation_reason as SourceReplacementReason | null,
  };
}

function parseRejection(text: string | null): Rejection | null {
  if (text === null) return null;
  const parsed = JSON.parse(text) as Partial<Rejection>;
  return {
    code: parsed.code ?? 'push_rejected',
    message: parsed.message ?? 'rejected',
    violation: parsed.violation ?? null,
    ...(parsed.details !== undefined ? { details: parsed.details } : {}),
  };
}

export async function readFrozen(db: SqliteStatements): Promise<FrozenBundle | null> {
  const [row] = await db.query<{ outbox_table: string; protocol: number; source_id: string; source_bundle_id: number; row_count: number; request_hash: string; initialization_id: string | null; rejected: string | null }>(
    'SELECT outbox_table, protocol, source_id, source_bundle_id, row_count, request_hash, initialization_id, rejected FROM _sync_push_state WHERE id = 1');
  if (!row) return null;
  return {
    outboxTable: row.outbox_table,
    protocol: row.protocol === 2 ? 2 : 1,
    sourceId: row.source_id,
    sourceBundleId: Number(row.source_bundle_id),
    rowCount: Number(row.row_count),
    requestHash: row.request_hash,
    initializationId: row.initialization_id,
    rejected: parseRejection(row.rejected),
  };
}

/**
 * What a sync run decides on (the coordinator's facts), in one statement: whether a bundle is
 * frozen and whether the server rejected it, whether a rebuild is required, whether the server
 * refused this device's source. A run reads them at its start and after each push (three reads
 * before, each a round trip to the worker's database).
 */
export async function readRunFacts(db: SqliteStatements): Promise<Facts> {
  const [row] = await db.query<{ frozen: string | null; rebuild_required: number | null; source_refused: number | null }>(
    `SELECT (SELECT CASE WHEN rejected IS NULL THEN 'pending' ELSE 'rejected' END FROM _sync_push_state WHERE id = 1) AS frozen,
            (SELECT rebuild_required FROM _sync_attachment_state WHERE id = 1) AS rebuild_required,
            (SELECT rotation_reason IS NOT NULL FROM _sync_source_state WHERE id = 1) AS source_refused`);
  if (row?.source_refused === null || row?.source_refused === undefined) throw new Error(NO_SOURCE_ROW);
  return {
    frozen: row.frozen === 'rejected' ? 'rejected' : row.frozen === 'pending' ? 'pending' : 'none',
    rebuildRequired: row.rebuild_required === 1,
    sourceRefused: row.source_refused === 1,
  };
}

/** What `pendingStatus` reports, read by `readPendingStatus`. */
export interface PendingState {
  readonly attachment: AttachmentState;
  readonly source: SourceState;
  /** The frozen bundle's row count, source bundle id and refusal; null when none is frozen. */
  readonly frozen: { readonly rowCount: number; readonly sourceBundleId: number; readonly rejected: Rejection | null } | null;
  /** Changed rows not yet frozen. */
  readonly dirtyRows: number;
  readonly quarantinedRows: number;
}

/**
 * The attachment, the source, the frozen bundle and the counts of dirty and quarantined rows in
 * one statement: one consistent read, and one call through the database queue instead of five
 * (the sync loop reads them before every sync and after it, ahead of the app's own queries).
 */
export async function readPendingStatus(db: SqliteStatements): Promise<PendingState> {
  const [row] = await db.query<{
    source_id: string; next_source_bundle_id: number; rotation_new_source_id: string | null; rotation_reason: string | null;
    user_id: string | null; last_bundle_seq_seen: number | null; rebuild_required: number | null; initialization_id: string | null;
    frozen_rows: number | null; frozen_source_bundle_id: number | null; rejected: string | null; dirty: number; quarantined: number;
  }>(`SELECT s.source_id, s.next_source_bundle_id, s.rotation_new_source_id, s.rotation_reason,
  a.user_id, a.last_bundle_seq_seen, a.rebuild_required, a.initialization_id,
  p.row_count AS frozen_rows, p.source_bundle_id AS frozen_source_bundle_id, p.rejected,
  (SELECT coalesce(sum(state <> 1), 0) FROM _sync_dirty) AS dirty,
  (SELECT count(*) FROM _sync_quarantine) AS quarantined
FROM _sync_source_state s LEFT JOIN _sync_attachment_state a ON a.id = 1 LEFT JOIN _sync_push_state p ON p.id = 1
WHERE s.id = 1`);
  if (!row) throw new Error(NO_SOURCE_ROW);
  return {
    attachment: {
      userId: row.user_id ?? null,
      checkpoint: Number(row.last_bundle_seq_seen ?? 0),
      rebuildRequired: row.rebuild_required === 1,
      initializationId: row.initialization_id ?? null,
    },
    source: {
      sourceId: row.source_id,
      nextSourceBundleId: Number(row.next_source_bundle_id),
      rotationNewSourceId: row.rotation_new_source_id,
      rotationReason: row.rotation_reason as SourceReplacementReason | null,
    },
    frozen: row.frozen_rows === null ? null : { rowCount: Number(row.frozen_rows), sourceBundleId: Number(row.frozen_source_bundle_id), rejected: parseRejection(row.rejected) },
    dirtyRows: Number(row.dirty ?? 0),
    quarantinedRows: Number(row.quarantined ?? 0),
  };
}

export async function readSnapshotDownload(db: SqliteStatements): Promise<SnapshotDownload | null> {
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

/** Keys changed locally and not yet frozen (state 0 or 2), and keys frozen (state 1 or 2). */
export async function countDirty(db: SqliteStatements): Promise<{ dirty: number; frozen: number }> {
  const [row] = await db.query<{ dirty: number; frozen: number }>(
    'SELECT coalesce(sum(state <> 1), 0) AS dirty, coalesce(sum(state <> 0), 0) AS frozen FROM _sync_dirty');
  return { dirty: Number(row?.dirty ?? 0), frozen: Number(row?.frozen ?? 0) };
}

// ── Attachment ──────────────────────────────────────────────────────────────────────────────────

/** A user attached (connect answered): the checkpoint starts over, hydration pending or not. */
export async function attachUser(tx: SqliteStatements, userId: string, options: { rebuildRequired: boolean; initializationId: string | null }): Promise<void> {
  await tx.run(
    'UPDATE _sync_attachment_state SET user_id = ?, last_bundle_seq_seen = 0, rebuild_required = ?, initialization_id = ? WHERE id = 1',
    [userId, options.rebuildRequired ? 1 : 0, options.initializationId]);
  await tx.run('DELETE FROM _sync_reached_ceiling');
}

/** The user is gone: no checkpoint, nothing required, no lease. */
export async function detachUser(tx: SqliteStatements): Promise<void> {
  await tx.run('UPDATE _sync_attachment_state SET user_id = NULL, last_bundle_seq_seen = 0, rebuild_required = 0, initialization_id = NULL WHERE id = 1');
  await tx.run('DELETE FROM _sync_reached_ceiling');
}

/**
 * The attached user's data reached the server's frozen ceiling (a pull to its stable bundle, or a
 * snapshot applied): from now on the local rows are a complete copy as of some moment, which live
 * queries report (`complete`). Recorded once per attachment.
 */
export async function recordCeilingReached(tx: SqliteStatements, userId: string, bundleSeq: number): Promise<void> {
  await tx.run('INSERT OR REPLACE INTO _sync_reached_ceiling (id, user_id, bundle_seq, reached_at) VALUES (1, ?, ?, ?)', [userId, bundleSeq, new Date().toISOString()]);
}

/** The user whose data reached the server's frozen ceiling, or null. */
export async function readCeilingReached(db: SqliteStatements): Promise<string | null> {
  const [row] = await db.query<{ user_id: string }>('SELECT user_id FROM _sync_reached_ceiling WHERE id = 1');
  return row?.user_id ?? null;
}

export async function setInitializationId(tx: SqliteStatements, initializationId: string | null): Promise<void> {
  await tx.run('UPDATE _sync_attachment_state SET initialization_id = ? WHERE id = 1', [initializationId]);
}

export async function setRebuildRequired(tx: SqliteStatements, required: boolean): Promise<void> {
  await tx.run('UPDATE _sync_attachment_state SET rebuild_required = ? WHERE id = 1', [required ? 1 : 0]);
}

/** Pulled bundles up to `bundleSeq` are applied. */
export async function advanceCheckpoint(tx: SqliteStatements, bundleSeq: number): Promise<void> {
  await tx.run('UPDATE _sync_attachment_state SET last_bundle_seq_seen = max(last_bundle_seq_seen, ?) WHERE id = 1', [bundleSeq]);
}

/** This device's own bundle was replayed: the checkpoint moves only when no earlier bundle is missing locally. */
export async function advanceCheckpointPastOwn(tx: SqliteStatements, bundleSeq: number): Promise<void> {
  await tx.run('UPDATE _sync_attachment_state SET last_bundle_seq_seen = ? WHERE id = 1 AND last_bundle_seq_seen = ?', [bundleSeq, bundleSeq - 1]);
}

/** A snapshot was applied: its bundle is the checkpoint and no rebuild is required any more. */
export async function checkpointAtSnapshot(tx: SqliteStatements, snapshotBundleSeq: number): Promise<void> {
  await tx.run('UPDATE _sync_attachment_state SET last_bundle_seq_seen = ?, rebuild_required = 0 WHERE id = 1', [snapshotBundleSeq]);
}

// ── Source ──────────────────────────────────────────────────────────────────────────────────────

/** The server refused this source: the next rebuild rotates (the first reason recorded stays). */
export async function recordSourceRefusal(tx: SqliteStatements, reason: SourceReplacementReason): Promise<void> {
  await tx.run('UPDATE _sync_source_state SET rotation_reason = coalesce(rotation_reason, ?) WHERE id = 1', [reason]);
}

/** A rotation is about to be requested: recorded first, so a retry after a crash repeats the same one. */
export async function recordRotationIntent(tx: SqliteStatements, newSourceId: string, reason: SourceReplacementReason): Promise<void> {
  await tx.run('UPDATE _sync_source_state SET rotation_new_source_id = ?, rotation_reason = ? WHERE id = 1', [newSourceId, reason]);
}

/** A new source takes over (a confirmed rotation, or a detach): its bundle ids start at 1 again. */
export async function adoptSource(tx: SqliteStatements, sourceId: string): Promise<void> {
  await tx.run(
    'UPDATE _sync_source_state SET source_id = ?, next_source_bundle_id = 1, rotation_new_source_id = NULL, rotation_reason = NULL WHERE id = 1',
    [sourceId]);
}

// ── The frozen bundle ───────────────────────────────────────────────────────────────────────────

export async function recordFrozen(tx: SqliteStatements, frozen: FrozenBundle): Promise<void> {
  await tx.run(
    `INSERT INTO _sync_push_state (id, outbox_table, protocol, source_id, source_bundle_id, row_count, request_hash, initialization_id, rejected)
     VALUES (1, ?, ?, ?, ?, ?, ?, ?, NULL)`,
    [frozen.outboxTable, frozen.protocol, frozen.sourceId, frozen.sourceBundleId, frozen.rowCount, frozen.requestHash, frozen.initializationId]);
}

/** The frozen rows were rewritten (conflicts resolved, rows quarantined): same tuple, new hash, no rejection. */
export async function updateFrozen(tx: SqliteStatements, rowCount: number, requestHash: string): Promise<void> {
  await tx.run('UPDATE _sync_push_state SET row_count = ?, request_hash = ?, rejected = NULL WHERE id = 1', [rowCount, requestHash]);
}

export async function recordRejection(tx: SqliteStatements, rejection: Rejection): Promise<void> {
  await tx.run('UPDATE _sync_push_state SET rejected = ? WHERE id = 1', [JSON.stringify(rejection)]);
}

export async function clearFrozen(tx: SqliteStatements): Promise<void> {
  await tx.run('DELETE FROM _sync_push_state WHERE id = 1');
}

/** The frozen tuple committed: the next source bundle id moves past it and the lease is used. */
export async function acknowledgeTuple(tx: SqliteStatements, sourceBundleId: number): Promise<void> {
  await clearFrozen(tx);
  await tx.run('UPDATE _sync_source_state SET next_source_bundle_id = max(next_source_bundle_id, ?) WHERE id = 1', [sourceBundleId + 1]);
  await setInitializationId(tx, null);
}

// ── Snapshot downloads ──────────────────────────────────────────────────────────────────────────

export async function recordSnapshotDownload(tx: SqliteStatements, d: SnapshotDownload): Promise<void> {
  await tx.run(
    `INSERT OR REPLACE INTO _sync_rebuild_state (id, snapshot_id, snapshot_bundle_seq, row_count, next_row_ordinal, expires_at)
     VALUES (1, ?, ?, ?, ?, ?)`,
    [d.snapshotId, d.snapshotBundleSeq, d.rowCount, d.nextRowOrdinal, d.expiresAt]);
}

/** A page is staged: the download resumes after it. */
export async function recordSnapshotProgress(tx: SqliteStatements, nextRowOrdinal: number): Promise<void> {
  await tx.run('UPDATE _sync_rebuild_state SET next_row_ordinal = ? WHERE id = 1', [nextRowOrdinal]);
}

export async function clearSnapshotDownload(tx: SqliteStatements): Promise<void> {
  await tx.run('DELETE FROM _sync_rebuild_state WHERE id = 1');
}

/** Rows up to `bundleSeq` are applied: an interrupted download of an older snapshot must not be resumed (it would take them away). */
export async function forgetSnapshotsBefore(tx: SqliteStatements, bundleSeq: number): Promise<void> {
  await tx.run('DELETE FROM _sync_rebuild_state WHERE snapshot_bundle_seq < ?', [bundleSeq]);
}

// ── Quarantine ──────────────────────────────────────────────────────────────────────────────────

/** One row moved out of a rejected bundle, as stored. */
export interface QuarantineRecord {
  readonly id: number;
  readonly tbl: string;
  readonly keyLocal: SqlValue;
  readonly keyWire: string;
  readonly op: 'INSERT' | 'UPDATE' | 'DELETE';
  /** The local row's values (JSON of the wire payload), null for a delete. */
  readonly payload: Record<string, unknown> | null;
  readonly baseRowVersion: number;
  readonly rejection: Rejection;
  /** Set for a row moved because it depends by foreign key on the row with this id. */
  readonly dependsOn: number | null;
  readonly sourceBundleId: number;
  readonly quarantinedAt: string;
}

export async function insertQuarantine(tx: SqliteStatements, r: Omit<QuarantineRecord, 'id'>): Promise<number> {
  await tx.run(
    `INSERT INTO _sync_quarantine (tbl, key_local, key_wire, op, payload, base_row_version, rejection, depends_on, source_bundle_id, quarantined_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [r.tbl, r.keyLocal, r.keyWire, r.op, r.payload === null ? null : JSON.stringify(r.payload), r.baseRowVersion, JSON.stringify(r.rejection),
      r.dependsOn, r.sourceBundleId, r.quarantinedAt]);
  const [row] = await tx.query<{ id: number }>('SELECT last_insert_rowid() AS id');
  return Number(row?.id);
}

export async function readQuarantine(db: SqliteStatements, id?: number): Promise<QuarantineRecord[]> {
  const rows = await db.query<{ id: number; tbl: string; key_local: SqlValue; key_wire: string; op: string; payload: string | null; base_row_version: number; rejection: string; depends_on: number | null; source_bundle_id: number; quarantined_at: string }>(
    `SELECT id, tbl, key_local, key_wire, op, payload, base_row_version, rejection, depends_on, source_bundle_id, quarantined_at
       FROM _sync_quarantine ${id === undefined ? '' : 'WHERE id = ?'} ORDER BY id`, id === undefined ? [] : [id]);
  return rows.map((r) => ({
    id: Number(r.id),
    tbl: r.tbl,
    keyLocal: r.key_local,
    keyWire: r.key_wire,
    op: r.op as QuarantineRecord['op'],
    payload: r.payload === null ? null : (JSON.parse(r.payload) as Record<string, unknown>),
    baseRowVersion: Number(r.base_row_version),
    rejection: parseRejection(r.rejection) as Rejection,
    dependsOn: r.depends_on === null ? null : Number(r.depends_on),
    sourceBundleId: Number(r.source_bundle_id),
    quarantinedAt: r.quarantined_at,
  }));
}

export async function countQuarantine(db: SqliteStatements): Promise<number> {
  const [row] = await db.query<{ n: number }>('SELECT count(*) AS n FROM _sync_quarantine');
  return Number(row?.n ?? 0);
}

export async function deleteQuarantine(tx: SqliteStatements, id: number): Promise<void> {
  await tx.run('DELETE FROM _sync_quarantine WHERE id = ?', [id]);
}
