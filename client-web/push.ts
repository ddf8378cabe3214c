/**
 * The push step (protocol §5.2–§5.3, §10.1–§10.2): one frozen bundle through a staged push
 * session, answered as an outcome. The step only talks to the server; what an outcome does to the
 * local database (replay, conflict resolution, a rejection, a reconnect) is the coordinator's.
 *
 *   create ─▶ chunks ─▶ commit ─▶ committed
 *   create carrying the rows ─▶ committed   (a bundle that fits one request, when the server
 *     │                                      offers `single_request_push`: one round trip; its
 *     │                                      failures are those below, answered by the create;
 *     │                                      a payload_too_large without split is pushed
 *     │                                      staged, whose answers tell the bundle from a row)
 *     │ already_committed ─────▶ committed (alreadyCommitted: a lost answer, §10.2)
 *     │ scope refusals ────────▶ scope_refused      (connect again)
 *     │ source refusals ───────▶ source_refused     (§10.5, recovery is explicit)
 *     │ payload_too_large ─────▶ too_large          (freeze fewer rows), or rejected for one row
 *               a one-row chunk over the request limit ─▶ rejected, naming that row
 *     │ invalid_request ───────▶ rejected
 *               chunk out of order ─▶ resume at the server's ordinal
 *                         push_conflict ─▶ conflicts          (resolve, rewrite, push again)
 *                         payload_too_large {split} ─▶ too_large (the commit outran the server's bound)
 *                         commit_outcome_unknown, session gone ─▶ create again (same hash)
 *                         push_rejected ─▶ rejected
 *
 * Every request is safe to repeat: the bundle is frozen (source tuple and canonical request hash
 * are durable), and the server deduplicates by that tuple.
 */
import { ConnectResponse } from '../core/protocol/connect.js';
import { type Conflict, ErrorBody } from '../core/protocol/meta.js';
import { ChunkResponse, CommitResponse, PushSessionCreateResponse, type BundleSummary } from '../core/protocol/push-session.js';
import { type ProtocolVersion } from '../core/protocol/version.js';
import { jsonStringBytes, jsonStringBytesBound } from '../core/protocol/wire-bytes.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode, isServerErrorCode } from './errors.js';
import { isCode, SCOPE_REFUSALS, SOURCE_REFUSALS } from './http-errors.js';
import { readOutbox, type OutboxRow } from './outbox.js';
import { readAttachment, ROW_TOO_LARGE, type FrozenBundle, type Rejection, type Violation } from './state.js';
import type { SyncHttpError } from './transport.js';

/** Sessions one push attempt starts at most (lost commit answers, expired sessions). */
const MAX_SESSIONS = 8;
/** Chunks are kept under this share of the server's request limit (JSON framing, headers). */
const REQUEST_BYTES_SHARE = 0.85;

/**
 * A row's share of the request as the server's limit counts it: the invoke event, where the body
 * is an escaped JSON string, so every `"` and `\` of the row's JSON counts twice (protocol §6).
 */
const wireBytes = (value: unknown): number => jsonStringBytes(JSON.stringify(value)) - 2;

/**
 * The JSON text of `wires` when they fit `budget` besides `framing` bytes, as the row-by-row count
 * adds it up (`framing` + each row's wireBytes + 1), measured on their array's text at once: a
 * chunk under the limit, the usual case, is not measured row by row (10k rows: ~25 ms of the
 * client's push), and its text is the one the request sends. First a bound (escaping at most
 * doubles the UTF-8 bytes), then, when that is not enough, the exact size: the array's escaped
 * text (jsonStringBytes adds its 2 quotes) is the rows' with a comma between two and its
 * brackets, so the count is that less 3 (one more than the count for no row at all). Null means
 * "walk the rows".
 */
const textIfFits = (wires: readonly unknown[], framing: number, budget: number): string | null => {
  const text = JSON.stringify(wires);
  if (jsonStringBytesBound(text) + framing <= budget) return text;
  return jsonStringBytes(text) - 3 + framing <= budget ? text : null;
};

/** What pushing one frozen bundle came to. */
export type PushAttempt =
  | { readonly kind: 'committed'; readonly bundle: BundleSummary; readonly alreadyCommitted: boolean }
  | { readonly kind: 'conflicts'; readonly conflicts: readonly Conflict[]; readonly rows: readonly OutboxRow[] }
  | { readonly kind: 'rejected'; readonly rejection: Rejection }
  | { readonly kind: 'scope_refused' }
  | { readonly kind: 'source_refused'; readonly error: SyncHttpError }
  | { readonly kind: 'too_large' };

/** The server's refusal as the client keeps it. */
export function rejectionOf(error: SyncHttpError): Rejection {
  const body = ErrorBody.safeParse(error.body);
  const v = body.success ? body.data.violation : undefined;
  const violation: Violation | null = v
    ? { sqlstate: v.sqlstate, constraint: v.constraint, schema: v.schema, table: v.table, key: v.key, ...(v.column !== undefined ? { column: v.column } : {}) }
    : null;
  const details = body.success ? body.data.details : undefined;
  const code = isServerErrorCode(error.code) ? error.code : 'push_rejected';
  return { code, message: error.message, violation, ...(details !== undefined ? { details } : {}) };
}

