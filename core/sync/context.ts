/** What every core operation receives: the request's database view, limits and catalog. */
import { ident, sql, type Queryable, type SqlFragment } from '../db/index.js';
import { SyncError, isErrorCode, assert } from '../errors.js';
import { type Limits } from '../limits.js';
import { type ProtocolVersion } from '../protocol/version.js';
import { type Catalog } from './catalog/catalog.js';
import { type PendingCounters } from './meta/counters.js';

/** The authenticated caller: a trusted user id and the device's source id. */
export interface Actor {
  readonly userId: string;
  readonly sourceId: string;
  /**
   * The protocol the device speaks (the Sync-Protocol-Version header; 1 when absent): which json
   * form its rows are sent and answered in (core/sync/wire-form.ts).
   */
  readonly protocol?: ProtocolVersion;
}

export interface SyncContext {
  readonly db: Queryable;
  readonly limits: Limits;
  readonly catalog: Catalog;
  /** Counts this runtime could not record yet (the database was unreachable). */
  readonly pending: PendingCounters;
}

/**
 * A JSON body rendered by PostgreSQL, passed to the client without re-serialising it, in the parts
 * it was read in: the edge compresses them one by one, so no text of the whole page is made where
 * none is needed (a megabyte string costs Node a fresh large-object page: ~4 ms to build on these
 * machines, against 0.1 ms for the same characters in 64 KB parts).
 */
export interface RawJson {
  readonly rawParts: readonly string[];
}

/** Whether an answer's body is a raw body (passed on as it is, never serialised). */
export function isRawJson(body: unknown): body is RawJson {
  return typeof body === 'object' && body !== null && Array.isArray((body as RawJson).rawParts);
}

/** The whole text of a raw body. */
export function rawText(raw: RawJson): string {
  return raw.rawParts.length === 1 ? (raw.rawParts[0] as string) : raw.rawParts.join('');
}

/** Turns a managed function's `{error, message, ...}` answer into a SyncError. */
export function unwrap<T>(answer: unknown): T {
  assert(answer !== null && typeof answer === 'object', 'managed function returned no answer');
  const body = answer as Record<string, unknown>;
  const code = body['error'];
  if (code === undefined) return answer as T;
  assert(isErrorCode(code), `managed function returned unknown error code ${String(code)}`);
  const { error: _e, message, ...extra } = body;
  const retryAfter = typeof extra['retry_after_seconds'] === 'number' ? extra['retry_after_seconds'] : undefined;
  throw new SyncError(code, String(message), extra, retryAfter);
}

/** The layout whose page readers answer a body as its parts in order (migration 0027). */
export const PAGE_PARTS_LAYOUT = 27;

/** The managed functions that answer a page as `(error jsonb, body text)` rows. */
export type PageReader = 'pull' | 'committed_rows' | 'snapshot_page';

/**
 * One page, in one statement: from layout 27 the reader's `_parts` function, whose rows are the
 * body's parts in order (PostgreSQL never holds the page as one text, nor does the edge), before it
 * the reader itself, whose one row is the whole body. The first row carries an error instead, if any.
 */
export async function readPage(ctx: SyncContext, reader: PageReader, args: SqlFragment): Promise<RawJson> {
  const fn = ident('sync', ctx.catalog.layoutVersion >= PAGE_PARTS_LAYOUT ? `${reader}_parts` : reader);
  const rows = await ctx.db.query<{ error: unknown; body: string | null }>(sql`
    SELECT p.error, p.body FROM ${fn}(${args}) WITH ORDINALITY AS p(error, body, n) ORDER BY p.n`);
  const [first] = rows;
  assert(first, 'page reader returned no row');
  if (first.error !== null) unwrap(first.error);
  const parts = rows.map((row) => row.body);
  assert(parts.every((part) => part !== null), 'page reader returned neither error nor body');
  return { rawParts: parts as string[] };
}

/** Page size from a query parameter, clamped to the published maximum. */
export function pageSize(requested: number | undefined, fallback: number, max: number): number {
  return Math.min(requested ?? fallback, max);
}

/**
 * The byte budget of a page body, in the bytes Lambda counts: the body's UTF-8 once escaped as a
 * JSON string (the managed functions measure rows with sync.wire_bytes). The response limit less
 * the function result's envelope. A compressing edge never exceeds it: it sends the compressed
 * form only when its base64 is smaller than the escaped text.
 */
export function pageBudgetBytes(limits: Limits): number {
  return limits.maxResponseBytes - reserve(limits, limits.responseEnvelopeBytes);
}

/** The largest committed row, in escaped bytes, that a page can carry alone; commit refuses larger ones. */
export function rowWireBytesMax(limits: Limits): number {
  return pageBudgetBytes(limits) - reserve(limits, limits.pageEnvelopeBytes);
}

/** An envelope reserve, never more than an eighth of a (test-sized) response limit. */
function reserve(limits: Limits, bytes: number): number {
  return Math.min(bytes, Math.floor(limits.maxResponseBytes / 8));
}

/** SQLSTATE of finalize_bundle's refusal of a row no response could carry (→ 413 payload_too_large). */
export const ROW_TOO_LARGE_SQLSTATE = 'LS413';

/**
 * SQLSTATE of capture's refusal of an UPDATE that changes a sync key or `_sync_scope_id`
 * (class 23, so a commit answers it as `push_rejected`; a server write throws KeyChangeRefused).
 */
export const KEY_CHANGE_SQLSTATE = '23LS1';
