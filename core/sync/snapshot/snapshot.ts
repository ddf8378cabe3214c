/** Snapshot sessions: a frozen, chunked copy of a user's rows for hydration and recovery. */
import { sql } from '../../db/index.js';
import { type RowForm, type SnapshotCreateRequest, type SnapshotSession } from '../../protocol/index.js';
import { unwrap, unwrapPage, pageSize, pageBudgetBytes, type Actor, type RawJson, type SyncContext } from '../context.js';
import { snapshotFormArgument } from '../wire-form.js';

/** Materialises the snapshot with one set-based statement; one round trip. */
export async function createSnapshot(ctx: SyncContext, actor: Actor, request: SnapshotCreateRequest): Promise<SnapshotSession> {
  const replacement = request.source_replacement;
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.snapshot_create(${actor.userId}, ${actor.sourceId}, ${replacement?.previous_source_id ?? null},
      ${replacement?.new_source_id ?? null}, ${replacement?.reason ?? null}, ${ctx.limits.snapshotSessionTtlSeconds},
      ${ctx.limits.maxOpenSnapshotSessionsPerUser}, ${ctx.limits.maintenanceIntervalSeconds}${snapshotFormArgument(ctx, actor, request.row_form)}) AS answer`);
  return unwrap<SnapshotSession>(row?.answer);
}

/** One page; `rowForm` is what the client reads (`arrays` reads objects too). */
export async function snapshotPage(ctx: SyncContext, actor: Actor, snapshotId: string, afterRowOrdinal: number, maxRows: number | undefined,
  rowForm?: RowForm): Promise<RawJson> {
  const limit = pageSize(maxRows, ctx.limits.defaultRowsPerPage, ctx.limits.maxRowsPerPage);
  const [row] = await ctx.db.query<{ error: unknown; body: string | null }>(sql`
    SELECT error, body FROM sync.snapshot_page(${actor.userId}, ${snapshotId}::uuid, ${afterRowOrdinal}, ${limit}, ${pageBudgetBytes(ctx.limits)}${snapshotFormArgument(ctx, actor, rowForm)})`);
  return unwrapPage(row);
}

export async function deleteSnapshot(ctx: SyncContext, actor: Actor, snapshotId: string): Promise<void> {
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT sync.snapshot_delete(${actor.userId}, ${snapshotId}::uuid) AS answer`);
  unwrap(row?.answer);
}
