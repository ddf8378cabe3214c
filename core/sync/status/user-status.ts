/**
 * Operator status of one user (issue 17 item 7; protocol §5.8): one statement, `sync.user_status`
 * (user-status.sql.ts), and the notes of the last conflict and rejection it reports.
 */
import { sql, type Queryable } from '../../db/index.js';
import { SyncError } from '../../errors.js';
import { logEvent } from '../../log.js';
import { type Actor, type SyncContext } from '../context.js';

/** Sources listed in one status answer, newest first (`source_count` says how many there are). */
export const MAX_SOURCES_PER_STATUS = 100;

const UNDEFINED_FUNCTION = '42883';

/** The user's status, as sync.user_status renders it; `user_not_found` for a user never seen. */
export async function userStatus(db: Queryable, userId: string): Promise<Record<string, unknown>> {
  let row: { status: Record<string, unknown> | null } | undefined;
  try {
    [row] = await db.query<{ status: Record<string, unknown> | null }>(sql`SELECT sync.user_status(${userId}, ${MAX_SOURCES_PER_STATUS}) AS status`);
  } catch (error) {
    // A database at a layout before version 11, which this build still serves otherwise.
    if ((error as { code?: unknown }).code === UNDEFINED_FUNCTION) {
      throw new SyncError('service_unavailable', 'the sync layout predates operator status: run bootstrap to upgrade it', { reason: 'layout_upgrade_required' });
    }
    throw error;
  }
  if (!row?.status) throw new SyncError('user_not_found', `no user ${JSON.stringify(userId)}: the server has never seen it connect`);
  return row.status;
}

/**
 * Keeps the user's last conflict or rejection for the operator. Best effort, after the answer is
 * decided: a failure to note (the database went away, a layout older than the note) never
 * changes what the client is told, and is logged.
 */
export async function noteOutcome(ctx: SyncContext, actor: Actor, kind: 'conflict' | 'rejection', detail: Record<string, unknown>): Promise<void> {
  try {
    await ctx.db.query(sql`SELECT sync.note_outcome(${actor.userId}, ${actor.sourceId}, ${kind}, ${JSON.stringify(detail)}::jsonb)`);
  } catch (error) {
    logEvent('warn', 'note_outcome_failed', { kind, code: (error as { code?: unknown }).code ?? null });
  }
}
