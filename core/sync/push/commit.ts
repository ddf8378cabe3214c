/**
 * Commit of a staged push session: one statement (`sync.push_commit`, commit.sql.ts) whose answer
 * is an outcome — committed, a conflict, or a rejection by a business constraint — or, when the
 * connection broke while it ran, `commit_outcome_unknown`.
 */
import { neverSent, sql, type SqlFragment } from '../../db/index.js';
import { SyncError } from '../../errors.js';
import { logEvent } from '../../log.js';
import { type CommitResponse, type Conflict } from '../../protocol/index.js';
import { unwrap, rowWireBytesMax, ROW_TOO_LARGE_SQLSTATE, type Actor, type SyncContext } from '../context.js';
import { noteOutcome } from '../status/user-status.js';

export interface Violation {
  readonly sqlstate: string;
  readonly constraint: string | null;
  readonly schema: string | null;
  readonly table: string | null;
  readonly column: string | null;
  readonly key: Record<string, string> | null;
}

/** Commit's outcomes: a conflict or a rejection is a result, not a crash. */
export type CommitOutcome =
  | { readonly kind: 'committed'; readonly answer: CommitResponse }
  | { readonly kind: 'conflict'; readonly message: string; readonly conflict: Conflict; readonly conflicts: readonly Conflict[]; readonly conflictCount: number }
  | { readonly kind: 'rejected'; readonly message: string; readonly violation: Violation };

/** query_canceled: the statement bound (statement_timeout) stopped the statement, which rolled back. */
const STATEMENT_TIMEOUT_SQLSTATE = '57014';

/**
 * SQLSTATEs after which a statement certainly did not commit. Anything else that breaks the
 * connection mid-statement (no SQLSTATE, class 08, admin shutdown) leaves the outcome unknown.
 */
function certainlyRolledBack(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false;
  return !code.startsWith('08') && !code.startsWith('57P');
}

/**
 * How to find the sync key of the pushed row that broke a constraint, best effort, on the
 * rejection path only (the session's staged rows are still there). PostgreSQL names the
 * offending row only indirectly:
 * - unique and foreign-key violations: `Key (cols)=(vals) already exists | is not present …` —
 *   the key itself when those columns are the sync key, else the first staged row of that table
 *   whose payload carries those values;
 * - check and not-null violations: `Failing row contains (v1, v2, …)` — the first staged row of
 *   that table whose key appears as one of the listed values.
 * - data exceptions (22xxx: a value PostgreSQL cannot store) name no row: from layout 13 the
 *   commit names the table whose statement failed, sync.first_unstorable_row finds the row by
 *   trying halves of the table's staged rows and sync.unstorable_column its column by trying
 *   its columns one at a time (every try rolled back).
 * A lookup that needs the staged rows is a query (one row, column `key`, and `column` when it
 * can tell), run in the same statement that notes the rejection.
 */
/** The first layout whose commit names a data exception's table and can find its row. */
const UNSTORABLE_ROW_LAYOUT = 13;

type KeyLookup = { readonly known: Record<string, string> | null } | { readonly keyColumn: string; readonly query: SqlFragment };

function violationKey(ctx: SyncContext, actor: Actor, pushId: string, violation: Omit<Violation, 'key'>, detail: unknown): KeyLookup {
  const { schema, table } = violation;
  if (!schema || !table) return { known: null };
  const entry = ctx.catalog.byName(schema, table);
  if (!entry) return { known: null };
  if (violation.sqlstate.startsWith('22') && ctx.catalog.layoutVersion >= UNSTORABLE_ROW_LAYOUT) {
    return {
      keyColumn: entry.keyColumn,
      query: sql`
      SELECT sync.key_text(c.key_kind, b.key_bytes) AS key,
             sync.unstorable_column(${actor.userId}, ${pushId}::uuid, ${entry.tableId}::smallint, b.key_bytes) AS "column"
        FROM sync.table_catalog c CROSS JOIN LATERAL (SELECT sync.first_unstorable_row(${actor.userId}, ${pushId}::uuid, ${entry.tableId}::smallint) AS key_bytes) b
       WHERE c.table_id = ${entry.tableId} AND b.key_bytes IS NOT NULL`,
    };
  }
  if (typeof detail !== 'string') return { known: null };
  const keyed = /^Key \((.+?)\)=\((.*)\) (?:already exists|is not present in table)/s.exec(detail);
  if (keyed) {
    const columns = (keyed[1] as string).split(', ');
    const values = (keyed[2] as string).split(', ');
    if (columns.length !== values.length) return { known: null };
    const visible = columns.map((c, i) => [c, values[i] as string] as const).filter(([c]) => c !== '_sync_scope_id');
    if (visible.length === 1 && visible[0]?.[0] === entry.keyColumn) return { known: { [entry.keyColumn]: visible[0][1] } };
    if (visible.length === 0) return { known: null };
    return {
      keyColumn: entry.keyColumn,
      query: sql`
      SELECT sync.key_text(c.key_kind, p.key_bytes) AS key
        FROM sync.push_session_rows p JOIN sync.table_catalog c ON c.table_id = p.table_id
       WHERE p.push_id = ${pushId}::uuid AND p.table_id = ${entry.tableId} AND p.op_code <> 3
         AND NOT EXISTS (SELECT 1 FROM jsonb_each_text(${JSON.stringify(Object.fromEntries(visible))}::jsonb) v
                          WHERE (p.payload->>v.key) IS DISTINCT FROM v.value)
       ORDER BY p.row_ordinal LIMIT 1`,
    };
  }
  const failing = /^Failing row contains \((.*)\)\.?$/s.exec(detail);
  if (failing) {
    const tuple = `, ${failing[1] as string},`;
    return {
      keyColumn: entry.keyColumn,
      query: sql`
      SELECT k.key FROM sync.push_session_rows p JOIN sync.table_catalog c ON c.table_id = p.table_id
       CROSS JOIN LATERAL (SELECT sync.key_text(c.key_kind, p.key_bytes) AS key) k
       WHERE p.push_id = ${pushId}::uuid AND p.table_id = ${entry.tableId} AND p.op_code <> 3
         AND strpos(${tuple}, ', ' || k.key || ',') > 0
       ORDER BY p.row_ordinal LIMIT 1`,
    };
  }
  return { known: null };
}

