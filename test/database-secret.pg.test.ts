/**
 * Issue 17 item 4: the database credentials come from Secrets Manager at runtime. A stand-in for
 * the Secrets Manager API (it checks the SigV4 signature's shape and serves GetSecretValue) holds
 * the connection string of a real PostgreSQL role; the password is rotated in PostgreSQL and in
 * the secret while a runtime is warm. The first request after the rotation that needs a new
 * connection is refused by PostgreSQL (a typed 503, Retry-After) and logged as
 * `database_authentication_failed` (the template's alarm counts it); the next one reads the secret
 * again and works, with no redeploy and no restart.
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
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
import { until } from './support/until.js';

interface StandIn {
  readonly url: string;
  secret: string;
  reads: number;
  lastAuthorization: string;
  close(): Promise<void>;
}

async function secretsManagerStandIn(initial: string): Promise<StandIn> {
  const state = { secret: initial, reads: 0, lastAuthorization: '' };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      state.lastAuthorization = String(req.headers.authorization ?? '');
      const signed = /^AWS4-HMAC-SHA256 Credential=AKIDLOCKSTEPTEST\/\d{8}\/eu-west-1\/secretsmanager\/aws4_request, SignedHeaders=[^,]+, Signature=[0-9a-f]{64}$/.test(state.lastAuthorization);
      if (!signed || req.headers['x-amz-target'] !== 'secretsmanager.GetSecretValue') {
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' }).end(JSON.stringify({ __type: 'InvalidSignatureException', message: 'not signed' }));
        return;
      }
      if (JSON.parse(body).SecretId !== 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:lockstep-db') {
        res.writeHead(400).end(JSON.stringify({ __type: 'ResourceNotFoundException', message: 'no such secret' }));
        return;
      }
      state.reads++;
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' }).end(JSON.stringify({ SecretString: state.secret }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as StandIn;
}

describe('database credentials from Secrets Manager, rotated while warm', () => {
  let t: TestDb;
  let standIn: StandIn;
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
      DATABASE_SECRET_ID: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:lockstep-db',
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'AKIDLOCKSTEPTEST',
      AWS_SECRET_ACCESS_KEY: 'test-secret-key',
      AWS_SESSION_TOKEN: 'test-session-token',
      AWS_ENDPOINT_URL_SECRETS_MANAGER: standIn.url,
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
    expect(() => connectionStringOf('{"user": "x"}')).toThrow(/neither DATABASE_URL nor username, password and host/);
    expect(() => connectionStringOf('not json')).toThrow(/neither a postgres:\/\/ URL nor JSON/);
  });

  it('configuration needs DATABASE_URL or DATABASE_SECRET_ID, and says so', () => {
    expect(() => loadConfig({ SYNC_TABLES: 'app.lists:id' })).toThrow(/DATABASE_URL: required: .*DATABASE_SECRET_ID/);
  });
});
