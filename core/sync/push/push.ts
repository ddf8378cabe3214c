/**
 * The write path: staged push sessions. Create, each chunk, commit and delete are one statement
 * each (one round trip) whatever the row count; the set-based work runs in managed functions
 * (push-session.sql.ts, commit.sql.ts). Commit is in commit.ts.
 */
import { createHash } from 'node:crypto';
import { sql } from '../../db/index.js';
import { SyncError } from '../../errors.js';
import { type ChunkRequest, type ChunkResponse, type PushSessionCreateRequest, type PushSessionCreateResponse } from '../../protocol/index.js';
import { validateRows } from './rows.js';
import { unwrap, type Actor, type SyncContext } from '../context.js';
import { formArgument, protocolOf, summaryInProtocol } from '../wire-form.js';

export async function createPushSession(ctx: SyncContext, actor: Actor, request: PushSessionCreateRequest): Promise<PushSessionCreateResponse> {
  if (request.planned_row_count > ctx.limits.maxRowsPerBundle) {
    throw new SyncError('payload_too_large', `planned_row_count ${request.planned_row_count} exceeds max_rows_per_bundle ${ctx.limits.maxRowsPerBundle}`);
  }
  // A create that carries its rows carries all of them (the edge stages and commits them at once).
  if (request.rows && request.rows.length !== request.planned_row_count) {
    throw new SyncError('invalid_request', `rows holds ${request.rows.length} rows but planned_row_count is ${request.planned_row_count}: a create that carries rows carries the whole bundle`);
  }
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.push_create(${actor.userId}, ${actor.sourceId}, ${request.source_bundle_id}, ${request.planned_row_count},
      ${request.initialization_id ?? null}::uuid, ${request.request_hash ?? null}, ${ctx.limits.pushSessionTtlSeconds},
      ${ctx.limits.maxOpenPushSessionsPerUser}, ${ctx.limits.maintenanceIntervalSeconds}${formArgument(ctx, actor)}) AS answer`);
  return summaryInProtocol(unwrap<PushSessionCreateResponse>(row?.answer), protocolOf(actor));
}

/** `bodyBytes` is the request body size; it counts against max_bytes_per_bundle. */
export async function uploadChunk(ctx: SyncContext, actor: Actor, pushId: string, request: ChunkRequest, bodyBytes: number): Promise<ChunkResponse> {
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
  const digest = createHash('sha256').update(rowsJson).digest('hex');
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.push_chunk(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid, ${request.start_row_ordinal},
      ${rowsJson}::jsonb, ${bodyBytes + growthBytes}, ${digest}, ${ctx.limits.maxBytesPerBundle}, ${ctx.limits.maxStagedBytesPerUser},
      ${ctx.limits.maintenanceIntervalSeconds}${formArgument(ctx, actor)}) AS answer`);
  return unwrap<ChunkResponse>(row?.answer);
}

export async function deletePushSession(ctx: SyncContext, actor: Actor, pushId: string): Promise<void> {
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`SELECT sync.push_delete(${actor.userId}, ${actor.sourceId}, ${pushId}::uuid) AS answer`);
  unwrap(row?.answer);
}
