/**
 * Builds a Lambda handler from a route table: parse the event, authenticate, call the route,
 * map the outcome. Routes stay thin: they validate input and call the core.
 */
import { SyncError } from '../../core/errors.js';
import { PROTOCOL_HEADER } from '../../core/protocol/index.js';
import { servedProtocol } from '../../core/sync/wire-form.js';
import { type Catalog } from '../../core/sync/catalog/catalog.js';
import { defaultLimits, LAMBDA_PAYLOAD_BYTES_MAX, type Limits } from '../../core/limits.js';
import { ANONYMOUS_OWNER, type Db } from '../../core/db/index.js';
import { flushPendingCounters, type Actor, type SyncContext } from '../../core/sync/index.js';
import { pageBudgetBytes } from '../../core/sync/context.js';
import { fitBody } from './answer-budget.js';
import { NOTIFY_LAYOUT_VERSION } from '../../core/sync/notify/connections.js';
import { errorAnswer, isLayoutDrift, toHttp, type EdgeAnswer, type HttpResult } from './http.js';
import { notifiedPage } from './notified-page.js';
import { actorOf, readRequest, requireOperator, type EdgeRequest, type HttpApiEvent } from './request.js';
import { runtimeFromEnv, type Runtime } from './runtime.js';
import { consoleTelemetry, type MetricName, type Telemetry } from './telemetry.js';

export interface RouteContext {
  readonly runtime: Runtime;
  /** This request's database view; its counter is the round-trip figure of the answer. */
  readonly db: Db;
  /** Present on authenticated routes. */
  readonly actor: Actor;
  /** The core context; loads the catalog on the container's first request. */
  sync(): Promise<SyncContext>;
  /** Aborts when the caller is gone (the local gateway's connection closed); never in Lambda. */
  readonly signal: AbortSignal | undefined;
  /**
   * When this request must have stopped waiting on the database (epoch ms): request_timeout_ms
   * from its start, in Lambda never later than the function's remaining time less
   * function_reserve_ms. A route that waits by choice (watch) ends its wait before it.
   */
  readonly deadline: number;
  /**
   * Marks that this request committed bundle `bundleSeq` of `userId`: once the route has answered,
   * the user's WebSocket connections are told (AWS); a long-running server's feed tells its own at
   * once (before this answer leaves), and hears it again from PostgreSQL.
   */
  committed(userId: string, bundleSeq: number): void;
  /** Counts a metric of this request (published when it finishes; Lambda only). */
  count(metric: MetricName, value?: number): void;
}

export interface Route {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** A path template such as `/sync/push-sessions/{push_id}/chunks`. */
  readonly path: string;
  /**
   * Every /sync/* route is authenticated by the user's token; health and status are not;
   * `'operator'` routes (/syncx/operator/*) need IAM-signed operator credentials.
   */
  readonly auth: boolean | 'operator';
  run(request: EdgeRequest, ctx: RouteContext): Promise<EdgeAnswer>;
}

/**
 * What the handlers use of Lambda's context object (absent locally), and what the local gateway
 * passes instead: a signal that aborts when the HTTP client goes away (Lambda's has none).
 */
export interface LambdaContext {
  getRemainingTimeInMillis?: () => number;
  readonly signal?: AbortSignal;
}

export type LambdaHandler = (event: HttpApiEvent, context?: LambdaContext) => Promise<HttpResult>;

/**
 * When this request must have stopped waiting on the database: `request_timeout_ms` from now,
 * and in Lambda never later than the function's own timeout less `function_reserve_ms`, so the
 * typed 503 goes out before Lambda kills the function.
 */
function requestDeadline(limits: Limits, context: LambdaContext | undefined): number {
  const now = Date.now();
  const remaining = context?.getRemainingTimeInMillis?.();
  const budget = remaining === undefined ? limits.requestTimeoutMs : Math.min(limits.requestTimeoutMs, remaining - limits.functionReserveMs);
  return now + budget;
}

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
    // The connections could not even be read (the notifier reports failed posts itself).
    runtime.telemetry.count('NotificationFailures');
    runtime.telemetry.log('warn', 'notification_failed', { user_id: userId, message: (error as Error).message });
  }
}

/** What an answer tells the operators: its error code, a 503's reason, and the metrics of a failure. */
function finishRequest(telemetry: Telemetry, started: number, route: string, answer: EdgeAnswer, roundTrips: number, userId: string, error?: unknown): void {
  const body = (answer.body ?? {}) as { error?: unknown; reason?: unknown };
  const code = typeof body.error === 'string' ? body.error : undefined;
  let reason: string | undefined;
  let cause: string | undefined;
  if (answer.status === 503) {
    reason = typeof body.reason === 'string' ? body.reason : code === 'service_unavailable' ? 'database' : code;
    // A SyncError's code is already the answer's; the driver's or the database's is the news.
    const errorCode = error instanceof SyncError ? undefined : (error as { code?: unknown } | null | undefined)?.code;
    cause = typeof errorCode === 'string' ? errorCode : undefined;
    telemetry.count('Unavailable', 1, reason);
    if (code === 'commit_outcome_unknown') telemetry.count('CommitOutcomeUnknown');
  } else if (answer.status >= 500) telemetry.count('InternalErrors');
  telemetry.finish({ route, status: answer.status, error: code, reason, cause, roundTrips, durationMs: Date.now() - started, userId: userId || undefined }, error);
}

