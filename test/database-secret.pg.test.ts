/**
 * Issue 17 item 4: the database credentials come from Secrets Manager at runtime. A stand-in for
 * the Secrets Manager API (it checks the SigV4 signature's shape and serves GetSecretValue) holds
 * the connection string of a real PostgreSQL role; the password is rotated in PostgreSQL and in
 * the secret while a runtime is warm. The first request after the rotation that needs a new
 * connection is refused by PostgreSQL (a typed 503, Retry-After) and logged as
 * `database_authentication_failed` (the template's alarm counts it); the next one reads the secret
 * again and works, with no redeploy and no restart.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../core/config.js';
import { connectionStringOf } from '../core/db/secret.js';
import { THIS_BUILD } from '../core/sync/index.js';
import { openDatabase } from '../functions/edge/database.js';
import { createHandler } from '../functions/edge/handler.js';
import { createRuntime, type Runtime } from '../functions/edge/runtime.js';
import { routes as metaRoutes } from '../functions/meta.js';
import { openAppDb, type TestDb } from './support/server-db.js';
import { APP_TABLES } from './support/schemas.js';
import { secretEnv, secretsManagerStandIn, type SecretsManagerStandIn } from './support/secrets-manager.js';
import { until } from './support/until.js';

describe('database credentials from Secrets Manager, rotated while warm', () => {
  let t: TestDb;
  let standIn: SecretsManagerStandIn;
  let runtime: Runtime;
  let roleUrl: (password: string) => string;

  beforeAll(async () => {
    t = await openAppDb();
    await t.exec(`CREATE ROLE lockstep_rotating LOGIN SUPERUSER PASSWORD 'first-password'`);
    roleUrl = (password: string) => {
      const url = new URL(t.url);
      url.username = 'lockstep_rotating';
      url.password = password;
      return url.toString();
    };
    standIn = await secretsManagerStandIn(JSON.stringify({ DATABASE_URL: roleUrl('first-password') }));
    const env = {
      ...secretEnv(standIn),
      SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(','),
      SYNC_DB_DRIVER: 'pg',
    };
    const config = loadConfig(env);
    expect(config.databaseUrl).toBe('');
    const { pool, secret } = await openDatabase(config, 2, env);
    runtime = createRuntime(config, pool, THIS_BUILD, { secret });
  });
  afterAll(async () => {
    await runtime?.db.pool.end();
    await standIn?.close();
    await t?.close();
  });

  const status = async () => {
    const handler = createHandler(metaRoutes, async () => runtime);
    return handler({
      version: '2.0', routeKey: 'GET /syncx/status', rawPath: '/syncx/status', rawQueryString: '', headers: {},
      requestContext: { http: { method: 'GET', path: '/syncx/status' } }, isBase64Encoded: false,
    } as any);
  };

  it('reads the secret once, signed, and serves', async () => {
    expect((await status()).statusCode).toBe(200);
    expect(standIn.reads).toBe(1);
    expect(standIn.lastAuthorization).toMatch(/^AWS4-HMAC-SHA256 /);
    expect((await status()).statusCode).toBe(200);
    expect(standIn.reads).toBe(1);
  });

  it('after a rotation: one typed 503 and an alarmable log line, then the new password from the secret', async () => {
    await t.exec(`ALTER ROLE lockstep_rotating PASSWORD 'second-password'`);
    standIn.secret = JSON.stringify({ DATABASE_URL: roleUrl('second-password') });
    // The warm connections stay logged in; a new one is what meets the new password.
    await t.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'lockstep_rotating'`);
    // Until the runtime's pool has dropped them (an event, not a pause: on a loaded machine the
    // next request could otherwise take a connection whose end was not yet read).
    const inner = () => (runtime.db.pool as unknown as { inner?: { pool: { totalCount?: number } } }).inner?.pool;
    await until('the pool dropped the terminated connections', () => inner()?.totalCount, (n) => n === 0);
    const logged = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    let refused;
    let lines: string[];
    try {
      refused = await status();
      lines = logged.mock.calls.map((c) => String(c[0]));
    } finally {
      logged.mockRestore();
    }
    expect(refused.statusCode).toBe(503);
    expect(refused.headers?.['retry-after']).toBe('1');
    expect(lines).toContainEqual(expect.stringContaining('"event":"database_authentication_failed","code":"28P01"'));
    expect((await status()).statusCode).toBe(200);
    expect(standIn.reads).toBe(2);
  });

  it('takes the secret in each shape it may have', () => {
    expect(connectionStringOf('postgres://u:p@h:5432/d')).toBe('postgres://u:p@h:5432/d');
    expect(connectionStringOf(JSON.stringify({ DATABASE_URL: 'postgres://a:b@c/d' }))).toBe('postgres://a:b@c/d');
    // What RDS's managed rotation keeps: the password may hold any character.
    const rds = connectionStringOf(JSON.stringify({ engine: 'postgres', username: 'app', password: 'p@ss/w:rd?', host: 'db.example', port: 5432, dbname: 'main' }));
    expect(new URL(rds).hostname).toBe('db.example');
    expect(decodeURIComponent(new URL(rds).password)).toBe('p@ss/w:rd?');
    expect(new URL(rds).pathname).toBe('/main');
    expect(() => connectionStringOf('{"user": "x"}')).toThrow(/neither DATABASE_URL nor username and password with a host/);
    expect(() => connectionStringOf('not json')).toThrow(/neither a postgres:\/\/ URL nor JSON/);
  });

  it('configuration needs DATABASE_URL or DATABASE_SECRET_ID, and says so', () => {
    expect(() => loadConfig({ SYNC_TABLES: 'app.lists:id' })).toThrow(/DATABASE_URL: required: .*DATABASE_SECRET_ID/);
  });
});

/**
 * Issue 25 item 5 and issue 26 item 4: Secrets Manager refuses or throttles GetSecretValue
 * (AccessDenied, a KMS refusal, ThrottlingException, or no route to it) while a container holds
 * credentials that still work. Before, the refresh failure made every request a 500 with no
 * Retry-After and a plain-text line on stderr.
 */
