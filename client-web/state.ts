/** Reads and writes of the client's durable state rows (see client-web/install.ts). */
import { type SqliteStatements } from './sqlite/port.js';

export interface AttachmentState {
  readonly userId: string | null;
  readonly checkpoint: number;
  readonly rebuildRequired: boolean;
  readonly initializationId: string | null;
}

export interface SourceState {
  readonly sourceId: string;
  readonly nextSourceBundleId: number;
  readonly rotationNewSourceId: string | null;
  readonly rotationReason: string | null;
}

export interface FrozenBundle {
  readonly outboxTable: string;
  readonly sourceId: string;
  readonly sourceBundleId: number;
  readonly rowCount: number;
  readonly requestHash: string;
  readonly initializationId: string | null;
  /** The server's rejection (JSON of its error body), when the last push was rejected. */
  readonly rejected: string | null;
}

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

export async function readSource(db: SqliteStatements): Promise<SourceState> {
  const [row] = await db.query<{ source_id: string; next_source_bundle_id: number; rotation_new_source_id: string | null; rotation_reason: string | null }>(
    'SELECT source_id, next_source_bundle_id, rotation_new_source_id, rotation_reason FROM _sync_source_state WHERE id = 1');
  if (!row) throw new Error('lockstep: _sync_source_state is missing its row');
  return {
    sourceId: row.source_id,
    nextSourceBundleId: Number(row.next_source_bundle_id),
    rotationNewSourceId: row.rotation_new_source_id,
    rotationReason: row.rotation_reason,
  };
}

export async function readFrozen(db: SqliteStatements): Promise<FrozenBundle | null> {
  const [row] = await db.query<{ outbox_table: string; source_id: string; source_bundle_id: number; row_count: number; request_hash: string; initialization_id: string | null; rejected: string | null }>(
    'SELECT outbox_table, source_id, source_bundle_id, row_count, request_hash, initialization_id, rejected FROM _sync_push_state WHERE id = 1');
  if (!row) return null;
  return {
    outboxTable: row.outbox_table,
    sourceId: row.source_id,
    sourceBundleId: Number(row.source_bundle_id),
    rowCount: Number(row.row_count),
    requestHash: row.request_hash,
    initializationId: row.initialization_id,
    rejected: row.rejected,
  };
}

export async function setRebuildRequired(db: SqliteStatements, required: boolean): Promise<void> {
  await db.run('UPDATE _sync_attachment_state SET rebuild_required = ? WHERE id = 1', [required ? 1 : 0]);
}

/** Keys changed locally and not yet frozen (state 0 or 2). */
export async function countDirty(db: SqliteStatements): Promise<{ dirty: number; frozen: number }> {
  const [row] = await db.query<{ dirty: number; frozen: number }>(
    'SELECT coalesce(sum(state <> 1), 0) AS dirty, coalesce(sum(state <> 0), 0) AS frozen FROM _sync_dirty');
  return { dirty: Number(row?.dirty ?? 0), frozen: Number(row?.frozen ?? 0) };
}
