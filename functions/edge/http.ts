/**
 * The one place that turns outcomes into HTTP: status codes come from the error registry, bodies
 * are `{error, message, ...}`, and every answer reports its SQL round trips.
 */
import { constants, createBrotliCompress, createGzip } from 'node:zlib';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { SyncError, errorRegistry } from '../../core/errors.js';
import { isZodError } from '../../core/protocol/zod.js';
import { defaultLimits } from '../../core/limits.js';
import { isRawJson, rawText } from '../../core/sync/context.js';

export type HttpResult = APIGatewayProxyStructuredResultV2 & { statusCode: number; headers: Record<string, string> };

export interface EdgeAnswer {
  readonly status: number;
  /** A value to serialise, or a JSON text rendered by PostgreSQL. */
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

export const ROUND_TRIPS_HEADER = 'x-lockstep-round-trips';

/** Bodies shorter than this go as they are: compressing them saves less than it costs. */
export const COMPRESS_MIN_BYTES = 8 * 1024;

/** The content codings the edge compresses with, in its order of preference at equal weight. */
export type ContentCoding = 'br' | 'gzip';
const CODINGS: readonly ContentCoding[] = ['br', 'gzip'];

/**
 * The coding to answer in for an Accept-Encoding header, or null for none: the accepted one of
 * highest weight (RFC 9110 §12.5.3; `q=0` refuses, `*` stands for any coding not named), brotli
 * first at equal weight. Brotli at quality 1 compresses a page of rows (~1 MB) in two thirds of
 * gzip's time at level 1 and a little smaller (bench/README, thirty-eighth pass); every current
 * browser asks for it, Node's fetch does not.
 */
export function responseCoding(acceptEncoding: string | undefined): ContentCoding | null {
  if (!acceptEncoding) return null;
  const weights = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [coding = '', ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    weights.set(coding.trim(), Number.isFinite(weight) ? weight : 0);
  }
  let best: ContentCoding | null = null;
  let bestWeight = 0;
  for (const coding of CODINGS) {
    const weight = weights.get(coding) ?? weights.get('*') ?? 0;
    if (weight > bestWeight) {
      best = coding;
      bestWeight = weight;
    }
  }
  return best;
}

/**
 * Compression on libuv's thread pool, not the event loop: a long-running process (the local
 * gateway) answers other requests meanwhile, and a client in the same process applies the page
 * before while the next one compresses (in-process hydration of 100k rows 1,560 → 1,500 ms).
 * The parts go in one by one, so the page is never one text or one buffer here. The fastest
 * settings (brotli quality 1, gzip level 1): most of the ratio on JSON at a fraction of the
 * default settings' time.
 */
function compressParts(parts: readonly string[], coding: ContentCoding): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const stream = coding === 'br'
      ? createBrotliCompress({ params: { [constants.BROTLI_PARAM_QUALITY]: 1, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT } })
      : createGzip({ level: 1 });
    const out: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => out.push(chunk));
    stream.once('error', reject);
    stream.once('end', () => resolve(Buffer.concat(out)));
    for (const part of parts) stream.write(part);
    stream.end();
  });
}

/**
 * The Lambda result of an answer. API Gateway HTTP APIs do not compress, so large bodies are
 * compressed here (brotli or gzip, responseCoding) when the client accepts it, and sent base64-encoded (`isBase64Encoded`; API
 * Gateway and the local gateway decode it). Lambda counts the result as serialised, so the
 * compressed form is used only when its base64 is smaller than the body's UTF-8, which is never
 * more than the body escaped as a JSON string: a page budgeted in escaped bytes (pageBudgetBytes)
 * then never grows past its budget. (Measuring the escaped size itself took a JSON.stringify of
 * the whole body, a tenth of the page's time on the server.)
 */
export async function toHttp(answer: EdgeAnswer, roundTrips: number, acceptEncoding?: string): Promise<HttpResult> {
  const headers: Record<string, string> = { ...answer.headers, [ROUND_TRIPS_HEADER]: String(roundTrips) };
  if (answer.body === undefined) return { statusCode: answer.status, headers };
  headers['content-type'] = 'application/json';
  const parts = isRawJson(answer.body) ? answer.body.rawParts : [JSON.stringify(answer.body)];
  const coding = responseCoding(acceptEncoding);
  if (coding !== null && parts.reduce((n, part) => n + part.length, 0) >= COMPRESS_MIN_BYTES) {
    const encoded = (await compressParts(parts, coding)).toString('base64');
    if (encoded.length < parts.reduce((n, part) => n + Buffer.byteLength(part), 0)) {
      return { statusCode: answer.status, headers: { ...headers, 'content-encoding': coding, vary: 'accept-encoding' }, body: encoded, isBase64Encoded: true };
    }
  }
  // A Lambda result's body is one string: only an answer that goes uncompressed is joined.
  return { statusCode: answer.status, headers, body: rawText({ rawParts: parts }) };
}

