/** Snapshot sessions: a frozen, chunked copy of a user's rows for hydration and recovery. */
import { sql } from '../../db/index.js';
import { logEvent } from '../../log.js';
import { jsonStringBytes, type RowForm, type SnapshotCreateRequest, type SnapshotSession } from '../../protocol/index.js';
import { unwrap, readPage, pageSize, pageBudgetBytes, type Actor, type RawJson, type SyncContext } from '../context.js';
import { snapshotFormArgument } from '../wire-form.js';

/** Materialises the snapshot with one set-based statement; one round trip. */
async function createSnapshot(ctx: SyncContext, actor: Actor, request: SnapshotCreateRequest): Promise<SnapshotSession> {
  const replacement = request.source_replacement;
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.snapshot_create(${actor.userId}, ${actor.sourceId}, ${replacement?.previous_source_id ?? null},
      ${replacement?.new_source_id ?? null}, ${replacement?.reason ?? null}, ${ctx.limits.snapshotSessionTtlSeconds},
      ${ctx.limits.maxOpenSnapshotSessionsPerUser}, ${ctx.limits.maintenanceIntervalSeconds}${snapshotFormArgument(ctx, actor, request.row_form)}) AS answer`);
  return unwrap<SnapshotSession>(row?.answer);
}

/** The field a create's answer carries its first page in, as it costs in the answer's escaped bytes. */
const FIRST_PAGE_FIELD = ',"first_page":';

/**
 * A create, and with `first_page_rows` the session's first page in the same answer (`first_page`,
 * capabilities' `snapshot_first_page`): the page `GET …?after_row_ordinal=0&max_rows=<n>` answers,
 * a second statement here instead of a second round trip from the device before it writes rows.
 * The page's budget is the response's less the session's own fields, so the answer fits like a
 * page. The page is a convenience: the device asks for it as usual where the answer has none —
 * after a failed read, and after a create that took two statements already (this container's
 * first request, which read the catalog), so that no request makes more than two.
 */
export async function createSnapshotWithPage(ctx: SyncContext, actor: Actor, request: SnapshotCreateRequest): Promise<SnapshotSession | RawJson> {
  const session = await createSnapshot(ctx, actor, request);
  if (request.first_page_rows === undefined || session.row_count === 0 || ctx.db.roundTrips.count > 1) return session;
  const head = JSON.stringify(session);
  const budget = pageBudgetBytes(ctx.limits) - (jsonStringBytes(head) - 2) - (jsonStringBytes(FIRST_PAGE_FIELD) - 2);
  try {
    const page = await snapshotPage(ctx, actor, session.snapshot_id, 0, request.first_page_rows, request.row_form, budget);
    return { rawParts: [`${head.slice(0, -1)}${FIRST_PAGE_FIELD}`, ...page.rawParts, '}'] };
  } catch (error) {
    logEvent('warn', 'snapshot_first_page_unread', { snapshot_id: session.snapshot_id, error: error instanceof Error ? error.message : String(error) });
    return session;
  }
}

/** One page; `rowForm` is what the client reads (`arrays` reads objects too). */
export async function snapshotPage(ctx: SyncContext, actor: Actor, snapshotId: string, afterRowOrdinal: number, maxRows: number | undefined,
  rowForm?: RowForm, budget = pageBudgetBytes(ctx.limits)): Promise<RawJson> {
  const limit = pageSize(maxRows, ctx.limits.defaultRowsPerPage, ctx.limits.maxRowsPerPage);
  return readPage(ctx, 'snapshot_page', sql`${actor.userId}, ${snapshotId}::uuid, ${afterRowOrdinal}, ${limit}, ${budget}${snapshotFormArgument(ctx, actor, rowForm)}`);
}

export async function deleteSnapshot(ctx: SyncContext, actor: Actor, snapshotId: string): Promise<void> {
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT sync.snapshot_delete(${actor.userId}, ${snapshotId}::uuid) AS answer`);
  unwrap(row?.answer);
}
