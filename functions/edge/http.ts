/**
 * The one place that turns outcomes into HTTP: status codes come from the error registry, bodies
 * are `{error, message, ...}`, and every answer reports its SQL round trips.
 */
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { ZodError } from 'zod';
import { SyncError, errorRegistry } from '../../core/errors.js';
import { type RawJson } from '../../core/sync/index.js';

export type HttpResult = APIGatewayProxyStructuredResultV2 & { statusCode: number; headers: Record<string, string> };

export interface EdgeAnswer {
  readonly status: number;
  /** A value to serialise, or a JSON text rendered by PostgreSQL. */
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

export const ROUND_TRIPS_HEADER = 'x-lockstep-round-trips';

function isRaw(body: unknown): body is RawJson {
  return typeof body === 'object' && body !== null && typeof (body as RawJson).rawJson === 'string';
}

export function toHttp(answer: EdgeAnswer, roundTrips: number): HttpResult {
  const headers: Record<string, string> = { ...answer.headers, [ROUND_TRIPS_HEADER]: String(roundTrips) };
  if (answer.body === undefined) return { statusCode: answer.status, headers };
  headers['content-type'] = 'application/json';
  const body = isRaw(answer.body) ? answer.body.rawJson : JSON.stringify(answer.body);
  return { statusCode: answer.status, headers, body };
}

/** Connection-level failures: the database is unreachable or went away. */
function isUnavailable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '40001' || code === '40P01' || code === '55P03') return true;
  // Refused at connection time: the database is gone (3D000, e.g. dropped or renamed) or the
  // runtime's credentials no longer work (class 28). Operators fix these, not clients: 503.
  if (code === '3D000' || code.startsWith('28')) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN'].includes(code)) return true;
  const message = typeof e.message === 'string' ? e.message : '';
  return /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED|Client has encountered a connection error|WebSocket/i.test(message);
}

export function errorAnswer(error: unknown): EdgeAnswer {
  if (error instanceof SyncError) {
    const headers: Record<string, string> = {};
    if (error.retryAfterSeconds !== undefined) headers['retry-after'] = String(error.retryAfterSeconds);
    return { status: error.status, body: error.toBody(), headers };
  }
  if (error instanceof ZodError) {
    const details = error.issues.slice(0, 20).map((i) => ({ path: i.path.join('.'), message: i.message }));
    const first = details[0];
    return { status: 400, body: { error: 'invalid_request', message: first ? `${first.path || 'body'}: ${first.message}` : 'invalid request', details } };
  }
  if (isUnavailable(error)) {
    return { status: 503, body: { error: 'service_unavailable', message: 'the database is unavailable; retry later' }, headers: { 'retry-after': '1' } };
  }
  console.error('lockstep internal error', error);
  return { status: errorRegistry.internal_error.status, body: { error: 'internal_error', message: 'internal error' } };
}
