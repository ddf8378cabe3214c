import { describe, expect, it } from 'vitest';
import { backoffDelayMs, SyncHttpError, Transport, defaultRetryPolicy } from '../client-web/transport.js';

function fakeFetch(answers: Array<() => Response | Promise<Response>>): { fetch: typeof fetch; calls: Request[] } {
  const calls: Request[] = [];
  let i = 0;
  return {
    calls,
    fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
      calls.push(new Request(input, init));
      const answer = answers[Math.min(i++, answers.length - 1)] as () => Response;
      return answer();
    }) as typeof fetch,
  };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) => () =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

describe('client transport', () => {
  it('computes capped full-jitter backoff that honours Retry-After', () => {
    const p = { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 1000 };
    expect(backoffDelayMs(p, 1, () => 0.999)).toBe(99);
    expect(backoffDelayMs(p, 4, () => 0.5)).toBe(400);
    expect(backoffDelayMs(p, 10, () => 0.999)).toBe(999);
    expect(backoffDelayMs(p, 1, () => 0, 2500)).toBe(2500);
  });

  it('retries 503 and 429 with the server-requested delay, then succeeds', async () => {
    const f = fakeFetch([json(503, { error: 'service_unavailable', message: 'x' }, { 'retry-after': '2' }), json(429, { error: 'rate_limited', message: 'y' }), json(200, { ok: 1 })]);
    const slept: number[] = [];
    const t = new Transport({ baseUrl: 'http://x', getToken: () => 'tok', fetch: f.fetch, random: () => 0, sleep: async (ms) => void slept.push(ms) }, () => 'src-1');
    expect(await t.request('GET', '/sync/pull')).toEqual({ ok: 1 });
    expect(slept).toEqual([2000, 0]);
    expect(f.calls[0]?.headers.get('authorization')).toBe('Bearer tok');
    expect(f.calls[0]?.headers.get('sync-source-id')).toBe('src-1');
  });

  it('does not retry commit_outcome_unknown or 4xx, and types the error', async () => {
    for (const [status, code] of [[503, 'commit_outcome_unknown'], [409, 'push_conflict'], [400, 'invalid_request']] as const) {
      const f = fakeFetch([json(status, { error: code, message: 'm', conflict: { a: 1 } }), json(200, {})]);
      const t = new Transport({ baseUrl: 'http://x', getToken: () => 't', fetch: f.fetch, sleep: async () => {} }, () => 's');
      const error = await t.request('POST', '/sync/push-sessions/x/commit').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SyncHttpError);
      expect((error as SyncHttpError).code).toBe(code);
      expect((error as SyncHttpError).status).toBe(status);
      expect(f.calls).toHaveLength(1);
    }
  });

  it('a 401 asks the token provider once more, for a fresh token, and retries with it; a second 401 is the answer (issue 23 item 8)', async () => {
    const asked: unknown[] = [];
    const getToken = (request?: { refresh: boolean }) => {
      asked.push(request);
      return request?.refresh ? 'fresh' : 'stale';
    };
    const refused = json(401, { error: 'authentication_failed', message: 'expired' });
    const f = fakeFetch([refused, json(200, { ok: 1 })]);
    const t = new Transport({ baseUrl: 'http://x', getToken, fetch: f.fetch, sleep: async () => {} }, () => 's');
    expect(await t.request('GET', '/sync/pull')).toEqual({ ok: 1 });
    expect(f.calls.map((c) => c.headers.get('authorization'))).toEqual(['Bearer stale', 'Bearer fresh']);
    expect(asked).toEqual([undefined, { refresh: true }]);

    const again = fakeFetch([refused, refused, json(200, {})]);
    const t2 = new Transport({ baseUrl: 'http://x', getToken, fetch: again.fetch, sleep: async () => {} }, () => 's');
    await expect(t2.request('GET', '/sync/pull')).rejects.toMatchObject({ code: 'authentication_failed', status: 401 });
    expect(again.calls).toHaveLength(2);
  });

  it('requests refused together share one refresh, the fresh token is kept for a retry, and a later refusal refreshes again', async () => {
    const asked: unknown[] = [];
    let current = 'stale';
    let fresh = 0;
    const getToken = (request?: { refresh: boolean }) => {
      asked.push(request);
      if (request?.refresh) current = `fresh-${++fresh}`;
      return current;
    };
    // Answers by the token sent: only the accepted one goes through, and the first request that
    // sends it meets a network error once.
    let accepted = 'fresh-1';
    let broke = false;
    const calls: string[] = [];
    const byToken = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const token = new Headers(init?.headers).get('authorization') ?? '';
      calls.push(`${String(input).replace('http://x', '')} ${token}`);
      if (token !== `Bearer ${accepted}`) return json(401, { error: 'authentication_failed', message: 'expired' })();
      if (!broke) {
        broke = true;
        throw new TypeError('fetch failed');
      }
      return json(200, { ok: 1 })();
    }) as typeof fetch;
    const t = new Transport({ baseUrl: 'http://x', getToken, fetch: byToken, sleep: async () => {} }, () => 's');
    // All three take the stale token before any answer.
    const answers = await Promise.all([t.request('GET', '/a'), t.request('GET', '/b'), t.request('GET', '/c')]);
    expect(answers).toEqual([{ ok: 1 }, { ok: 1 }, { ok: 1 }]);
    // One provider call with refresh for the three refusals, and none for the retry after the network error.
    expect(asked.filter((a) => a !== undefined)).toEqual([{ refresh: true }]);
    expect(calls.filter((c) => c.endsWith('Bearer fresh-1'))).toHaveLength(4);
    // The fresh token refused in its turn, taken after that refresh: a refresh of its own.
    current = 'fresh-1';
    accepted = 'fresh-2';
    expect(await t.request('GET', '/e')).toEqual({ ok: 1 });
    expect(fresh).toBe(2);
    expect(calls.slice(-2)).toEqual(['/e Bearer fresh-1', '/e Bearer fresh-2']);
  });

  it('a token provider that throws is authentication_failed (not a network error), sent nowhere and not retried', async () => {
    const f = fakeFetch([json(200, {})]);
    let asked = 0;
    const t = new Transport({ baseUrl: 'http://x', getToken: () => { asked++; throw new Error('signed out'); }, fetch: f.fetch, sleep: async () => {} }, () => 's');
    const error = await t.request('GET', '/sync/pull').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SyncHttpError);
    expect(error).toMatchObject({ code: 'authentication_failed', status: 401, retriable: false });
    expect((error as Error).message).toMatch(/signed out/);
    expect(f.calls).toHaveLength(0);
    expect(asked).toBe(1);
    const rejecting = new Transport({ baseUrl: 'http://x', getToken: () => Promise.reject(new Error('no session')), fetch: f.fetch, sleep: async () => {} }, () => 's');
    await expect(rejecting.request('GET', '/sync/pull')).rejects.toMatchObject({ code: 'authentication_failed' });
  });

  it('gives up after maxAttempts on network errors', async () => {
    let calls = 0;
    const t = new Transport(
      { baseUrl: 'http://x', getToken: () => 't', fetch: (async () => { calls++; throw new TypeError('fetch failed'); }) as typeof fetch, sleep: async () => {} },
      () => 's',
    );
    const error = await t.request('GET', '/sync/pull').catch((e: unknown) => e);
    expect((error as SyncHttpError).code).toBe('network_error');
    expect(calls).toBe(defaultRetryPolicy.maxAttempts);
  });

  it('types every failure: unknown codes and code-less answers are invalid_response (status kept), a gateway 413 is payload_too_large, an abort is aborted', async () => {
    const cases: [() => Response, string, number][] = [
      [json(418, { error: 'teapot', message: 'x' }), 'invalid_response', 418],
      [() => new Response('<html>bad gateway</html>', { status: 502 }), 'invalid_response', 502],
      [json(413, { message: 'Request Entity Too Large' }), 'payload_too_large', 413],
    ];
    for (const [answer, code, status] of cases) {
      const t = new Transport({ baseUrl: 'http://x', getToken: () => 't', fetch: fakeFetch([answer]).fetch, retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 } }, () => 's');
      expect(await t.request('GET', '/sync/pull').catch((e: unknown) => e)).toMatchObject({ code, status });
    }
    const controller = new AbortController();
    const t = new Transport({ baseUrl: 'http://x', getToken: () => 't', fetch: (async () => { controller.abort(); throw new DOMException('aborted', 'AbortError'); }) as typeof fetch }, () => 's');
    expect(await t.request('GET', '/sync/watch', { signal: controller.signal }).catch((e: unknown) => e)).toMatchObject({ code: 'aborted' });
  });
});
