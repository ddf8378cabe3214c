/**
 * A plain HTTP client for the benchmarks: signed bearer token, Sync-Source-ID, JSON. No retries:
 * a benchmark must see every failure. Every answer's `x-lockstep-round-trips` header is recorded
 * per route template, so the run reports round trips for each endpoint it touched.
 */
import { SignJWT } from 'jose';
import { functionRoutes, ROUND_TRIPS_HEADER } from '../../functions/index.js';

/** Every route of every function, as `METHOD /template`. */
export const ALL_ROUTES: readonly string[] = Object.values(functionRoutes).flatMap((routes) => routes.map((r) => `${r.method} ${r.path}`));

/** The route template a request path matches, e.g. `GET /sync/snapshot-sessions/{snapshot_id}`. */
export function routeOf(method: string, path: string): string {
  const have = path.split('?')[0]?.split('/') ?? [];
  for (const route of ALL_ROUTES) {
    const [m, template] = route.split(' ') as [string, string];
    if (m !== method) continue;
    const want = template.split('/');
    if (want.length === have.length && want.every((w, i) => (w.startsWith('{') ? have[i] !== '' : w === have[i]))) return route;
  }
  return `${method} ${path} (no route)`;
}

/** Round trips seen per route: every value, so the report can show the maximum. */
export class RoundTripLog {
  readonly byRoute = new Map<string, number[]>();

  record(route: string, roundTrips: number): void {
    const list = this.byRoute.get(route) ?? [];
    list.push(roundTrips);
    this.byRoute.set(route, list);
  }
}

export class BenchHttpError extends Error {
  override readonly name = 'BenchHttpError';
  constructor(
    readonly route: string,
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`${route} answered ${status}: ${JSON.stringify(body).slice(0, 400)}`);
  }
}

export interface Answer<T> {
  readonly status: number;
  readonly body: T;
  readonly roundTrips: number;
}

export class HttpClient {
  private token: Promise<string> | undefined;

  constructor(
    readonly baseUrl: string,
    readonly userId: string,
    readonly sourceId: string,
    private readonly secret: string,
    private readonly log: RoundTripLog,
    /** A fixed bearer token (the operator's) instead of the user's signed JWT. */
    private readonly bearer?: string,
  ) {}

  /** Sends a request; any status other than `expect` throws BenchHttpError. */
  async call<T = unknown>(method: string, path: string, body?: unknown, expect = 200): Promise<Answer<T>> {
    this.token ??= this.bearer !== undefined ? Promise.resolve(this.bearer) : new SignJWT({ sub: this.userId }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('2h').sign(new TextEncoder().encode(this.secret));
    const res = await fetch(this.baseUrl + path, {
      method,
      headers: {
        authorization: `Bearer ${await this.token}`,
        'sync-source-id': this.sourceId,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    const route = routeOf(method, path);
    const roundTrips = Number(res.headers.get(ROUND_TRIPS_HEADER) ?? NaN);
    if (Number.isFinite(roundTrips)) this.log.record(route, roundTrips);
    const parsed: unknown = text ? JSON.parse(text) : undefined;
    if (res.status !== expect) throw new BenchHttpError(route, res.status, parsed);
    return { status: res.status, body: parsed as T, roundTrips };
  }

  get<T = unknown>(path: string, expect = 200): Promise<Answer<T>> {
    return this.call<T>('GET', path, undefined, expect);
  }

  post<T = unknown>(path: string, body: unknown = {}, expect = 200): Promise<Answer<T>> {
    return this.call<T>('POST', path, body, expect);
  }

  del(path: string): Promise<Answer<undefined>> {
    return this.call<undefined>('DELETE', path, undefined, 204);
  }
}
