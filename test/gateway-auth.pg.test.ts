/**
 * The local gateway authenticates like API Gateway's JWT authorizer would (issue 2), and holds
 * up against hostile clients (issue 15 item 9): it checks the token before it reads a byte of the
 * body, checks issuer, audience and expiry, answers a malformed path or an oversized header with
 * a typed 4xx.
 */
import { createServer, type Server } from 'node:http';
import { connect as netConnect } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type JWK } from 'jose';
import { startGateway } from '../dev/gateway.js';
import { startTestServer, signToken, TEST_JWT_SECRET, type TestServer } from './support/server.js';
import { HANG_MS } from './support/until.js';
import { scratchDir } from './support/scratch.js';

/** Sends raw bytes and resolves with what came back once the server answered or closed. */
function rawExchange(url: string, head: string, body: Buffer | undefined, options: { finish?: boolean; waitMs?: number } = {}): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = netConnect(Number(port), hostname);
    let reply = '';
    const done = () => {
      socket.destroy();
      resolve(reply);
    };
    socket.on('data', (d) => {
      reply += d.toString('latin1');
      // The whole answer is there once its body is (content-length).
      const length = /content-length: (\d+)/i.exec(reply)?.[1];
      const at = reply.indexOf('\r\n\r\n');
      if (length !== undefined && at >= 0 && Buffer.byteLength(reply.slice(at + 4), 'latin1') >= Number(length)) done();
      else if (at >= 0 && /transfer-encoding: chunked/i.test(reply.slice(0, at)) && reply.endsWith('\r\n0\r\n\r\n')) done();
    });
    socket.on('close', done);
    socket.on('error', done);
    // Idle for minutes means no answer is coming (a hang), not that the machine is busy.
    socket.setTimeout(options.waitMs ?? HANG_MS, done);
    socket.write(head);
    if (body) socket.write(body);
    if (options.finish) socket.end();
  });
}

