/**
 * An API Gateway HTTP API (payload v2) event, reduced to what the routes need: method, path,
 * query, lower-cased headers, the body text, and the authorizer's claims.
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { SyncError } from '../../core/errors.js';
import { PROTOCOL_HEADER, SOURCE_ID_HEADER, SOURCE_ID_PATTERN, userIdProblem, type ProtocolVersion } from '../../core/protocol/index.js';
import { type Actor } from '../../core/sync/index.js';
import { serializedBytesWithBody, serializedOver } from '../../core/protocol/wire-bytes.js';

/** The v2 event with either authorizer shape (JWT claims, or a Lambda authorizer's context). */
export type HttpApiEvent = APIGatewayProxyEventV2 & {
  requestContext: APIGatewayProxyEventV2['requestContext'] & {
    authorizer?: { jwt?: { claims?: Record<string, unknown> }; lambda?: Record<string, unknown>; iam?: Record<string, unknown> };
  };
};

export interface EdgeRequest {
  readonly method: string;
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  readonly headers: Readonly<Record<string, string>>;
  readonly bodyText: string | undefined;
  readonly bodyBytes: number;
  readonly event: HttpApiEvent;
}

export function readRequest(event: HttpApiEvent, maxRequestBytes: number): Omit<EdgeRequest, 'params'> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers ?? {})) if (v !== undefined) headers[k.toLowerCase()] = v;
  const query: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.queryStringParameters ?? {})) if (v !== undefined) query[k] = v;
  let bodyText: string | undefined;
  let bodyBytes = 0;
  if (event.body !== undefined && event.body !== null && event.body !== '') {
    // Lambda counts the invoke event, where the body is an escaped JSON string (base64 when API
    // Gateway encoded it): that is what max_request_bytes bounds, not the body's own bytes.
    // Measured only when a bound cannot tell (serializedOver): a 1 MB chunk under a 4 MiB limit
    // is not walked byte by byte (~3.5 ms a 1 MB chunk).
    if (serializedOver(event, maxRequestBytes)) {
      const eventBytes = serializedBytesWithBody(event);
      throw new SyncError('payload_too_large',
        `the request is ${eventBytes} bytes as Lambda counts it (the JSON-escaped invoke event), over max_request_bytes (${maxRequestBytes}); send smaller chunks`,
        { request_bytes: eventBytes, max_request_bytes: maxRequestBytes });
    }
    if (event.isBase64Encoded) {
      const buffer = Buffer.from(event.body, 'base64');
      bodyBytes = buffer.byteLength;
      bodyText = buffer.toString('utf8');
    } else {
      // The text as its UTF-8 bytes would decode (a lone surrogate becomes U+FFFD), without the
      // round trip through a buffer: an encode and a decode of every body (~5 ms a 1 MB chunk).
      bodyText = wellFormed(event.body);
      bodyBytes = Buffer.byteLength(bodyText, 'utf8');
    }
    if (bodyBytes > maxRequestBytes) {
      throw new SyncError('payload_too_large', `the request body exceeds max_request_bytes (${maxRequestBytes} bytes)`);
    }
  }
  return { method: event.requestContext.http.method.toUpperCase(), path: event.rawPath, query, headers, bodyText, bodyBytes, event };
}

/** ES2024's String.prototype.isWellFormed/toWellFormed (Node ≥ 20), not yet in the compiled lib. */
type WellFormedString = string & { isWellFormed(): boolean; toWellFormed(): string };

/** `text` with every lone surrogate replaced by U+FFFD, as a UTF-8 encode and decode would leave it. */
function wellFormed(text: string): string {
  const s = text as WellFormedString;
  return s.isWellFormed() ? text : s.toWellFormed();
}

/** Parses and validates a JSON body (a zod schema, or a parse with the same contract); an absent body is `{}` when `optional`. */
export function parseBody<T>(request: EdgeRequest, schema: { parse(value: unknown): T }, optional = false): T {
  let value: unknown = {};
  if (request.bodyText !== undefined) {
    try {
      value = JSON.parse(request.bodyText);
    } catch {
      throw new SyncError('invalid_request', 'the body is not valid JSON');
    }
  } else if (!optional) {
    throw new SyncError('invalid_request', 'a JSON body is required');
  }
  return schema.parse(value);
}

