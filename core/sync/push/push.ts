/**
 * The write path: staged push sessions. Create, each chunk, commit and delete are one statement
 * each (one round trip) whatever the row count, and a create that carries its whole bundle is
 * created and staged in one; the set-based work runs in managed functions (push-session.sql.ts,
 * commit.sql.ts). Commit is in commit.ts.
 */
import { createHash } from 'node:crypto';
import { canonicalRowsText } from '../../protocol/canonical-rows.js';
import { sql, type SqlFragment } from '../../db/index.js';
import { SyncError } from '../../errors.js';
import { type ChunkRequest, type ChunkResponse, type PushSessionCreateRequest, type PushSessionCreateResponse } from '../../protocol/index.js';
import { validateRows } from './rows.js';
import { unwrap, type Actor, type SyncContext } from '../context.js';
import { formArgument, protocolOf, summaryInProtocol } from '../wire-form.js';

function checkCreate(ctx: SyncContext, request: PushSessionCreateRequest): void {
  if (request.planned_row_count > ctx.limits.maxRowsPerBundle) {
    throw new SyncError('payload_too_large', `planned_row_count ${request.planned_row_count} exceeds max_rows_per_bundle ${ctx.limits.maxRowsPerBundle}`);
  }
  // A create that carries its rows carries all of them (the edge stages and commits them at once).
  if (request.rows && request.rows.length !== request.planned_row_count) {
    throw new SyncError('invalid_request', `rows holds ${request.rows.length} rows but planned_row_count is ${request.planned_row_count}: a create that carries rows carries the whole bundle`);
  }
}

function createCall(ctx: SyncContext, actor: Actor, request: PushSessionCreateRequest): SqlFragment {
  return sql`sync.push_create(${actor.userId}, ${actor.sourceId}, ${request.source_bundle_id}, ${request.planned_row_count},
      ${request.initialization_id ?? null}::uuid, ${request.request_hash ?? null}, ${ctx.limits.pushSessionTtlSeconds},
      ${ctx.limits.maxOpenPushSessionsPerUser}, ${ctx.limits.maintenanceIntervalSeconds}${formArgument(ctx, actor)})`;
}

