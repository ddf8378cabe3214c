/**
 * Builds a Lambda handler from a route table: parse the event, authenticate, call the route,
 * map the outcome. Routes stay thin: they validate input and call the core.
 */
import { SyncError } from '../../core/errors.js';
import { type Db } from '../../core/db/index.js';
import { type Actor, type RawJson, type SyncContext } from '../../core/sync/index.js';
import { LAMBDA_PAYLOAD_BYTES_MAX } from '../../core/limits.js';
import { NOTIFY_LAYOUT_VERSION } from '../../core/sync/notify/connections.js';
import { serializedBytesWithBody, utf8Bytes } from '../../core/protocol/wire-bytes.js';
import { errorAnswer, isLayoutDrift, toHttp, type EdgeAnswer, type HttpResult } from './http.js';
import { actorOf, readRequest, type EdgeRequest, type HttpApiEvent } from './request.js';
import { runtimeFromEnv, type Runtime } from './runtime.js';

export interface RouteContext {
  readonly runtime: Runtime;
  /** This request's database view; its counter is the round-trip figure of the answer. */
  readonly db: Db;
  /** Present on authenticated routes. */
  readonly actor: Actor;
  /** The core context; loads the catalog on the container's first request. */
  sync(): Promise<SyncContext>;
  /**
   * Serves one page of a page reader (pull, committed-bundle rows, snapshot chunks) within
   * max_response_bytes as Lambda counts the result (see `fitPage`).
   */
  page(read: (sync: SyncContext) => Promise<RawJson>): Promise<EdgeAnswer>;
  /** Aborts when the caller is gone (the local gateway's connection closed); never in Lambda. */
  readonly signal: AbortSignal | undefined;
  /**
   * Marks that this request committed a bundle of `userId`: once the route has answered, the
   * user's WebSocket connections are told (AWS); a long-running server's feed hears it anyway.
   */
  committed(userId: string): void;
}

export interface Route {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** A path template such as `/sync/push-sessions/{push_id}/chunks`. */
  readonly path: string;
  /** Every /sync/* route is authenticated; health and status are not. */
  readonly auth: boolean;
  run(request: EdgeRequest, ctx: RouteContext): Promise<EdgeAnswer>;
}

/**
 * What a caller may pass besides the event. Lambda passes its own context object here, which
 * has no `signal`; the local gateway passes one that aborts when the HTTP client goes away.
 */
export interface InvokeOptions {
  readonly signal?: AbortSignal;
}

export type LambdaHandler = (event: HttpApiEvent, options?: InvokeOptions) => Promise<HttpResult>;

/** A path segment's value; malformed percent-encoding (`%`, `%ZZ`, `%E0%A4%A`) is the client's. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new SyncError('invalid_request', 'a path parameter is not valid percent-encoded UTF-8');
  }
}

function matchPath(template: string, path: string): Record<string, string> | null {
  const want = template.split('/');
  const have = path.split('/');
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i] as string;
    const h = have[i] as string;
    if (w.startsWith('{') && w.endsWith('}')) {
      if (h === '') return null;
      params[w.slice(1, -1)] = decodeSegment(h);
    } else if (w !== h) return null;
  }
  return params;
}

/**
 * The route of a request. API Gateway names the matched route in `routeKey` (`POST
 * /sync/push-sessions/{push_id}/chunks`), whatever stage or custom-domain base path the request
 * came through; `rawPath` then carries that prefix (`/prod/sync/…`, `/api/v1/sync/…`), so routing
 * on it answered 404 behind a named stage or a base path mapping. The route is chosen by
 * `routeKey`, and its parameters are read from the last segments of the path (as many as the
 * template has), which are the same with or without a prefix. `$default` (the local gateway for a
 * path no route serves, or a catch-all integration) falls back to matching the whole path.
 */
function findRoute(routes: readonly Route[], routeKey: string | undefined, method: string, path: string): { route: Route; params: Record<string, string> } {
  const keyed = routeKey && routeKey !== '$default' ? routes.find((r) => `${r.method} ${r.path}` === routeKey) : undefined;
  if (keyed) {
    const want = keyed.path.split('/').length - 1;
    const have = path.split('/');
    const tail = ['', ...have.slice(Math.max(1, have.length - want))].join('/');
    const params = matchPath(keyed.path, tail);
    if (params) return { route: keyed, params };
  }
  let pathMatched = false;
  for (const route of routes) {
    const params = matchPath(route.path, path);
    if (!params) continue;
    pathMatched = true;
    if (route.method === method) return { route, params };
  }
  throw new SyncError('route_not_found', pathMatched ? `${method} is not supported on ${path}` : `no route for ${method} ${path}`);
}

