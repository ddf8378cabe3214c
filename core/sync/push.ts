/**
 * The write path: staged push sessions. Create, each chunk, commit and delete are one statement
 * each (one round trip) whatever the row count; the set-based work runs in managed functions.
 */
import { createHash } from 'node:crypto';
import { sql } from '../db/index.js';
import { SyncError } from '../errors.js';
import {
  type ChunkRequest,
  type ChunkResponse,
  type CommitResponse,
  type Conflict,
  type PushSessionCreateRequest,
  type PushSessionCreateResponse,
} from '../protocol/index.js';
import { validateRows } from './rows.js';
import { unwrap, unwrapPage, pageSize, pageBudgetBytes, type Actor, type RawJson, type SyncContext } from './context.js';

export async function createPushSession(ctx: SyncContext, actor: Actor, request: PushSessionCreateRequest): Promise<PushSessionCreateResponse> {
  if (request.planned_row_count > ctx.limits.maxRowsPerBundle) {
    throw new SyncError('payload_too_large', `planned_row_count ${request.planned_row_count} exceeds max_rows_per_bundle ${ctx.limits.maxRowsPerBundle}`);
  }
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.push_create(${actor.userId}, ${actor.sourceId}, ${request.source_bundle_id}, ${request.planned_row_count},
      ${request.initialization_id ?? null}::uuid, ${request.request_hash ?? null}, ${ctx.limits.pushSessionTtlSeconds}) AS answer`);
  return unwrap<PushSessionCreateResponse>(row?.answer);
}

/** `bodyBytes` is the request body size; it counts against max_bytes_per_bundle. */
export async function uploadChunk(ctx: SyncContext, actor: Actor, pushId: string, request: ChunkRequest, bodyBytes: number): Promise<ChunkResponse> {
  if (request.rows.length > ctx.limits.maxRowsPerPushChunk) {
    throw new SyncError('payload_too_large', `a chunk carries at most max_rows_per_push_chunk ${ctx.limits.maxRowsPerPushChunk} rows`);
  }
  const staged = validateRows(ctx.catalog, ctx.limits, request.rows, request.start_row_ordinal);
  const rowsJson = JSON.stringify(staged);
  const digest = createHash('sha256').update(rowsJson).digest('hex');
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.push_chunk(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid, ${request.start_row_ordinal},
      ${rowsJson}::jsonb, ${bodyBytes}, ${digest}, ${ctx.limits.maxBytesPerBundle}) AS answer`);
  return unwrap<ChunkResponse>(row?.answer);
}

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
 * SQLSTATEs after which a statement certainly did not commit. Anything else that breaks the
 * connection mid-statement (no SQLSTATE, class 08, admin shutdown) leaves the outcome unknown.
 */
function certainlyRolledBack(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false;
  return !code.startsWith('08') && !code.startsWith('57P');
}

/**
 * Best-effort sync key of the pushed row that broke a constraint, found after the fact on the
 * rejection path only (one extra round trip; the session's staged rows are still there).
 * PostgreSQL names the offending row only indirectly:
 * - unique and foreign-key violations: `Key (cols)=(vals) already exists | is not present …` —
 *   the key itself when those columns are the sync key, else the first staged row of that table
 *   whose payload carries those values;
 * - check and not-null violations: `Failing row contains (v1, v2, …)` — the first staged row of
 *   that table whose key appears as one of the listed values.
 * Data exceptions (22xxx) carry no table, so their key stays null.
 */
