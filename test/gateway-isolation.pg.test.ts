/**
 * Issue 26 items 9–13, through the local gateway over real PostgreSQL:
 * - 9: upgrade requests with a valid token but no Sec-WebSocket-Key (which `ws` refuses) hold no
 *   place in the user's socket count: after 32 of them a real socket still opens;
 * - 10: an open socket is closed at its token's `exp` (1008 "token expired");
 * - 11: `/sync/ws` refuses the user ids the HTTP routes refuse (U+0000, 300 characters, a lone
 *   surrogate), with the same check;
 * - 12: the operator route with user id `a%00b` is a 400, not a 500;
 * - 13: a serving role without rights on the `sync` schema gets a typed 503 with reason
 *   `insufficient_privilege` on request routes and on health, not a 500 and not
 *   `database_unreachable`.
 * No answer time is asserted; the socket test waits for the close event itself.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { loadConfig } from '../core/config.js';
import { createPool } from '../core/db/index.js';
import { startGateway } from '../dev/gateway.js';
import { createRuntime } from '../functions/index.js';
import { APP_TABLES } from './support/schemas.js';
import { apiClient, signToken, startTestServer, TEST_JWT_SECRET, type TestServer } from './support/server.js';
import { initEmpty } from './support/write-helpers.js';

const OPERATOR_TOKEN = 'operator-token-0123456789abcdef0123456789';

function wsUrl(base: string, token: string, source = 'dev-1'): string {
  const url = new URL('/sync/ws', base.replace('http', 'ws'));
  url.searchParams.set('token', token);
  url.searchParams.set('source_id', source);
  return url.toString();
}

/** Opens a socket: resolves it once open, rejects with the refusal's status. */
function open(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode })));
    ws.once('error', reject);
  });
}

/** An upgrade request without Sec-WebSocket-Key: the status line it gets back. */
function keylessUpgrade(base: string, token: string): Promise<number> {
  const url = new URL(wsUrl(base, token));
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname + url.search, headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13' } });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the gateway: sockets and user ids', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ operatorToken: OPERATOR_TOKEN });
    await initEmpty(s.client('sam'));
  });
  afterAll(async () => {
    await s?.close();
  });

  it('item 9: 32 upgrades without Sec-WebSocket-Key hold no place; a real socket still opens', async () => {
    const token = await signToken('sam');
    for (let i = 0; i < 32; i++) expect(await keylessUpgrade(s.url, token)).toBe(400);
    const ws = await open(wsUrl(s.url, token));
    ws.close();
  });

  it('item 10: a socket is closed at its token\'s exp', async () => {
    const token = await signToken('sam', { expiresIn: '2s' });
    const ws = await open(wsUrl(s.url, token));
    const closed = await new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
    expect(closed).toEqual({ code: 1008, reason: 'token expired' });
  });

  it('item 11: /sync/ws refuses the user ids the HTTP routes refuse, and accepts the ones they accept', async () => {
    for (const sub of ['a\u0000b', 'x'.repeat(300), 'lone \ud800 surrogate']) {
      const token = await signToken(sub);
      const http = await fetch(`${s.url}/sync/pull?after_bundle_seq=0`, { headers: { authorization: `Bearer ${token}`, 'sync-source-id': 'dev-1' } });
      expect(http.status, JSON.stringify(sub)).toBe(401);
      const error = await open(wsUrl(s.url, token)).then((ws) => ws.close(), (e: { status?: number }) => e);
      expect((error as { status?: number }).status, JSON.stringify(sub)).toBe(401);
    }
    // 256 characters is a user id both accept.
    const long = 'y'.repeat(256);
    await initEmpty(apiClient(s.url, long, 'dev-1'));
    const ws = await open(wsUrl(s.url, await signToken(long)));
    ws.close();
  });

  it('item 12: the operator route with user id a%00b is a 400 invalid_request', async () => {
    const answer = await fetch(`${s.url}/syncx/operator/users/a%00b`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
    expect(answer.status).toBe(400);
    expect((await answer.json()).error).toBe('invalid_request');
  });

  it('item 13: a serving role without rights on the sync schema: 503 insufficient_privilege on requests and health', async () => {
    const role = `lockstep_norights_${process.pid}`;
    await s.t.exec(`DROP ROLE IF EXISTS ${role}; CREATE ROLE ${role} LOGIN PASSWORD 'none'`);
    const url = new URL(s.t.url);
    url.username = role;
    url.password = 'none';
    const pool = await createPool({ connectionString: url.toString(), max: 2, driver: 'pg' });
    const runtime = createRuntime(loadConfig({ DATABASE_URL: url.toString(), SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(',') }), pool);
    const gateway = await startGateway({ runtime, auth: { secret: TEST_JWT_SECRET } });
    try {
      const health = await fetch(`${gateway.url}/syncx/health`);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({ status: 'unhealthy', reason: 'insufficient_privilege' });
      const pulled = await apiClient(gateway.url, 'sam').get('/sync/pull?after_bundle_seq=0');
      expect(pulled.status, JSON.stringify(pulled.body)).toBe(503);
      expect(pulled.body).toMatchObject({ error: 'service_unavailable', reason: 'insufficient_privilege' });
    } finally {
      await gateway.close();
      await pool.end();
      await s.t.exec(`DROP ROLE IF EXISTS ${role}`);
    }
  });
});
