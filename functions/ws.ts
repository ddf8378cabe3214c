/**
 * Lambda: the API Gateway WebSocket API of push notifications (protocol §5.9, issue 17 item 5).
 * - `$connect` (`wss://…/{stage}?token=<JWT>&source_id=<source>`): verifies the token as the HTTP
 *   API's JWT authorizer does (browsers cannot send headers on a WebSocket, so it travels in the
 *   query; the access log format leaves query strings out) and records the connection id for the
 *   user in `sync.ws_connections`. 401 refuses the upgrade for a bad token; 429 over the per-user
 *   cap; 503 with Retry-After when the token cannot be checked (the issuer's JWKS out of reach and
 *   none cached: counted as JwksUnavailable, never taken for a bad token).
 * - `$disconnect`: forgets the connection.
 * - `$default`: the client's keepalive pings (`{"type":"ping","latest_bundle_seq":n}`). When the
 *   user's latest bundle is past the device's `n` (a notification that never arrived: the
 *   management API refused or timed out), the answer is a `changed` message, which the route's
 *   response sends back on the socket: the device learns of the commit within one ping interval.
 * Commits post `{"type":"changed","latest_bundle_seq":n}` to the user's connections
 * (functions/edge/ws-notifier.ts).
 */
import { PingMessage, SOURCE_ID_PATTERN, WS_SOURCE_PARAM, WS_TOKEN_PARAM, type ChangedMessage } from '../core/protocol/index.js';
import { SyncError } from '../core/errors.js';
import { connectionLatest, dropConnection, registerConnection, requireNotifyLayout } from '../core/sync/notify/connections.js';
import { errorAnswer } from './edge/http.js';
import { isStorableUserId } from './edge/request.js';
import { tokenVerifier, type TokenVerifier } from './edge/jwt.js';
import { runtimeFromEnv, type Runtime } from './edge/runtime.js';
import { consoleTelemetry } from './edge/telemetry.js';

/** The fields of API Gateway's WebSocket event this handler reads. */
export interface WsEvent {
  readonly requestContext: { readonly routeKey: string; readonly connectionId: string; readonly requestId?: string };
  readonly queryStringParameters?: Readonly<Record<string, string | undefined>> | null;
  readonly headers?: Readonly<Record<string, string | undefined>> | null;
  readonly body?: string | null;
}

export interface WsResult {
  readonly statusCode: number;
  readonly headers?: Record<string, string>;
  readonly body?: string;
}

/** A ping's answer: the user's latest bundle when the device is behind it, else nothing. */
async function answerPing(db: Parameters<typeof connectionLatest>[0], connectionId: string, body: string | null | undefined): Promise<WsResult> {
  let ping: PingMessage | undefined;
  try {
    const parsed = PingMessage.safeParse(JSON.parse(body ?? ''));
    if (parsed.success) ping = parsed.data;
  } catch {
    // Not JSON: a keepalive of another shape, nothing to answer.
  }
  if (!ping) return { statusCode: 200 };
  const latest = await connectionLatest(db, connectionId);
  if (latest === null || (ping.latest_bundle_seq !== undefined && latest <= ping.latest_bundle_seq)) return { statusCode: 200 };
  const message: ChangedMessage = { type: 'changed', latest_bundle_seq: latest };
  return { statusCode: 200, body: JSON.stringify(message) };
}

export function createWsHandler(getRuntime: () => Promise<Runtime> = runtimeFromEnv): (event: WsEvent, context?: object) => Promise<WsResult> {
  let verifier: TokenVerifier | null | undefined;
  return async (event, context) => {
    const started = Date.now();
    let runtime: Runtime | undefined;
    try {
      runtime = await getRuntime();
      runtime.telemetry.begin(context);
      const db = runtime.db.forRequest();
      const { routeKey, connectionId } = event.requestContext;
      if (routeKey === '$disconnect') {
        await dropConnection(db, connectionId);
        return { statusCode: 200 };
      }
      if (routeKey === '$default') return await answerPing(db, connectionId, event.body);
      if (routeKey !== '$connect') return { statusCode: 200 };
      const rt = runtime;
      verifier ??= tokenVerifier(rt.config.jwt, { limits: rt.config.limits, onUnavailable: () => rt.telemetry.count('JwksUnavailable') });
      if (!verifier) throw new SyncError('service_unavailable', 'no token verification is configured (SYNC_JWT_ISSUER, SYNC_JWKS_URL or SYNC_JWT_SECRET)');
      const query = event.queryStringParameters ?? {};
      const claims = await verifier(query[WS_TOKEN_PARAM] ?? '');
      const userId = claims?.[runtime.config.userIdClaim];
      if (!isStorableUserId(userId)) {
        throw new SyncError('authentication_failed', 'a valid token is required in the token query parameter');
      }
      const sourceId = query[WS_SOURCE_PARAM] ?? '';
      if (!SOURCE_ID_PATTERN.test(sourceId)) throw new SyncError('invalid_request', `${WS_SOURCE_PARAM} must be 1-128 characters of [A-Za-z0-9._:-]`);
      requireNotifyLayout((await runtime.catalog(db)).layoutVersion);
      await registerConnection(db, runtime.config.limits, { userId, sourceId }, connectionId, typeof claims?.exp === 'number' ? claims.exp : undefined);
      // The request's line (debug) and what it counted (a JWKS refresh that failed, served from cache).
      runtime.telemetry.finish({ route: routeKey, status: 200, roundTrips: db.roundTrips.count, durationMs: Date.now() - started, userId });
      return { statusCode: 200 };
    } catch (error) {
      const answer = errorAnswer(error, runtime?.config.limits.unavailableRetryAfterSeconds);
      const body = answer.body as { error?: string; reason?: string } | undefined;
      const telemetry = runtime?.telemetry ?? consoleTelemetry;
      if (answer.status === 503) telemetry.count('Unavailable', 1, body?.reason ?? 'database');
      telemetry.finish({ route: event.requestContext.routeKey, status: answer.status, error: body?.error, reason: body?.reason, roundTrips: 0, durationMs: Date.now() - started }, error);
      // A refused $connect answers with its status (a 503 is not a 401: the client retries the socket).
      return { statusCode: answer.status, ...(answer.headers ? { headers: answer.headers } : {}), body: JSON.stringify(answer.body) };
    }
  };
}

export const handler = createWsHandler();