/**
 * Transient database conditions a client cannot cause and may simply retry: 503 with Retry-After.
 * - class 08 (connection exception), 57P (admin/crash shutdown, cannot connect now, database
 *   dropped) and 57014 (query_canceled: statement_timeout or a cancel by an operator);
 * - 55P03 lock_not_available (lock_timeout), 40001 serialization_failure, 40P01 deadlock;
 * - class 53 (insufficient resources: too_many_connections 53300, disk full, out of memory);
 * - refused at connection time: the database is gone (3D000) or the runtime's credentials no
 *   longer work (class 28). Operators fix these, not clients;
 * - socket errors and the drivers' connect and pool-slot timeouts, which carry no SQLSTATE;
 * - TLS that cannot be had (a server without it, a certificate that does not verify): the
 *   connection string requires it, and nothing falls back to the clear.
 * The write path maps a connection lost during COMMIT to commit_outcome_unknown before this.
 */
export function isUnavailable(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return false;
  const e = error as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (code.startsWith('08') || code.startsWith('57P') || code.startsWith('53') || code.startsWith('28')) return true;
  if (['57014', '55P03', '40001', '40P01', '3D000'].includes(code)) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'].includes(code)) return true;
  if (/CERT|^ERR_TLS_|^ERR_SSL_/.test(code)) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED|Client has encountered a connection error|Connection ended unexpectedly|WebSocket|does not support SSL/i.test(message);
}

/**
 * SQLSTATEs a managed function raises when a registered table no longer matches the catalog it
 * was registered with (a column or table dropped or retyped behind bootstrap's back): undefined
 * column, table or function, datatype mismatch. The request is refused as drift, never a 500.
 */
export function isLayoutDrift(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && ['42703', '42P01', '42883', '42804'].includes(code);
}

/**
 * The serving role may not use the `sync` schema (42501 insufficient_privilege: permission denied
 * for the schema, a table or a function). An operator's misconfiguration, never the client's:
 * 503 with reason `insufficient_privilege`, as health reports it. (The guards' own 42501 never
 * reaches a request: a commit answers it as push_rejected.)
 */
export function isInsufficientPrivilege(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '42501';
}

/** What a 503 for insufficient privilege tells the operator. */
export function insufficientPrivilegeDetail(error: unknown): string {
  return `the serving role lacks privileges on the sync schema (${(error as Error).message}): connect as the role that owns it, which bootstrap used`;
}

/**
 * The outcome of a failed request. Every 503 carries `Retry-After`: the error's own interval
 * when it has one, else `retryAfterSeconds` (limits.unavailableRetryAfterSeconds).
 */
export function errorAnswer(error: unknown, retryAfterSeconds: number = defaultLimits.unavailableRetryAfterSeconds): EdgeAnswer {
  if (error instanceof SyncError) {
    const headers: Record<string, string> = {};
    if (error.retryAfterSeconds !== undefined) headers['retry-after'] = String(error.retryAfterSeconds);
    else if (error.status === 503) headers['retry-after'] = String(retryAfterSeconds);
    return { status: error.status, body: error.toBody(), headers };
  }
  if (isZodError(error)) {
    const details = error.issues.slice(0, 20).map((i) => ({ path: i.path.join('.'), message: i.message }));
    const first = details[0];
    return { status: 400, body: { error: 'invalid_request', message: first ? `${first.path || 'body'}: ${first.message}` : 'invalid request', details } };
  }
  if (isLayoutDrift(error)) {
    const detail = `the registered tables drifted from the sync catalog (${(error as Error).message}); run bootstrap, see /syncx/health`;
    return {
      status: errorRegistry.service_unavailable.status,
      body: { error: 'service_unavailable', message: detail, reason: 'layout_drift', detail },
      headers: { 'retry-after': String(retryAfterSeconds) },
    };
  }
  if (isInsufficientPrivilege(error)) {
    const detail = insufficientPrivilegeDetail(error);
    return {
      status: errorRegistry.service_unavailable.status,
      body: { error: 'service_unavailable', message: detail, reason: 'insufficient_privilege', detail },
      headers: { 'retry-after': String(retryAfterSeconds) },
    };
  }
  if (isUnavailable(error)) {
    return {
      status: errorRegistry.service_unavailable.status,
      body: { error: 'service_unavailable', message: 'the database is unavailable or busy; retry later' },
      headers: { 'retry-after': String(retryAfterSeconds) },
    };
  }
  // The caller logs it with its stack (functions/edge/telemetry.ts).
  return { status: errorRegistry.internal_error.status, body: { error: 'internal_error', message: 'internal error' } };
}