/** A row the server refused as too large by itself (a one-row chunk over its request limit). */
class RowTooLarge extends Error {
  constructor(readonly error: SyncHttpError, readonly row: OutboxRow) {
    super(error.message);
  }

  rejection(): Rejection {
    const { table, keyWire } = this.row;
    return {
      code: 'payload_too_large',
      message: `row ${table.wireName} ${keyWire} is larger than the server accepts in one request: ${this.error.message}`,
      violation: { sqlstate: ROW_TOO_LARGE, constraint: null, schema: table.schema, table: table.table, column: null, key: { [table.key.name]: keyWire } },
    };
  }
}

/** Uploads rows from `start` on, in the bundle's `protocol`; answers when the server holds all of them. */
async function upload(ctx: ClientContext, pushId: string, rows: readonly OutboxRow[], start: number, protocol: ProtocolVersion): Promise<void> {
  const budget = requestBudget(ctx);
  let next = start;
  let chunkRows = ctx.limits.pushChunkRows;
  while (next < rows.length) {
    let chunk = rows.slice(next, next + chunkRows).map((r) => r.wire);
    const text = textIfFits(chunk, 64, budget);
    if (text === null) {
      chunk = [];
      let bytes = 64;
      for (let i = next; i < rows.length && chunk.length < chunkRows; i++) {
        const wire = (rows[i] as OutboxRow).wire;
        const size = wireBytes(wire) + 1;
        if (chunk.length > 0 && bytes + size > budget) break;
        bytes += size;
        chunk.push(wire);
      }
    }
    try {
      const answer = await ctx.transport.request('POST', `/sync/push-sessions/${pushId}/chunks`, {
        // The measured text itself when the whole slice fitted: JSON.stringify's text of the same body.
        ...(text !== null ? { bodyJson: `{"start_row_ordinal":${next},"rows":${text}}` } : { body: { start_row_ordinal: next, rows: chunk } }),
        schema: ChunkResponse,
        protocol,
      });
      next = answer.next_expected_row_ordinal;
    } catch (error) {
      if (isCode(error, 'push_chunk_out_of_order') && typeof error.body['next_expected_row_ordinal'] === 'number') {
        next = error.body['next_expected_row_ordinal'];
        continue;
      }
      if (isCode(error, 'payload_too_large') && chunk.length > 1) {
        chunkRows = Math.max(1, Math.floor(chunk.length / 2));
        continue;
      }
      // One row alone is over the request limit: it can never be pushed. Named, so it is set
      // aside by itself and the rows beside it still commit.
      if (isCode(error, 'payload_too_large')) throw new RowTooLarge(error, rows[next] as OutboxRow);
      throw error;
    }
    ctx.progress({ phase: 'push', rowsDone: next, rowsTotal: rows.length });
  }
}

/** The chunk budget of one request: a share of the server's request limit (see upload). */
function requestBudget(ctx: ClientContext): number {
  return Math.floor(ctx.limits.maxRequestBytes * REQUEST_BYTES_SHARE);
}

/** Whether the whole bundle fits one chunk of one request, so its create can carry it. */
function fitsOneRequest(ctx: ClientContext, rows: readonly OutboxRow[]): boolean {
  if (rows.length > ctx.limits.pushChunkRows) return false;
  // The create's own fields and the array's framing, with room to spare.
  if (textIfFits(rows.map((r) => r.wire), 512, requestBudget(ctx)) !== null) return true;
  let bytes = 512;
  for (const row of rows) {
    bytes += wireBytes(row.wire) + 1;
    if (bytes > requestBudget(ctx)) return false;
  }
  return true;
}

/** The conflicts a `push_conflict` answer lists, as an attempt (null when it lists none). */
function conflictsOf(error: SyncHttpError, rows: readonly OutboxRow[]): PushAttempt | null {
  const body = ErrorBody.parse(error.body);
  const conflicts = body.conflicts ?? (body.conflict ? [body.conflict] : []);
  return conflicts.length === 0 ? null : { kind: 'conflicts', conflicts, rows };
}

/**
 * What a create that carried the bundle's rows answered when it did not commit: the outcome, or
 * `again` (a new session, same tuple and hash: the server drops the one it opened), or `staged`
 * (push this bundle through create, chunks and commit, whose answers say more precisely what a
 * `payload_too_large` is about: the bundle or one row). A commit that outran the server's time
 * bound (`split: true`) is answered as the staged commit's would be: staging the same rows would
 * only run the same commit into the bound again.
 */
function oneRequestOutcome(error: unknown, rows: readonly OutboxRow[]): PushAttempt | 'again' | 'staged' | null {
  if (isCode(error, 'push_conflict')) return conflictsOf(error, rows);
  if (isCode(error, 'push_rejected', 'invalid_request')) return { kind: 'rejected', rejection: rejectionOf(error) };
  if (isCode(error, 'push_session_not_found', 'push_session_expired', 'commit_outcome_unknown')) return 'again';
  if (isCode(error, 'payload_too_large') && error.body['split'] === true) {
    return rows.length > 1 ? { kind: 'too_large' } : { kind: 'rejected', rejection: rejectionOf(error) };
  }
  if (isCode(error, 'payload_too_large', 'push_chunk_out_of_order', 'push_incomplete')) return 'staged';
  return null;
}

