/** The local gateway authenticates like API Gateway's JWT authorizer would (issue 2). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT, UnsecuredJWT } from 'jose';
import { startTestServer, signToken, TEST_JWT_SECRET, type TestServer } from './support/server.js';

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

  it('answers unknown routes with a typed 404 and CORS preflight with 204', async () => {
    const res = await fetch(`${s.url}/sync/nope`, { headers: { authorization: `Bearer ${await signToken('u1')}` } });
    expect(res.status).toBe(404);
    expect((await res.json()).error).toBe('route_not_found');
    const pre = await fetch(`${s.url}/sync/connect`, { method: 'OPTIONS' });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
  });
});