async function violationKey(ctx: SyncContext, pushId: string, schema: string | null, table: string | null, detail: unknown): Promise<Record<string, string> | null> {
  if (typeof detail !== 'string' || !schema || !table) return null;
  const entry = ctx.catalog.byName(schema, table);
  if (!entry) return null;
  const keyed = /^Key \((.+?)\)=\((.*)\) (?:already exists|is not present in table)/s.exec(detail);
  if (keyed) {
    const columns = (keyed[1] as string).split(', ');
    const values = (keyed[2] as string).split(', ');
    if (columns.length !== values.length) return null;
    const visible = columns.map((c, i) => [c, values[i] as string] as const).filter(([c]) => c !== '_sync_scope_id');
    if (visible.length === 1 && visible[0]?.[0] === entry.keyColumn) return { [entry.keyColumn]: visible[0][1] };
    if (visible.length === 0) return null;
    const [row] = await ctx.db.query<{ key: string }>(sql`
      SELECT sync.key_text(c.key_kind, p.key_bytes) AS key
        FROM sync.push_session_rows p JOIN sync.table_catalog c ON c.table_id = p.table_id
       WHERE p.push_id = ${pushId}::uuid AND p.table_id = ${entry.tableId} AND p.op_code <> 3
         AND NOT EXISTS (SELECT 1 FROM jsonb_each_text(${JSON.stringify(Object.fromEntries(visible))}::jsonb) v
                          WHERE (p.payload->>v.key) IS DISTINCT FROM v.value)
       ORDER BY p.row_ordinal LIMIT 1`);
    return row ? { [entry.keyColumn]: row.key } : null;
  }
  const failing = /^Failing row contains \((.*)\)\.?$/s.exec(detail);
  if (failing) {
    const tuple = `, ${failing[1] as string},`;
    const [row] = await ctx.db.query<{ key: string }>(sql`
      SELECT k.key FROM sync.push_session_rows p JOIN sync.table_catalog c ON c.table_id = p.table_id
       CROSS JOIN LATERAL (SELECT sync.key_text(c.key_kind, p.key_bytes) AS key) k
       WHERE p.push_id = ${pushId}::uuid AND p.table_id = ${entry.tableId} AND p.op_code <> 3
         AND strpos(${tuple}, ', ' || k.key || ',') > 0
       ORDER BY p.row_ordinal LIMIT 1`);
    return row ? { [entry.keyColumn]: row.key } : null;
  }
  return null;
}

export async function commitPush(ctx: SyncContext, actor: Actor, pushId: string): Promise<CommitOutcome> {
  let answer: unknown;
  try {
    const [row] = await ctx.db.query<{ answer: unknown }>(sql`
      SELECT sync.push_commit(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid, ${ctx.limits.maxConflictsPerAnswer},
                              ${ctx.limits.retainedBundlesPerUser}) AS answer`);
    answer = row?.answer;
  } catch (error) {
    if (certainlyRolledBack(error)) throw error;
    await ctx.db.query(sql`SELECT nextval('sync.counter_commit_outcome_unknown')`).catch(() => undefined);
    throw new SyncError('commit_outcome_unknown',
      'the connection failed while the commit was in flight; retry from push-session create with the same source_bundle_id and request_hash');
  }
  const body = answer as Record<string, unknown>;
  if (body['error'] === 'push_conflict') {
    return {
      kind: 'conflict',
      message: String(body['message']),
      conflict: body['conflict'] as Conflict,
      conflicts: body['conflicts'] as Conflict[],
      conflictCount: Number(body['conflict_count']),
    };
  }
  if (body['error'] === 'push_rejected') {
    const v = body['violation'] as Omit<Violation, 'key'>;
    const key = await violationKey(ctx, pushId, v.schema, v.table, body['_detail']);
    return { kind: 'rejected', message: String(body['message']), violation: { ...v, key } };
  }
  return { kind: 'committed', answer: unwrap<CommitResponse>(answer) };
}

export async function deletePushSession(ctx: SyncContext, actor: Actor, pushId: string): Promise<void> {
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT sync.push_delete(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid) AS answer`);
  unwrap(row?.answer);
}

/** One page of a committed bundle's authoritative rows, for replay after a push. */
export async function committedBundleRows(ctx: SyncContext, actor: Actor, bundleSeq: number, afterRowOrdinal: number, maxRows: number | undefined): Promise<RawJson> {
  const limit = pageSize(maxRows, ctx.limits.defaultRowsPerPage, ctx.limits.maxRowsPerPage);
  const [row] = await ctx.db.query<{ error: unknown; body: string | null }>(sql`
    SELECT error, body FROM sync.committed_rows(${actor.userId}, ${bundleSeq}, ${afterRowOrdinal}, ${limit}, ${pageBudgetBytes(ctx.limits)})`);
  return unwrapPage(row);
}