/**
 * The rejected row's key (and a data exception's column) and the operator's note of the
 * rejection (protocol §5.8), in one statement when the key needs the staged rows: the rejection
 * path stays at two round trips. The note is best effort: when it fails (a layout before
 * operator status), the key is looked up alone.
 */
async function rejectedRow(ctx: SyncContext, actor: Actor, pushId: string, message: string, violation: Omit<Violation, 'key'>, detail: unknown): Promise<Violation> {
  const lookup = violationKey(ctx, actor, pushId, violation, detail);
  if ('known' in lookup) {
    const named = { ...violation, key: lookup.known };
    await noteOutcome(ctx, actor, 'rejection', { push_id: pushId, message, violation: named });
    return named;
  }
  const named = (row: { key: string | null; column?: string | null } | undefined): Violation => ({
    ...violation,
    column: violation.column ?? row?.column ?? null,
    key: row?.key ? { [lookup.keyColumn]: row.key } : null,
  });
  const note = JSON.stringify({ push_id: pushId, message, violation });
  try {
    // `column` only where the lookup can tell (a data exception's): read through to_jsonb.
    const [row] = await ctx.db.query<{ key: string | null; column: string | null }>(sql`
      WITH k AS (${lookup.query})
      SELECT (SELECT key FROM k) AS key, (SELECT to_jsonb(k) ->> 'column' FROM k) AS "column",
             sync.note_outcome(${actor.userId}, ${actor.sourceId}, 'rejection', ${note}::jsonb || jsonb_build_object('violation',
               (${note}::jsonb -> 'violation') || jsonb_strip_nulls(jsonb_build_object('column', (SELECT to_jsonb(k) ->> 'column' FROM k)))
               || jsonb_build_object('key', (SELECT jsonb_build_object(${lookup.keyColumn}::text, key) FROM k)))) AS noted`);
    return named(row);
  } catch {
    const [row] = await ctx.db.query<{ key: string; column?: string | null }>(lookup.query);
    return named(row);
  }
}

export async function commitPush(ctx: SyncContext, actor: Actor, pushId: string): Promise<CommitOutcome> {
  let answer: unknown;
  try {
    const [row] = await ctx.db.query<{ answer: unknown }>(sql`
      SELECT sync.push_commit(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid, ${ctx.limits.maxConflictsPerAnswer},
                              ${ctx.limits.retainedBundlesPerUser}, ${rowWireBytesMax(ctx.limits)}) AS answer`);
    answer = row?.answer;
  } catch (error) {
    // A committed row no response could carry: the statement failed, so nothing committed.
    if ((error as { code?: unknown }).code === ROW_TOO_LARGE_SQLSTATE) throw new SyncError('payload_too_large', (error as Error).message);
    // The statement bound stopped the commit (under load a large bundle can take longer than the
    // bound, however long the bound is): nothing committed, and the same bundle would stop again.
    // A typed answer that tells the client to split it, never a 503 it would retry without end.
    if ((error as { code?: unknown }).code === STATEMENT_TIMEOUT_SQLSTATE) {
      throw new SyncError('payload_too_large',
        `the commit did not finish within statement_timeout_ms (${ctx.limits.statementTimeoutMs}); nothing was committed: split the bundle into smaller ones`,
        { split: true, reason: 'commit_timeout' });
    }
    if (certainlyRolledBack(error)) throw error;
    // Nothing reached the database (no place in this user's share of the pool: 429 rate_limited;
    // no connection: 503): the outcome is known, the session is still staged, and the client
    // retries the commit, never the upload.
    if (error instanceof SyncError || neverSent(error)) throw error;
    // Counted even when the database is unreachable now: kept by the runtime until it answers.
    await ctx.db.query(sql`SELECT sync.count('commit_outcome_unknown', 1)`).catch(() => {
      ctx.pending.add('commit_outcome_unknown');
      logEvent('warn', 'commit_outcome_unknown', { recorded: false, push_id: pushId });
    });
    throw new SyncError('commit_outcome_unknown',
      'the connection failed while the commit was in flight; retry from push-session create with the same source_bundle_id and request_hash');
  }
  const body = answer as Record<string, unknown>;
  if (body['error'] === 'push_conflict') {
    const outcome = {
      kind: 'conflict',
      message: String(body['message']),
      conflict: body['conflict'] as Conflict,
      conflicts: body['conflicts'] as Conflict[],
      conflictCount: Number(body['conflict_count']),
    } as const;
    await noteOutcome(ctx, actor, 'conflict', { push_id: pushId, message: outcome.message, conflict: outcome.conflict, conflict_count: outcome.conflictCount });
    return outcome;
  }
  // The session was rejected before: the same answer, remembered on it (nothing applied or searched again).
  if (body['error'] === 'push_rejected' && body['remembered'] === true) {
    return { kind: 'rejected', message: String(body['message']), violation: body['violation'] as Violation };
  }
  if (body['error'] === 'push_rejected') {
    const v = body['violation'] as Omit<Violation, 'key'>;
    const message = String(body['message']);
    return { kind: 'rejected', message, violation: await rejectedRow(ctx, actor, pushId, message, v, body['_detail']) };
  }
  return { kind: 'committed', answer: unwrap<CommitResponse>(answer) };
}
