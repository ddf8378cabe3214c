/**
 * A real server for HTTP tests: fresh database → app schema → bootstrap → the local gateway,
 * plus a small client that signs tokens and reads the round-trip header.
 */
import { SignJWT } from 'jose';
import { loadConfig, type RegisteredTableDecl } from '../../core/config.js';
import { bootstrap } from '../../core/bootstrap/bootstrap.js';
import { createRuntime, ROUND_TRIPS_HEADER, type Runtime, type HttpApiEvent } from '../../functions/index.js';
import { startGateway, type Gateway, type GatewayAuth } from '../../dev/gateway.js';
import { openTestDb, type TestDb } from './server-db.js';
import { type BuildRange } from '../../core/sync/index.js';
import { startCommitFeed } from '../../core/sync/notify/commit-feed.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './schemas.js';

export const TEST_JWT_SECRET = 'lockstep-test-secret-0123456789abcdef';

export interface TestServer {
  readonly url: string;
  readonly t: TestDb;
  readonly runtime: Runtime;
  readonly gateway: Gateway;
  client(userId: string, sourceId?: string): ApiClient;
  close(): Promise<void>;
}

export interface ApiAnswer<T = any> {
  readonly status: number;
  readonly body: T;
  readonly roundTrips: number;
  readonly headers: Headers;
}

export interface ApiClient {
  readonly userId: string;
  sourceId: string;
  request<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiAnswer<T>>;
  get<T = any>(path: string): Promise<ApiAnswer<T>>;
  post<T = any>(path: string, body?: unknown): Promise<ApiAnswer<T>>;
  del<T = any>(path: string): Promise<ApiAnswer<T>>;
}

export async function signToken(userId: string, options: { expiresIn?: string; secret?: string } = {}): Promise<string> {
  return new SignJWT({ sub: userId })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? '1h')
    .sign(new TextEncoder().encode(options.secret ?? TEST_JWT_SECRET));
}

export function apiClient(url: string, userId: string, sourceId = `src-${userId}`): ApiClient {
  let token: Promise<string> | undefined;
  const client: ApiClient = {
    userId,
    sourceId,
    async request(method, path, body, headers = {}) {
      token ??= signToken(userId);
      const res = await fetch(url + path, {
        method,
        headers: {
          authorization: `Bearer ${await token}`,
          'sync-source-id': client.sourceId,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      let parsed: unknown = undefined;
      if (text) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = text;
        }
      }
      return { status: res.status, body: parsed as any, roundTrips: Number(res.headers.get(ROUND_TRIPS_HEADER) ?? -1), headers: res.headers };
    },
    get: (path) => client.request('GET', path),
    post: (path, body) => client.request('POST', path, body ?? {}),
    del: (path) => client.request('DELETE', path),
  };
  return client;
}

export interface TestServerOptions {
  readonly tables?: readonly RegisteredTableDecl[];
  readonly schemaSql?: string;
  readonly env?: Record<string, string>;
  readonly intercept?: (event: HttpApiEvent, next: () => Promise<unknown>) => Promise<unknown>;
  /** Serves these files for non-API paths (the built demo for browser tests). */
  readonly staticDir?: string;
  /** Enables POST /dev/token (signed with TEST_JWT_SECRET). */
  readonly devTokens?: boolean;
  /** Lambda's invoke limit as the gateway enforces it (default 6 MB). */
  readonly invokeLimitBytes?: number;
  /** `false`: no commit feed, as in Lambda (long polls poll, /sync/ws is refused). */
  readonly feed?: boolean;
  /** Runs maintenance on the gateway's timer, as `npm start` does (off by default in tests). */
  readonly maintenance?: boolean;
  /** Enables the operator routes with this bearer token. */
  readonly operatorToken?: string;
  /** How the gateway verifies tokens; HS256 with TEST_JWT_SECRET when absent. */
  readonly auth?: GatewayAuth;
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  if (options.schemaSql === undefined && options.tables === undefined) return serveTestDb(await openTestDb({ template: true }), options);
  const t = await openTestDb({ schemaSql: options.schemaSql ?? APP_SCHEMA_SQL });
  await bootstrap(t.db, { tables: options.tables ?? APP_TABLES });
  return serveTestDb(t, options);
}

/**
 * The local gateway over a database the caller prepared (bootstrapped or not). `build` stands in
 * for another build's layout range (rolling-deploy tests); closing the server closes `t`.
 */
export async function serveTestDb(t: TestDb, options: TestServerOptions & { readonly build?: BuildRange } = {}): Promise<TestServer> {
  const tables = options.tables ?? APP_TABLES;
  const config = loadConfig({
    DATABASE_URL: t.url,
    SYNC_TABLES: tables.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(','),
    SYNC_APP_NAME: 'lockstep-test',
    ...options.env,
  });
  // The local server's one LISTEN connection, on the direct URL (also under pgbouncer17 and neon17,
  // whose request pools go through the pooler): long polls and /sync/ws wait on it.
  const feed = options.feed === false ? undefined : await startCommitFeed(t.url);
  const runtime = createRuntime(config, t.db.pool, options.build, { feed });
  const gateway = await startGateway({
    runtime,
    auth: options.auth ?? { secret: TEST_JWT_SECRET },
    ...(options.intercept ? { intercept: options.intercept } : {}),
    ...(options.staticDir ? { staticDir: options.staticDir } : {}),
    ...(options.devTokens ? { devTokens: true } : {}),
    ...(options.invokeLimitBytes ? { invokeLimitBytes: options.invokeLimitBytes } : {}),
    ...(options.maintenance ? { maintenance: true } : {}),
    ...(options.operatorToken ? { operatorToken: options.operatorToken } : {}),
  });
  return {
    url: gateway.url,
    t,
    runtime,
    gateway,
    client: (userId, sourceId) => apiClient(gateway.url, userId, sourceId),
    close: async () => {
      await gateway.close();
      await feed?.close();
      await t.close();
    },
  };
}
