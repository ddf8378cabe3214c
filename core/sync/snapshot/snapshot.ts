/** Snapshot sessions: a frozen, chunked copy of a user's rows for hydration and recovery. */
import { sql } from '../../db/index.js';
import { type SnapshotCreateRequest, type SnapshotSession } from '../../protocol/index.js';
import { unwrap, unwrapPage, pageSize, pageBudgetBytes, type Actor, type RawJson, type SyncContext } from '../context.js';
import { formArgument } from '../wire-form.js';

/** Materialises the snapshot with one set-based statement; one round trip. */
export async function createSnapshot(ctx: SyncContext, actor: Actor, request: SnapshotCreateRequest): Promise<SnapshotSession> {
  const replacement = request.source_replacement;
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.snapshot_create(${actor.userId}, ${actor.sourceId}, ${replacement?.previous_source_id ?? null},
      ${replacement?.new_source_id ?? null}, ${replacement?.reason ?? null}, ${ctx.limits.snapshotSessionTtlSeconds},
      ${ctx.limits.maxOpenSnapshotSessionsPerUser}, ${ctx.limits.maintenanceIntervalSeconds}${formArgument(ctx, actor)}) AS answer`);
  return unwrap<SnapshotSession>(row?.answer);
}

export async function snapshotPage(ctx: SyncContext, actor: Actor, snapshotId: string, afterRowOrdinal: number, maxRows: number | undefined): Promise<RawJson> {
  const limit = pageSize(maxRows, ctx.limits.defaultRowsPerPage, ctx.limits.maxRowsPerPage);
  const [row] = await ctx.db.query<{ error: unknown; body: string | null }>(sql`
    SELECT error, body FROM sync.snapshot_page(${actor.userId}, ${snapshotId}::uuid, ${afterRowOrdinal}, ${limit}, ${pageBudgetBytes(ctx.limits)}${formArgument(ctx, actor)})`);
  return unwrapPage(row);
}

export async function deleteSnapshot(ctx: SyncContext, actor: Actor, snapshotId: string): Promise<void> {
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT sync.snapshot_delete(${actor.userId}, ${snapshotId}::uuid) AS answer`);
  unwrap(row?.answer);
}