/** Page readers asked again with a smaller budget before the page is served as it is. */
const PAGE_FIT_ATTEMPTS = 4;
/** Headroom below the response limit for the headers and the result object around the body. */
const RESULT_ENVELOPE_BYTES = 4096;

/**
 * Reads a page whose function result fits max_response_bytes as Lambda counts it. The page
 * readers budget the body they render; inside the result the body is a JSON string again, so each
 * `"` and `\` of it counts twice, and quote-heavy rows made 7.2 MB results of 4 MiB bodies, which
 * Lambda refuses (that user's sync was stuck). A page whose result is over the limit is read
 * again with the readers' budget scaled by how far it was over; pages are deterministic (frozen
 * ceilings, immutable bundles, frozen snapshots) and always carry at least one row or bundle, so
 * this converges. The fast path measures nothing: a body under half the limit cannot double past it.
 */
export async function fitPage(
  sync: SyncContext,
  read: (sync: SyncContext) => Promise<RawJson>,
  roundTrips: () => number,
): Promise<EdgeAnswer> {
  const limit = Math.min(sync.limits.maxResponseBytes, LAMBDA_PAYLOAD_BYTES_MAX);
  let ctx = sync;
  for (let attempt = 1; ; attempt++) {
    const body = await read(ctx);
    const answer: EdgeAnswer = { status: 200, body };
    if (utf8Bytes(body.rawJson) * 2 + RESULT_ENVELOPE_BYTES <= limit) return answer;
    const bytes = serializedBytesWithBody(toHttp(answer, roundTrips()));
    if (bytes + RESULT_ENVELOPE_BYTES <= limit || attempt >= PAGE_FIT_ATTEMPTS) return answer;
    const scaled = Math.floor((ctx.limits.maxResponseBytes * (limit - RESULT_ENVELOPE_BYTES)) / bytes * 0.95);
    ctx = { ...ctx, limits: { ...ctx.limits, maxResponseBytes: Math.max(1, scaled) } };
  }
}

/**
 * Tells a user's WebSocket connections about a commit. The commit stands whatever happens here:
 * a failed notification is logged, never turned into a failed answer.
 */
async function notifyCommitted(runtime: Runtime, db: Db, userId: string): Promise<void> {
  if (!runtime.notifier) return;
  try {
    if ((await runtime.catalog(db)).layoutVersion < NOTIFY_LAYOUT_VERSION) return;
    await runtime.notifier.committed(db, userId);
  } catch (error) {
    console.error('lockstep notification failed', error);
  }
}

const NO_ACTOR: Actor = Object.freeze({ userId: '', sourceId: '' });

export function createHandler(routes: readonly Route[], getRuntime: () => Promise<Runtime> = runtimeFromEnv): LambdaHandler {
  return async (event, options) => {
    let db: Db | undefined;
    let retryAfterSeconds: number | undefined;
    let runtime: Runtime | undefined;
    try {
      runtime = await getRuntime();
      retryAfterSeconds = runtime.config.limits.unavailableRetryAfterSeconds;
      db = runtime.db.forRequest();
      const base = readRequest(event, runtime.config.limits.maxRequestBytes);
      const { route, params } = findRoute(routes, event.routeKey, base.method, base.path);
      const request: EdgeRequest = { ...base, params };
      const actor = route.auth ? actorOf(request, runtime.config.userIdClaim) : NO_ACTOR;
      const requestDb = db;
      const rt = runtime;
      const ctx: RouteContext = {
        runtime: rt,
        db: requestDb,
        actor,
        // A (re)load of the catalog runs on this request's view, so its round trip is counted.
        sync: async () => ({ db: requestDb, limits: rt.config.limits, catalog: await rt.catalog(requestDb) }),
        page: async (read) => fitPage(await ctx.sync(), read, () => requestDb.roundTrips.count),
        signal: options?.signal instanceof AbortSignal ? options.signal : undefined,
        committed: (userId) => void committedUsers.add(userId),
      };
      const committedUsers = new Set<string>();
      const answer = await route.run(request, ctx);
      for (const userId of committedUsers) await notifyCommitted(rt, requestDb, userId);
      return toHttp(answer, requestDb.roundTrips.count);
    } catch (error) {
      // The catalog this container holds no longer matches the tables: read it again next time.
      if (isLayoutDrift(error) || (error instanceof SyncError && error.extra['reason'] === 'layout_drift')) runtime?.invalidateCatalog();
      return toHttp(errorAnswer(error, retryAfterSeconds), db?.roundTrips.count ?? 0);
    }
  };
}