const nonNegative = /^(0|[1-9][0-9]{0,15})$/;

/** A non-negative integer query parameter, or `undefined` when absent. */
export function queryInt(request: EdgeRequest, name: string, { min = 0 } = {}): number | undefined {
  const raw = request.query[name];
  if (raw === undefined) return undefined;
  if (!nonNegative.test(raw) || Number(raw) > Number.MAX_SAFE_INTEGER || Number(raw) < min) {
    throw new SyncError('invalid_request', `query parameter ${name} must be an integer ≥ ${min}`);
  }
  return Number(raw);
}

/** A query parameter that is one of `values`, or `undefined` when absent. */
export function queryEnum<T extends string>(request: EdgeRequest, name: string, values: readonly T[]): T | undefined {
  const raw = request.query[name];
  if (raw === undefined) return undefined;
  if (!(values as readonly string[]).includes(raw)) throw new SyncError('invalid_request', `query parameter ${name} must be one of ${values.join(', ')}`);
  return raw as T;
}

export function pathInt(request: EdgeRequest, name: string): number {
  const raw = request.params[name] ?? '';
  if (!nonNegative.test(raw) || Number(raw) > Number.MAX_SAFE_INTEGER) throw new SyncError('invalid_request', `path parameter ${name} must be a non-negative integer`);
  return Number(raw);
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

export function pathUuid(request: EdgeRequest, name: string): string {
  const raw = request.params[name] ?? '';
  if (!UUID.test(raw)) throw new SyncError('invalid_request', `path parameter ${name} must be a UUID`);
  return raw.toLowerCase();
}

/** The one user id check (core/protocol/user-id.ts), re-exported for the edge's callers. */
export { isStorableUserId } from '../../core/protocol/index.js';

/**
 * The protocol a request speaks: the Sync-Protocol-Version header, 1 when absent (clients
 * written before protocol 2 never send it). Whether the database can serve it is the handler's
 * to check, with the catalog.
 */
export function protocolOf(request: EdgeRequest): ProtocolVersion {
  const value = request.headers[PROTOCOL_HEADER];
  if (value === undefined || value === '1') return 1;
  if (value === '2') return 2;
  throw new SyncError('invalid_request', 'Sync-Protocol-Version must be 1 or 2 (docs/protocol.md §9)');
}

/**
 * The actor: the trusted user id from the authorizer (JWT claim, or a Lambda authorizer's
 * `userId`), the source id from the Sync-Source-ID header and the protocol it speaks.
 */
export function actorOf(request: EdgeRequest, userIdClaim: string): Actor {
  const authorizer = request.event.requestContext.authorizer;
  const claim = authorizer?.jwt?.claims?.[userIdClaim] ?? authorizer?.lambda?.['userId'];
  // PostgreSQL text cannot hold U+0000 (the statement would fail: a 500), and a lone surrogate
  // is encoded as U+FFFD on the way to PostgreSQL, so two different claims would share one
  // stream. Neither is a user id this service can keep apart: refused like a missing one.
  const problem = userIdProblem(claim);
  if (problem !== null || typeof claim !== 'string') {
    throw new SyncError('authentication_failed', problem === 'no user id' || problem === null
      ? 'no authenticated user: send a valid bearer token'
      : `the user id claim is refused: ${problem}`);
  }
  const source = request.headers[SOURCE_ID_HEADER];
  if (source === undefined) throw new SyncError('invalid_request', 'the Sync-Source-ID header is required');
  if (!SOURCE_ID_PATTERN.test(source)) throw new SyncError('invalid_request', 'Sync-Source-ID must be 1-128 characters of [A-Za-z0-9._:-]');
  return { userId: claim, sourceId: source, protocol: protocolOf(request) };
}

/**
 * An operator route's caller: API Gateway's IAM authorizer (the route's AuthorizationType is
 * AWS_IAM) has verified the SigV4 signature and put the caller in `authorizer.iam`. Checked here
 * too, so a route deployed without the authorizer refuses instead of answering anyone.
 */
export function requireOperator(request: EdgeRequest): void {
  const iam = request.event.requestContext.authorizer?.iam;
  if (!iam || typeof iam !== 'object') throw new SyncError('forbidden', 'this route needs IAM-signed operator credentials');
}