export async function createPushSession(ctx: SyncContext, actor: Actor, request: PushSessionCreateRequest): Promise<PushSessionCreateResponse> {
  checkCreate(ctx, request);
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT ${createCall(ctx, actor, request)} AS answer`);
  return summaryInProtocol(unwrap<PushSessionCreateResponse>(row?.answer), protocolOf(actor));
}

/** The layout whose push_chunk keeps each chunk's request text (migration 0028). */
export const REQUEST_TEXT_LAYOUT = 28;

/** A chunk's rows checked and in the staged form, with the sizes push_chunk counts. */
interface StagedChunk {
  readonly request: ChunkRequest;
  readonly rowsJson: string;
  readonly digest: string;
  readonly bytes: number;
  /**
   * The rows as the request hash covers them (their RFC 8785 texts joined by commas), which the
   * commit hashes instead of rendering the staged rows again; null before layout 28.
   */
  readonly requestText: string | null;
}

/**
 * The chunk's rows as the request hash covers them, without the array's brackets. Null (the
 * commit then renders the staged rows itself) should the library refuse a value validation let
 * through: the push goes on either way.
 */
function chunkRequestText(rows: ChunkRequest['rows']): string | null {
  try {
    return canonicalRowsText(rows).slice(1, -1);
  } catch {
    return null;
  }
}

function stagedChunk(ctx: SyncContext, actor: Actor, request: ChunkRequest, bodyBytes: number): StagedChunk {
  if (request.rows.length > ctx.limits.maxRowsPerPushChunk) {
    throw new SyncError('payload_too_large', `a chunk carries at most max_rows_per_push_chunk ${ctx.limits.maxRowsPerPushChunk} rows`);
  }
  // Ordinals are integers below max_rows_per_bundle (planned_row_count is bounded by it), so a
  // chunk that would end beyond it can never be accepted; checked here, it never reaches an
  // integer column (a 2^53-1 ordinal used to fail the statement: a 500).
  if (request.start_row_ordinal + request.rows.length > ctx.limits.maxRowsPerBundle) {
    throw new SyncError('invalid_request', `start_row_ordinal ${request.start_row_ordinal} puts the chunk beyond max_rows_per_bundle ${ctx.limits.maxRowsPerBundle}`);
  }
  const { rows: staged, growthBytes } = validateRows(ctx.catalog, ctx.limits, request.rows, request.start_row_ordinal, protocolOf(actor));
  const rowsJson = JSON.stringify(staged);
  // Rendered from the rows just validated (in the session's json form: a chunk in another form
  // is refused by push_chunk), the array's brackets left out so the chunks' texts join.
  const requestText = ctx.catalog.layoutVersion >= REQUEST_TEXT_LAYOUT ? chunkRequestText(request.rows) : null;
  return { request, rowsJson, digest: createHash('sha256').update(rowsJson).digest('hex'), bytes: bodyBytes + growthBytes, requestText };
}

/** `pushId`: the session, a value or an expression of the statement that calls this. */
function chunkCall(ctx: SyncContext, actor: Actor, pushId: SqlFragment, chunk: StagedChunk): SqlFragment {
  return sql`sync.push_chunk(${actor.userId}, ${actor.sourceId}, ${pushId}, ${chunk.request.start_row_ordinal},
      ${chunk.rowsJson}::jsonb, ${chunk.bytes}, ${chunk.digest}, ${ctx.limits.maxBytesPerBundle}, ${ctx.limits.maxStagedBytesPerUser},
      ${ctx.limits.maintenanceIntervalSeconds}${formArgument(ctx, actor)}${chunk.requestText === null ? sql`` : sql`, ${chunk.requestText}::text`})`;
}

/** `bodyBytes` is the request body size; it counts against max_bytes_per_bundle. */
export async function uploadChunk(ctx: SyncContext, actor: Actor, pushId: string, request: ChunkRequest, bodyBytes: number): Promise<ChunkResponse> {
  const chunk = stagedChunk(ctx, actor, request, bodyBytes);
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT ${chunkCall(ctx, actor, sql`${pushId}::uuid`, chunk)} AS answer`);
  return unwrap<ChunkResponse>(row?.answer);
}

/**
 * A create that carries its whole bundle (protocol §5.2, `single_request_push`): the session is
 * created and, when it opens for staging, given the rows in the same statement (one round trip;
 * the commit is the request's second). push_chunk sees the session push_create inserted: each
 * managed function's statements see what the statement's earlier calls wrote. `chunk` is null
 * when the session did not open for staging (already committed, or refused). `onCreated` hears
 * of a session that opened before a chunk refused by push_chunk throws, so the caller can drop
 * it, as after a separate chunk request.
 */
export async function createAndStage(ctx: SyncContext, actor: Actor, request: PushSessionCreateRequest & { rows: ChunkRequest['rows'] }, bodyBytes: number,
  onCreated: (pushId: string) => void): Promise<{ created: PushSessionCreateResponse; chunk: ChunkResponse | null }> {
  checkCreate(ctx, request);
  const chunk = stagedChunk(ctx, actor, { start_row_ordinal: 0, rows: request.rows }, bodyBytes);
  // OFFSET 0 keeps the create a subquery evaluated once, before the chunk that names its push_id.
  const [row] = await ctx.db.query<{ created: unknown; chunk: unknown }>(sql`
    SELECT c.answer AS created,
           CASE WHEN c.answer->>'status' = 'staging' THEN ${chunkCall(ctx, actor, sql`(c.answer->>'push_id')::uuid`, chunk)} END AS chunk
      FROM (SELECT ${createCall(ctx, actor, request)} AS answer OFFSET 0) c`);
  const created = summaryInProtocol(unwrap<PushSessionCreateResponse>(row?.created), protocolOf(actor));
  if (created.status === 'staging') onCreated(created.push_id);
  return { created, chunk: row?.chunk == null ? null : unwrap<ChunkResponse>(row.chunk) };
}

export async function deletePushSession(ctx: SyncContext, actor: Actor, pushId: string): Promise<void> {
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT sync.push_delete(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid) AS answer`);
  unwrap(row?.answer);
}