describe('gateway authentication', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  async function connectWith(headers: Record<string, string>): Promise<{ status: number; body: any }> {
    const res = await fetch(`${s.url}/sync/connect`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ has_local_pending_rows: false }),
    });
    return { status: res.status, body: await res.json() };
  }

  it('accepts a valid HS256 token with a source id', async () => {
    const answer = await connectWith({ authorization: `Bearer ${await signToken('u1')}`, 'sync-source-id': 'dev-1' });
    expect(answer.status).toBe(200);
    expect(answer.body.resolution).toBe('initialize_empty');
  });

  it.each([
    ['missing', async () => undefined],
    ['expired', async () => signToken('u1', { expiresIn: '-1m' })],
    ['wrongly signed', async () => signToken('u1', { secret: 'another-secret-of-the-same-length-xxxxx' })],
    ['alg none', async () => new UnsecuredJWT({ sub: 'u1' }).setIssuedAt().setExpirationTime('1h').encode()],
    ['HS512 instead of HS256', async () => new SignJWT({ sub: 'u1' }).setProtectedHeader({ alg: 'HS512' }).setExpirationTime('1h').sign(new TextEncoder().encode(TEST_JWT_SECRET))],
    ['without a sub claim', async () => new SignJWT({ name: 'x' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('1h').sign(new TextEncoder().encode(TEST_JWT_SECRET))],
    ['garbage', async () => 'not-a-jwt'],
  ])('rejects a %s token with 401 authentication_failed', async (_name, makeToken) => {
    const token = await makeToken();
    const answer = await connectWith({ 'sync-source-id': 'dev-1', ...(token ? { authorization: `Bearer ${token}` } : {}) });
    expect(answer.status).toBe(401);
    expect(answer.body.error).toBe('authentication_failed');
    expect(typeof answer.body.message).toBe('string');
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['too long', 'x'.repeat(129)],
    ['with a space', 'dev 1'],
    ['with a slash', 'dev/1'],
  ])('rejects a %s Sync-Source-ID with 400 invalid_request', async (_name, source) => {
    const headers: Record<string, string> = { authorization: `Bearer ${await signToken('u1')}` };
    if (source !== undefined) headers['sync-source-id'] = source;
    const answer = await connectWith(headers);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('invalid_request');
  });

  it('serves health and status without a token', async () => {
    expect((await fetch(`${s.url}/syncx/health`)).status).toBe(200);
    expect((await fetch(`${s.url}/syncx/status`)).status).toBe(200);
  });

  it('a token without exp is refused (HS256)', async () => {
    const noExp = await new SignJWT({ sub: 'u1' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().sign(new TextEncoder().encode(TEST_JWT_SECRET));
    const answer = await connectWith({ authorization: `Bearer ${noExp}`, 'sync-source-id': 'dev-1' });
    expect(answer.status).toBe(401);
    expect(answer.body.error).toBe('authentication_failed');
  });

  it('checks the token before reading the body: an unauthenticated upload is answered 401 while still arriving, and not kept', async () => {
    const size = 3 * 1024 * 1024;
    const head = `POST /sync/push-sessions/00000000-0000-4000-8000-000000000000/chunks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\nSync-Source-ID: dev-1\r\n\r\n`;
    // A tenth of the body, then nothing more (the socket stays open): an answer that waited for
    // the rest would never come, so any answer at all was given before the body arrived.
    const reply = await rawExchange(s.url, head, Buffer.alloc(size / 10, 0x20));
    expect(reply).toMatch(/^HTTP\/1\.1 401 /);
    expect(reply).toContain('"error":"authentication_failed"');
    // With a valid token the body is read, and one over max_request_bytes (4 MiB) answers 413.
    const over = 5 * 1024 * 1024;
    const authed = `POST /sync/connect HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${await signToken('u1')}\r\nContent-Type: application/json\r\nContent-Length: ${over}\r\nSync-Source-ID: dev-1\r\nConnection: close\r\n\r\n`;
    expect(await rawExchange(s.url, authed, Buffer.alloc(over, 0x20))).toMatch(/^HTTP\/1\.1 413 /);
  });

  it('answers an oversized header with a typed 431 and a malformed request with a typed 400', async () => {
    const big = `GET /syncx/health HTTP/1.1\r\nHost: x\r\nX-Padding: ${'a'.repeat(64 * 1024)}\r\n\r\n`;
    const reply = await rawExchange(s.url, big, undefined);
    expect(reply).toMatch(/^HTTP\/1\.1 431 /);
    expect(reply.toLowerCase()).toContain('content-type: application/json');
    expect(reply).toContain('"error":"request_headers_too_large"');
    const garbage = await rawExchange(s.url, 'GET /syncx/health HTTP/1.1\r\nHost x\r\n\r\n', undefined);
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    expect(garbage).toContain('"error":"invalid_request"');
  });

  it('answers unknown routes with a typed 404 and CORS preflight with 204', async () => {
    const res = await fetch(`${s.url}/sync/nope`, { headers: { authorization: `Bearer ${await signToken('u1')}` } });
    expect(res.status).toBe(404);
    expect((await res.json()).error).toBe('route_not_found');
    const pre = await fetch(`${s.url}/sync/connect`, { method: 'OPTIONS' });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('gateway static files', () => {
  let s: TestServer;
  beforeAll(async () => {
    const dir = scratchDir('static');
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>app</title>');
    s = await startTestServer({ staticDir: dir });
  });
  afterAll(async () => s?.close());

  it('a malformed percent-encoding on a static path is a typed 400, not a 500', async () => {
    for (const path of ['/%', '/%E0%A4%A', '/app/%ZZ']) {
      const reply = await rawExchange(s.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, undefined);
      expect(reply, path).toMatch(/^HTTP\/1\.1 400 /);
      expect(reply, path).toContain('"error":"invalid_request"');
    }
    expect((await fetch(`${s.url}/some/page`)).status).toBe(200);
  });
});

describe('gateway with a JWKS', () => {
  let jwks: Server;
  let jwksUrl: string;
  let privateKey: CryptoKey;
  let s: TestServer;
  const issuer = 'https://issuer.example.test/';
  const audience = 'lockstep-test';

  beforeAll(async () => {
    const pair = await generateKeyPair('RS256');
    privateKey = pair.privateKey as CryptoKey;
    const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    jwks = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const address = jwks.address();
    jwksUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/jwks.json`;
    s = await startTestServer({ auth: { jwksUrl, issuer, audience } });
  });
  afterAll(async () => {
    await s?.close();
    await new Promise<void>((resolve) => jwks?.close(() => resolve()));
  });

  const token = (claims: Record<string, unknown>, exp: string | null = '1h') => {
    const jwt = new SignJWT({ sub: 'jwks-user', ...claims }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuedAt();
    return (exp ? jwt.setExpirationTime(exp) : jwt).sign(privateKey);
  };

  async function connectWith(jwt: string): Promise<number> {
    const res = await fetch(`${s.url}/sync/connect`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${jwt}`, 'sync-source-id': 'dev-1' },
      body: JSON.stringify({ has_local_pending_rows: false }),
    });
    await res.body?.cancel();
    return res.status;
  }

  it('accepts a token of the configured issuer and audience, and refuses another issuer, another audience or no exp', async () => {
    expect(await connectWith(await token({ iss: issuer, aud: audience }))).toBe(200);
    expect(await connectWith(await token({ iss: 'https://elsewhere.example.test/', aud: audience }))).toBe(401);
    expect(await connectWith(await token({ iss: issuer, aud: 'another-app' }))).toBe(401);
    expect(await connectWith(await token({ aud: audience }))).toBe(401);
    expect(await connectWith(await token({ iss: issuer, aud: audience }, null))).toBe(401);
  });

  it('refuses to start with a JWKS but without an issuer and an audience', async () => {
    await expect(startGateway({ runtime: s.runtime, auth: { jwksUrl } })).rejects.toThrow(/SYNC_JWT_ISSUER.*SYNC_JWT_AUDIENCE/);
  });
});