describe('Secrets Manager refusing or throttling the read', () => {
  let t: TestDb;
  let standIn: SecretsManagerStandIn;
  const runtimes: Runtime[] = [];

  beforeAll(async () => {
    t = await openAppDb();
    standIn = await secretsManagerStandIn(JSON.stringify({ DATABASE_URL: t.url }));
  });
  afterAll(async () => {
    for (const r of runtimes) await r.db.pool.end().catch(() => undefined);
    await standIn?.close();
    await t?.close();
  });

  /** A handler whose runtime starts as runtimeFromEnv does: configuration, then openDatabase. */
  function handlerFor(env: Record<string, string>) {
    const full = { ...secretEnv(standIn), SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(','), SYNC_DB_DRIVER: 'pg', ...env };
    let started: Promise<Runtime> | undefined;
    const handler = createHandler(metaRoutes, () => (started ??= (async () => {
      const config = loadConfig(full);
      const { pool, secret } = await openDatabase(config, 2, full);
      const runtime = createRuntime(config, pool, THIS_BUILD, { secret });
      runtimes.push(runtime);
      return runtime;
    })().catch((error: unknown) => {
      started = undefined;
      throw error;
    })));
    return () => handler({
      version: '2.0', routeKey: 'GET /syncx/status', rawPath: '/syncx/status', rawQueryString: '', headers: {},
      requestContext: { http: { method: 'GET', path: '/syncx/status' } }, isBase64Encoded: false,
    } as any);
  }

  /** Runs `fn` with console output captured: the JSON lines the runtime writes. */
  async function logged<T>(fn: () => Promise<T>): Promise<{ result: T; lines: Record<string, unknown>[] }> {
    const calls: unknown[] = [];
    const spies = (['error', 'warn', 'info', 'log'] as const).map((level) => vi.spyOn(console, level).mockImplementation((...args: unknown[]) => void calls.push(args[0])));
    try {
      const result = await fn();
      return { result, lines: calls.map((c) => JSON.parse(String(c)) as Record<string, unknown>) };
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  }

  for (const refusal of [{ status: 400, type: 'ThrottlingException' }, { status: 400, type: 'AccessDeniedException' }, { status: 400, type: 'KMSAccessDeniedException' }]) {
    it(`a refresh refused with ${refusal.type} keeps serving on the cached secret, and says so in a JSON line`, async () => {
      standIn.fail = undefined;
      // A secret trusted for one second: the next request after it is due for a refresh.
      const status = handlerFor({ SYNC_LIMIT_SECRET_REFRESH_SECONDS: '1' });
      expect((await status()).statusCode).toBe(200);
      await new Promise((r) => setTimeout(r, 1100));
      standIn.fail = refusal;
      const attempts = standIn.attempts;
      const { result, lines } = await logged(status);
      expect(result.statusCode, result.body).toBe(200);
      expect(standIn.attempts).toBeGreaterThan(attempts);
      expect(lines).toContainEqual(expect.objectContaining({ level: 'warn', event: 'database_secret_read_failed', type: refusal.type, serving_cached: true, reason: 'expired' }));
      // The next requests do not call the service again before the retry interval.
      const after = standIn.attempts;
      for (let i = 0; i < 3; i++) expect((await status()).statusCode).toBe(200);
      expect(standIn.attempts).toBe(after);
    });
  }

  it('without a cached secret: 503 with Retry-After and reason database_secret_unavailable, and no call per request', async () => {
    standIn.fail = { status: 400, type: 'AccessDeniedException' };
    const status = handlerFor({});
    const { result, lines } = await logged(status);
    expect(result.statusCode, result.body).toBe(503);
    expect(Number(result.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(result.body as string)).toMatchObject({ error: 'service_unavailable', reason: 'database_secret_unavailable' });
    expect(lines).toContainEqual(expect.objectContaining({ level: 'error', event: 'database_secret_read_failed', type: 'AccessDeniedException', serving_cached: false }));
    // Every line is JSON (a metric filter reads them); none is plain text.
    expect(lines.find((l) => l['event'] === 'request')).toMatchObject({ level: 'warn', status: 503, reason: 'database_secret_unavailable' });
    const attempts = standIn.attempts;
    expect((await status()).statusCode).toBe(503);
    expect(standIn.attempts).toBe(attempts);
    standIn.fail = undefined;
  });

  it('an RDS-managed secret ({username, password} only) connects to DATABASE_HOST, with TLS required', async () => {
    const url = new URL(t.url);
    // What RDS keeps for a password it manages: no host.
    const rds = JSON.stringify({ username: url.username, password: decodeURIComponent(url.password) });
    const built = new URL(connectionStringOf(rds, { host: `127.0.0.1:${url.port}`, dbname: url.pathname.slice(1) }));
    expect([built.hostname, built.port, built.pathname, built.searchParams.get('sslmode')]).toEqual(['127.0.0.1', url.port, url.pathname, 'verify-full']);
    expect(() => connectionStringOf(rds)).toThrow(/host \(in the secret, or DATABASE_HOST\)/);
    // The test server speaks no TLS: the connection is refused rather than made in the clear
    // (test/built-bundles.pg.test.ts connects through a TLS endpoint).
    standIn.secret = rds;
    const status = handlerFor({ DATABASE_HOST: `127.0.0.1:${url.port}`, DATABASE_NAME: url.pathname.slice(1) });
    const { result } = await logged(status);
    expect(result.statusCode).toBe(503);
    expect(standIn.reads).toBeGreaterThan(0);
  });
});