/**
 * Pushes one frozen bundle until the server commits it or answers an outcome the coordinator
 * handles. `frozenRows`: the bundle's rows when the caller froze it just now (else read from the outbox).
 */
export async function pushBundle(ctx: ClientContext, frozen: FrozenBundle, frozenRows?: readonly OutboxRow[]): Promise<PushAttempt> {
  let rows: readonly OutboxRow[] | undefined = frozenRows;
  let oneRequest = ctx.limits.pushInOneRequest;
  for (let session = 1; session <= MAX_SESSIONS; session++) {
    const { initializationId } = await readAttachment(ctx.db);
    if (oneRequest) {
      rows ??= await readOutbox(ctx.db, ctx.model, frozen);
      oneRequest = fitsOneRequest(ctx, rows);
    }
    const carried = oneRequest ? rows : undefined;
    let created: PushSessionCreateResponse;
    try {
      created = await ctx.transport.request('POST', '/sync/push-sessions', {
        body: {
          source_bundle_id: frozen.sourceBundleId,
          planned_row_count: frozen.rowCount,
          request_hash: frozen.requestHash,
          ...(initializationId ? { initialization_id: initializationId } : {}),
          ...(carried ? { rows: carried.map((r) => r.wire) } : {}),
        },
        schema: PushSessionCreateResponse,
        // The rows, and the request hash over them, are in the protocol they were frozen in.
        protocol: frozen.protocol,
      });
    } catch (error) {
      if (isCode(error, ...SOURCE_REFUSALS)) return { kind: 'source_refused', error };
      if (isCode(error, ...SCOPE_REFUSALS)) return { kind: 'scope_refused' };
      if (carried) {
        const outcome = oneRequestOutcome(error, carried);
        if (outcome === 'again') continue;
        if (outcome === 'staged') {
          oneRequest = false;
          continue;
        }
        if (outcome) return outcome;
        throw error;
      }
      // The server measures the bundle larger than the freeze did: fewer rows may fit.
      if (isCode(error, 'payload_too_large') && frozen.rowCount > 1) return { kind: 'too_large' };
      if (isCode(error, 'invalid_request', 'payload_too_large')) return { kind: 'rejected', rejection: rejectionOf(error) };
      throw error;
    }
    if (created.status === 'already_committed') return { kind: 'committed', bundle: created, alreadyCommitted: true };
    if (created.status === 'committed') {
      ctx.progress({ phase: 'push', rowsDone: frozen.rowCount, rowsTotal: frozen.rowCount });
      return { kind: 'committed', bundle: created, alreadyCommitted: false };
    }
    rows ??= await readOutbox(ctx.db, ctx.model, frozen);
    const staged = rows;
    let start = created.next_expected_row_ordinal;
    for (let attempt = 0; attempt < 4; attempt++) {
      try {
        await upload(ctx, created.push_id, staged, start, frozen.protocol);
        const committed = await ctx.transport.request('POST', `/sync/push-sessions/${created.push_id}/commit`, { body: {}, schema: CommitResponse, protocol: frozen.protocol });
        return { kind: 'committed', bundle: committed, alreadyCommitted: false };
      } catch (error) {
        if (error instanceof RowTooLarge) return { kind: 'rejected', rejection: error.rejection() };
        if (isCode(error, 'push_incomplete') && typeof error.body['next_expected_row_ordinal'] === 'number') {
          start = error.body['next_expected_row_ordinal'];
          continue;
        }
        // Start over from create: the same tuple and hash converge to already_committed if it landed.
        if (isCode(error, 'push_session_not_found', 'push_session_expired', 'commit_outcome_unknown')) break;
        if (isCode(error, 'push_conflict')) {
          const conflicts = conflictsOf(error, staged);
          if (!conflicts) throw error;
          return conflicts;
        }
        // The commit ran out of the server's time bound (`split: true`): fewer rows may fit.
        if (isCode(error, 'payload_too_large') && error.body['split'] === true && frozen.rowCount > 1) return { kind: 'too_large' };
        if (isCode(error, 'push_rejected', 'invalid_request', 'payload_too_large')) return { kind: 'rejected', rejection: rejectionOf(error) };
        if (isCode(error, ...SOURCE_REFUSALS)) return { kind: 'source_refused', error };
        throw error;
      }
    }
  }
  throw new ClientError(ClientErrorCode.pushNotConverging, `source bundle ${frozen.sourceBundleId} did not commit within ${MAX_SESSIONS} push sessions`);
}

/** `POST /sync/connect`: how the server resolves this device's first connect for the user. */
export async function connect(ctx: ClientContext, hasLocalPendingRows: boolean): Promise<ConnectResponse> {
  return ctx.transport.request('POST', '/sync/connect', { body: { has_local_pending_rows: hasLocalPendingRows }, schema: ConnectResponse });
}
