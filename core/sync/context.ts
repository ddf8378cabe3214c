/** What every core operation receives: the request's database view, limits and catalog. */
import { type Queryable } from '../db/index.js';
import { SyncError, isErrorCode, assert } from '../errors.js';
import { type Limits } from '../limits.js';
import { type Catalog } from './catalog/catalog.js';
import { type PendingCounters } from './meta/counters.js';

/** The authenticated caller: a trusted user id and the device's source id. */
export interface Actor {
  readonly userId: string;
  readonly sourceId: string;
}

export interface SyncContext {
  readonly db: Queryable;
  readonly limits: Limits;
  readonly catalog: Catalog;
  /** Counts this runtime could not record yet (the database was unreachable). */
  readonly pending: PendingCounters;
}

/** A JSON body rendered by PostgreSQL, passed to the client without re-serialising it. */
export interface RawJson {
  readonly rawJson: string;
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

/** For page readers that return `(error jsonb, body text)`. */
export function unwrapPage(row: { error: unknown; body: string | null } | undefined): RawJson {
  assert(row, 'page reader returned no row');
  if (row.error !== null) unwrap(row.error);
  assert(row.body !== null, 'page reader returned neither error nor body');
  return { rawJson: row.body };
}

/** Page size from a query parameter, clamped to the published maximum. */
export function pageSize(requested: number | undefined, fallback: number, max: number): number {
  return Math.min(requested ?? fallback, max);
}

/** The byte budget for a page body: the response limit less room for the envelope. */
export function pageBudgetBytes(limits: Limits): number {
  return Math.floor(limits.maxResponseBytes * 0.9);
}