const NO_ACTOR: Actor = Object.freeze({ userId: '', sourceId: '' });

/**
 * The answer within the byte budget of every answer (answer-budget.ts): the same budget, in the
 * same escaped bytes, as the pages PostgreSQL renders.
 */
function budgeted(answer: EdgeAnswer, limits: Limits): EdgeAnswer {
  const body = fitBody(answer.body, pageBudgetBytes(limits), LAMBDA_PAYLOAD_BYTES_MAX - limits.responseEnvelopeBytes);
  return body === answer.body ? answer : { ...answer, body };
}

export function createHandler(routes: readonly Route[], getRuntime: () => Promise<Runtime> = runtimeFromEnv): LambdaHandler {
  return async (event, context) => {
    const started = Date.now();
    let db: Db | undefined;
    let retryAfterSeconds: number | undefined;
    let runtime: Runtime | undefined;
    let routeName = 'unrouted';
    let actor = NO_ACTOR;
    try {
      runtime = await getRuntime();
      runtime.telemetry.begin(context);
      const { limits } = runtime.config;
      retryAfterSeconds = limits.unavailableRetryAfterSeconds;
      const deadline = requestDeadline(limits, context);
      db = runtime.db.forRequest({ deadline });
      const base = readRequest(event, limits.maxRequestBytes);
      const { route, params } = findRoute(routes, event.routeKey, base.method, base.path);
      routeName = `${route.method} ${route.path}`;
      const request: EdgeRequest = { ...base, params };
      if (route.auth === 'operator') requireOperator(request);
      if (route.auth === true) actor = actorOf(request, runtime.config.userIdClaim);
      // An authenticated request waits on the database within its user's share of the pool; the
      // unauthenticated routes (status, health) share a place of their own.
      if (route.auth === true) db = runtime.db.forRequest({ owner: actor.userId, deadline });
      else if (route.auth !== 'operator') db = runtime.db.forRequest({ owner: ANONYMOUS_OWNER, deadline });
      const requestDb = db;
      const rt = runtime;
      const speaks = actor.protocol ?? 1;
      /**
       * The catalog, checked to serve the actor's protocol. A container that has not seen the
       * layout bootstrap just upgraded reads it again once before refusing a protocol it lacks.
       */
      const catalog = async (): Promise<Catalog> => {
        let current = await rt.catalog(requestDb);
        if (servedProtocol(current.layoutVersion) >= speaks) return current;
        rt.invalidateCatalog();
        current = await rt.catalog(requestDb);
        if (servedProtocol(current.layoutVersion) >= speaks) return current;
        throw new SyncError('invalid_request',
          `this server serves protocol ${servedProtocol(current.layoutVersion)} until bootstrap upgrades its layout; send Sync-Protocol-Version ${servedProtocol(current.layoutVersion)} or none`);
      };
      const ctx: RouteContext = {
        runtime: rt,
        db: requestDb,
        actor,
        // A (re)load of the catalog runs on this request's view, so its round trip is counted.
        sync: async () => ({ db: requestDb, limits: rt.config.limits, catalog: await catalog(), pending: rt.pending }),
        signal: context?.signal instanceof AbortSignal ? context.signal : undefined,
        deadline,
        committed: (userId, bundleSeq) => {
          committedUsers.add(userId);
          // The rows go with it to the sockets that can take them (read only if one asks), except
          // the pushing device's own: it has them.
          rt.feed?.announce(userId, bundleSeq, notifiedPage(rt, actor, bundleSeq), actor.sourceId);
        },
        count: (metric, value) => rt.telemetry.count(metric, value),
      };
      const committedUsers = new Set<string>();
      const answer = budgeted(await route.run(request, ctx), limits);
      for (const userId of committedUsers) await notifyCommitted(rt, requestDb, userId);
      // The database answered this request: record what an outage kept from it (rarely anything).
      if (answer.status < 500) await flushPendingCounters(requestDb, rt.pending);
      finishRequest(rt.telemetry, started, routeName, answer, requestDb.roundTrips.count, actor.userId);
      // Every /sync/* answer names the protocol its rows are in (docs/protocol.md §9).
      const answered = route.auth === true ? { ...answer, headers: { ...answer.headers, [PROTOCOL_HEADER]: String(speaks) } } : answer;
      return await toHttp(answered, requestDb.roundTrips.count, request.headers['accept-encoding']);
    } catch (error) {
      // The catalog this container holds no longer matches the tables: read it again next time.
      if (isLayoutDrift(error) || (error instanceof SyncError && error.extra['reason'] === 'layout_drift')) runtime?.invalidateCatalog();
      runtime?.noteError(error);
      const answer = budgeted(errorAnswer(error, retryAfterSeconds), runtime?.config.limits ?? defaultLimits);
      const roundTrips = db?.roundTrips.count ?? 0;
      finishRequest(runtime?.telemetry ?? consoleTelemetry, started, routeName, answer, roundTrips, actor.userId, error);
      return await toHttp(answer, roundTrips);
    }
  };
}
