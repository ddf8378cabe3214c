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

/**
 * query_canceled: the statement rolled back, stopped by the statement bound (statement_timeout)
 * or by a cancel. Only the message text tells them apart, and it is translated (lc_messages).
 */
const QUERY_CANCELED_SQLSTATE = '57014';

/**
 * Whether a 57014 was the statement bound rather than a cancel. A cancel is an operator's
 * pg_cancel_backend, or the lock bound itself when it fires just as one lock wait ends and the
 * next begins: the next wait re-arms lock_timeout, which clears the mark PostgreSQL reads to name
 * the cause, and the error says "due to user request" (most likely what was seen once under load,
 * six commits queued on one row, with no statement bound set at all).
 * The bound can only stop a statement that ran at least as long as the session's
 * statement_timeout, and the time measured here, around the whole request to the pool, is never
 * shorter than the statement's own. A cancel is a 503 to retry the same commit: telling the client
 * to split would cut a bundle for nothing. When the setting cannot be read, the answer stays a
 * split: a bound retried as a 503 would come back without end (issue 26 item 8), and a needless
 * split only commits in two bundles.
 */
async function stoppedByStatementBound(ctx: SyncContext, elapsedMs: number): Promise<boolean> {
  try {
    const [row] = await ctx.db.query<{ ms: number }>(sql`SELECT setting::int AS ms FROM pg_settings WHERE name = 'statement_timeout'`);
    const boundMs = row?.ms ?? 0;
    return boundMs > 0 && elapsedMs >= boundMs;
  } catch {
    return true;
  }
}

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
 * How to find the sync key of the pushed row that broke a constraint, on the rejection path only
 * (the session's staged rows are still there). From layout 15 (ROW_SEARCH_LAYOUT):
 * - a unique or foreign-key violation whose `Key (cols)=(vals)` are the sync key names the row;
 * - one whose columns are others is looked up: the last staged row of that table whose payload
 *   carries those values (the later of two clashing rows, the one applying in order refuses);
 * - anything else, or a lookup that finds nothing, is searched: sync.first_failing_row applies
 *   the staged rows in halves (every try rolled back) and answers the first row at which the
 *   bundle stops applying, with that row's own error — so a row is named whichever error the
 *   commit met first (a data exception and a unique clash in one table, an app trigger's refusal).
 * Before layout 15 the older lookups below answer (legacyViolationKey).
 */
/** The first layout whose commit names a data exception's table and can find its row. */
const UNSTORABLE_ROW_LAYOUT = 13;
/** The first layout with sync.first_failing_row (a row for every error) and a named LS413 row. */
const ROW_SEARCH_LAYOUT = 15;

type KeyLookup = { readonly known: Record<string, string> | null } | { readonly keyColumn: string; readonly query: SqlFragment };

/** The `Key (cols)=(vals)` of a unique or foreign-key violation, without the hidden scope column. */
function keyedColumns(detail: unknown): (readonly [string, string])[] | null {
  if (typeof detail !== 'string') return null;
  const keyed = /^Key \((.+?)\)=\((.*)\) (?:already exists|is not present in table)/s.exec(detail);
  if (!keyed) return null;
  const columns = (keyed[1] as string).split(', ');
  const values = (keyed[2] as string).split(', ');
  if (columns.length !== values.length) return null;
  return columns.map((c, i) => [c, values[i] as string] as const).filter(([c]) => c !== '_sync_scope_id');
}

function legacyViolationKey(ctx: SyncContext, actor: Actor, pushId: string, violation: Omit<Violation, 'key'>, detail: unknown): KeyLookup {
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
  const visible = keyedColumns(detail);
  if (visible) {
    if (visible.length === 1 && visible[0]?.[0] === entry.keyColumn) return { known: { [entry.keyColumn]: visible[0][1] } };
    if (visible.length === 0) return { known: null };
    return {
      keyColumn: entry.keyColumn,
      query: sql`
      SELECT sync.key_text(c.key_kind, p.key_bytes) AS key
        FROM sync.push_session_rows p JOIN sync.table_catalog c ON c.table_id = p.table_id
       WHERE p.user_id = ${actor.userId} AND p.push_id = ${pushId}::uuid AND p.table_id = ${entry.tableId} AND p.op_code <> 3
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
       WHERE p.user_id = ${actor.userId} AND p.push_id = ${pushId}::uuid AND p.table_id = ${entry.tableId} AND p.op_code <> 3
         AND strpos(${tuple}, ', ' || k.key || ',') > 0
       ORDER BY p.row_ordinal LIMIT 1`,
    };
  }
  return { known: null };
}

/** The rejection as the client is told it: the named row's violation, and its error's message. */
interface Named {
  readonly message: string;
  readonly violation: Violation;
}

/**
 * Layout 15 on: the rejected row (its own violation where the search found it) and the operator's
 * note, in one statement, so the rejection path stays at two round trips. The fast cases need no
 * search: a violation naming the sync key, or a lookup of its values that finds a row.
 */
async function searchedRow(ctx: SyncContext, actor: Actor, pushId: string, message: string, violation: Omit<Violation, 'key'>, detail: unknown): Promise<Named> {
  const entry = violation.schema && violation.table ? ctx.catalog.byName(violation.schema, violation.table) : undefined;
  const visible = entry ? keyedColumns(detail) : null;
  if (entry && visible?.length === 1 && visible[0]?.[0] === entry.keyColumn) {
    const named = { message, violation: { ...violation, key: { [entry.keyColumn]: visible[0][1] } } };
    await noteOutcome(ctx, actor, 'rejection', { push_id: pushId, ...named });
    return named;
  }
  // The later staged row carrying the violation's values (NULL when there are none to look for).
  const lookup = entry && visible && visible.length > 0
    ? sql`(SELECT jsonb_build_object(${entry.keyColumn}::text, sync.key_text(c.key_kind, p.key_bytes))
             FROM sync.push_session_rows p JOIN sync.table_catalog c ON c.table_id = p.table_id
            WHERE p.user_id = ${actor.userId} AND p.push_id = ${pushId}::uuid AND p.table_id = ${entry.tableId} AND p.op_code <> 3
              AND NOT EXISTS (SELECT 1 FROM jsonb_each_text(${JSON.stringify(Object.fromEntries(visible))}::jsonb) v
                               WHERE (p.payload->>v.key) IS DISTINCT FROM v.value)
            ORDER BY p.row_ordinal DESC LIMIT 1)`
    : sql`NULL::jsonb`;
  const base = JSON.stringify(violation);
  // COALESCE evaluates the search only when the lookup found nothing. Should the search itself
  // fail (a statement timeout on a huge bundle, a failure that is not the rows'), the rejection
  // still stands, without a key: a client then narrows it down by pushing halves.
  const [row] = await ctx.db.query<{ found: (Omit<Violation, 'key'> & { key: Record<string, string> }) | null; message: string }>(sql`
    WITH l AS (SELECT ${lookup} AS key),
         f AS (SELECT coalesce((SELECT ${base}::jsonb || jsonb_build_object('key', l.key) FROM l WHERE l.key IS NOT NULL),
                               sync.first_failing_row(${actor.userId}, ${pushId}::uuid)) AS found),
         m AS (SELECT f.found - 'message' - 'error_schema' - 'error_table' AS found,
                      coalesce('the bundle breaks a business constraint: ' || (f.found ->> 'message'), ${message}::text) AS message FROM f)
    SELECT m.found, m.message, sync.note_outcome(${actor.userId}, ${actor.sourceId}, 'rejection', jsonb_build_object('push_id', ${pushId}::text,
             'message', m.message, 'violation', coalesce(m.found, ${base}::jsonb || '{"key": null}'))) AS noted
      FROM m`).catch((error: unknown) => {
    logEvent('warn', 'rejected_row_search_failed', { push_id: pushId, code: (error as { code?: unknown }).code ?? null });
    return [];
  });
  const found = row?.found;
  if (!found) return { message, violation: { ...violation, key: null } };
  const named: Violation = {
    sqlstate: found.sqlstate,
    constraint: found.constraint ?? null,
    schema: found.schema ?? null,
    table: found.table ?? null,
    column: found.column ?? null,
    key: found.key,
  };
  return { message: row?.message ?? message, violation: named };
}

/**
 * Before layout 15: the rejected row's key (and a data exception's column) and the operator's
 * note of the rejection (protocol §5.8), in one statement when the key needs the staged rows.
 * The note is best effort: when it fails (a layout before operator status), the key is looked up
 * alone.
 */
async function legacyRejectedRow(ctx: SyncContext, actor: Actor, pushId: string, message: string, violation: Omit<Violation, 'key'>, detail: unknown): Promise<Named> {
  const lookup = legacyViolationKey(ctx, actor, pushId, violation, detail);
  if ('known' in lookup) {
    const named = { ...violation, key: lookup.known };
    await noteOutcome(ctx, actor, 'rejection', { push_id: pushId, message, violation: named });
    return { message, violation: named };
  }
  const named = (row: { key: string | null; column?: string | null } | undefined): Named => ({
    message,
    violation: { ...violation, column: violation.column ?? row?.column ?? null, key: row?.key ? { [lookup.keyColumn]: row.key } : null },
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

/** The row of a push_rejected: searched from layout 15 on, looked up before. */
function rejectedRow(ctx: SyncContext, actor: Actor, pushId: string, message: string, violation: Omit<Violation, 'key'>, detail: unknown): Promise<Named> {
  return ctx.catalog.layoutVersion >= ROW_SEARCH_LAYOUT
    ? searchedRow(ctx, actor, pushId, message, violation, detail)
    : legacyRejectedRow(ctx, actor, pushId, message, violation, detail);
}

/** The row finalize_bundle names in an LS413's DETAIL (layout 15 on), as a violation. */
function tooLargeRow(error: unknown): Violation | null {
  const detail = (error as { detail?: unknown }).detail;
  if (typeof detail !== 'string') return null;
  try {
    const row = JSON.parse(detail) as { schema?: unknown; table?: unknown; key?: unknown };
    if (typeof row.schema !== 'string' || typeof row.table !== 'string' || typeof row.key !== 'object' || row.key === null) return null;
    return { sqlstate: ROW_TOO_LARGE_SQLSTATE, constraint: null, schema: row.schema, table: row.table, column: null, key: row.key as Record<string, string> };
  } catch {
    return null;
  }
}

export async function commitPush(ctx: SyncContext, actor: Actor, pushId: string): Promise<CommitOutcome> {
  let answer: unknown;
  const started = performance.now();
  try {
    const [row] = await ctx.db.query<{ answer: unknown }>(sql`
      SELECT sync.push_commit(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid, ${ctx.limits.maxConflictsPerAnswer},
                              ${ctx.limits.retainedBundlesPerUser}, ${rowWireBytesMax(ctx.limits)}) AS answer`);
    answer = row?.answer;
  } catch (error) {
    // A committed row no response could carry: the statement failed, so nothing committed.
    if ((error as { code?: unknown }).code === ROW_TOO_LARGE_SQLSTATE) {
      const violation = tooLargeRow(error);
      throw new SyncError('payload_too_large', (error as Error).message, violation ? { violation } : {});
    }
    // The statement bound stopped the commit (under load a large bundle can take longer than the
    // bound, however long the bound is): nothing committed, and the same bundle would stop again.
    // A typed answer that tells the client to split it, never a 503 it would retry without end.
    if ((error as { code?: unknown }).code === QUERY_CANCELED_SQLSTATE && (await stoppedByStatementBound(ctx, performance.now() - started))) {
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
    await ctx.db.query(sql`SELECT sync.count(${actor.userId}, 'commit_outcome_unknown', 1)`).catch(() => {
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
    return { kind: 'rejected', ...(await rejectedRow(ctx, actor, pushId, String(body['message']), v, body['_detail'])) };
  }
  return { kind: 'committed', answer: unwrap<CommitResponse>(answer) };
}
