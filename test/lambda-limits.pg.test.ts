/**
 * Issue 17 items 1 and 2: Lambda's real limits and routing.
 * - max_request_bytes bounds the invoke event as Lambda serializes it (the body escaped inside
 *   it): an event of exactly the limit is served, one byte more is a typed 413;
 * - every page (pull, committed-bundle rows, snapshot chunks) of quote-heavy rows fits
 *   max_response_bytes as the serialized function result, and paging still delivers every row;
 * - the client sizes chunks by escaped bytes (no 413 at all), and treats API Gateway's own 413
 *   (no Lockstep body) as "too large" and splits;
 * - routes are found by routeKey behind a named stage and a custom-domain base path.
 * Low limits (64 KiB) keep the data small; the arithmetic is the same at 4 MiB.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler, functionRoutes, type HttpApiEvent, type LambdaHandler } from '../functions/index.js';
import { serializedBytes, serializedBytesWithBody } from '../core/protocol/wire-bytes.js';
import { openDevice, write, expectConverged, type Device } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, item, list, pushOk, uuid } from './support/write-helpers.js';

const LIMIT = 64 * 1024;
const QUOTES = '"'.repeat(600);

function event(method: string, routePath: string, rawPath: string, options: { sub?: string; body?: string; query?: Record<string, string>; source?: string } = {}): HttpApiEvent {
  return {
    version: '2.0',
    routeKey: `${method} ${routePath}`,
    rawPath,
    rawQueryString: new URLSearchParams(options.query ?? {}).toString(),
    headers: { 'sync-source-id': options.source ?? 'src-limits', ...(options.body ? { 'content-type': 'application/json' } : {}) },
    ...(options.query ? { queryStringParameters: options.query } : {}),
    requestContext: {
      accountId: '1', apiId: 'api', domainName: 'sync.example.test', domainPrefix: 'sync',
      http: { method, path: rawPath, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'vitest' },
      requestId: 'req-0000', routeKey: `${method} ${routePath}`, stage: 'prod', time: '01/Jan/2026:00:00:00 +0000', timeEpoch: 0,
      ...(options.sub ? { authorizer: { jwt: { claims: { sub: options.sub }, scopes: [] } } } : {}),
    },
    ...(options.body !== undefined ? { body: options.body } : {}),
    isBase64Encoded: false,
  } as unknown as HttpApiEvent;
}

describe('Lambda limits and routing', () => {
  let s: TestServer;
  let handlers: Record<string, LambdaHandler>;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({ env: { SYNC_LIMIT_MAX_REQUEST_BYTES: String(LIMIT), SYNC_LIMIT_MAX_RESPONSE_BYTES: String(LIMIT) } });
    handlers = Object.fromEntries(Object.entries(functionRoutes).map(([name, routes]) => [name, createHandler(routes, async () => s.runtime)]));
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('routes on routeKey behind a named stage and a custom-domain base path', async () => {
    const c = s.client('route-user', 'src-limits');
    await initEmpty(c);
    for (const prefix of ['', '/prod', '/api/v1']) {
      const caps = await handlers['meta']!(event('GET', '/sync/capabilities', `${prefix}/sync/capabilities`, { sub: 'route-user' }));
      expect(caps.statusCode, `${prefix}: ${caps.body}`).toBe(200);
      const created = await handlers['push']!(event('POST', '/sync/push-sessions', `${prefix}/sync/push-sessions`, { sub: 'route-user', body: JSON.stringify({ source_bundle_id: 1, planned_row_count: 1 }) }));
      expect(created.statusCode, created.body).toBe(200);
      const pushId = JSON.parse(created.body as string).push_id as string;
      // A path parameter read from the path's tail, the prefix ignored.
      const gone = await handlers['push']!(event('DELETE', '/sync/push-sessions/{push_id}', `${prefix}/sync/push-sessions/${pushId}`, { sub: 'route-user' }));
      expect(gone.statusCode, gone.body).toBe(204);
      const health = await handlers['meta']!(event('GET', '/syncx/health', `${prefix}/syncx/health`));
      expect(health.statusCode, health.body).toBe(200);
    }
    // The old rawPath routing answered 404 for the same event.
    const unrouted = await handlers['meta']!({ ...event('GET', '/sync/capabilities', '/prod/sync/capabilities', { sub: 'route-user' }), routeKey: '$default' });
    expect(unrouted.statusCode).toBe(404);
  });

  it('max_request_bytes bounds the JSON-escaped invoke event: exactly the limit is served, one byte more is a typed 413', async () => {
    const c = s.client('size-user', 'src-limits');
    await initEmpty(c);
    const listId = uuid();
    await pushOk(c, [list(listId, 'sizes')], { sourceBundleId: 1 });
    const created = await c.post('/sync/push-sessions', { source_bundle_id: 2, planned_row_count: 1 });
    expectStatus(created, 200);
    const pushId = created.body.push_id as string;
    const chunkEvent = (padding: number) => {
      const body = JSON.stringify({ start_row_ordinal: 0, rows: [item(uuid(), listId, QUOTES.repeat(10) + 'a'.repeat(padding))] });
      return event('POST', '/sync/push-sessions/{push_id}/chunks', `/sync/push-sessions/${pushId}/chunks`, { sub: 'size-user', body });
    };
    const base = chunkEvent(0);
    const bodyBytes = Buffer.byteLength(base.body as string);
    const room = LIMIT - serializedBytes(base);
    expect(room).toBeGreaterThan(0);
    // The body alone is far under the limit; the event it travels in is not.
    expect(bodyBytes).toBeLessThan(LIMIT * 0.6);

    const over = chunkEvent(room + 1);
    expect(serializedBytes(over)).toBe(LIMIT + 1);
    const refused = await handlers['push']!(over);
    expect(refused.statusCode, refused.body).toBe(413);
    expect(JSON.parse(refused.body as string)).toMatchObject({ error: 'payload_too_large', request_bytes: LIMIT + 1, max_request_bytes: LIMIT });

    const exact = chunkEvent(room);
    expect(serializedBytesWithBody(exact)).toBe(LIMIT);
    const served = await handlers['push']!(exact);
    expect(served.statusCode, served.body).toBe(200);
  });

  it('pages of quote-heavy rows fit max_response_bytes as the serialized result, and every row arrives', async () => {
    const c = s.client('page-user', 'src-limits');
    await initEmpty(c);
    const listId = uuid();
    const rows = [list(listId, 'quotes'), ...Array.from({ length: 60 }, (_, i) => item(uuid(), listId, `${i} ${QUOTES}`))];
    for (let start = 0, n = 1; start < rows.length; start += 20, n++) await pushOk(c, rows.slice(start, start + 20), { sourceBundleId: n, chunkSize: 20 });
    const source = { source: 'src-limits', sub: 'page-user' };
    const results: { bytes: number; raw: number }[] = [];
    const measure = (r: Awaited<ReturnType<LambdaHandler>>) => {
      expect(r.statusCode, r.body).toBe(200);
      results.push({ bytes: serializedBytes(r), raw: Buffer.byteLength(r.body as string) });
      return JSON.parse(r.body as string);
    };

    // Pull: bundles of ~25 KB raw each; several go per page until the escaped result is full.
    let after = 0;
    let pulled = 0;
    for (let guard = 0; guard < 20; guard++) {
      const page = measure(await handlers['pull']!(event('GET', '/sync/pull', '/sync/pull', { ...source, query: { after_bundle_seq: String(after) } })));
      for (const b of page.bundles) pulled += b.rows_omitted ? 0 : b.rows.length;
      after = page.bundles.at(-1).bundle_seq;
      if (!page.has_more) break;
    }
    expect(pulled).toBe(rows.length);

    // Committed rows of one bundle, and a snapshot, page by page.
    let next = 0;
    let replayed = 0;
    for (let guard = 0; guard < 40; guard++) {
      const page = measure(await handlers['push']!(event('GET', '/sync/committed-bundles/{bundle_seq}/rows', '/sync/committed-bundles/2/rows', { ...source, query: { after_row_ordinal: String(next) } })));
      replayed += page.rows.length;
      next = page.next_row_ordinal;
      if (!page.has_more) break;
    }
    expect(replayed).toBe(20);
    const snapshot = JSON.parse((await handlers['snapshot']!(event('POST', '/sync/snapshot-sessions', '/sync/snapshot-sessions', { ...source, body: '{}' }))).body as string);
    next = 0;
    let hydrated = 0;
    for (let guard = 0; guard < 40; guard++) {
      const page = measure(await handlers['snapshot']!(event('GET', '/sync/snapshot-sessions/{snapshot_id}', `/sync/snapshot-sessions/${snapshot.snapshot_id}`, { ...source, query: { after_row_ordinal: String(next) } })));
      hydrated += page.rows.length;
      next = page.next_row_ordinal;
      if (!page.has_more) break;
    }
    expect(hydrated).toBe(rows.length);

    for (const r of results) expect(r.bytes).toBeLessThanOrEqual(LIMIT);
    // The pages were full: budgeted by their raw bytes, they would have been ~1.8x the limit.
    expect(Math.max(...results.map((r) => r.bytes))).toBeGreaterThan(LIMIT * 0.7);
  });

  it('the client sizes chunks by escaped bytes: quote-heavy rows upload without a single 413', async () => {
    const statuses: number[] = [];
    const counting: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    };
    const a = await openDevice(s, 'client-escaped', { config: { fetch: counting, pushChunkRows: 1000 } });
    devices.push(a);
    const listId = uuid();
    await write.list(a.db, listId, 'quotes');
    for (let i = 0; i < 120; i++) await write.item(a.db, uuid(), listId, `${i} ${QUOTES}`);
    expect(await a.client.attach('client-escaped')).toMatchObject({ status: 'attached' });
    expect(statuses.filter((st) => st === 413)).toEqual([]);
    await expectConverged(s, 'client-escaped', a);
  });
});

describe('API Gateway\'s own 413', () => {
  let s: TestServer;
  const devices: Device[] = [];
  // Lambda refuses events over its limit before Lockstep runs: the gateway answers 413 with
  // {"message": "Request Entity Too Large"}. Here that limit is below max_request_bytes.
  beforeAll(async () => {
    s = await startTestServer({
      env: { SYNC_LIMIT_MAX_REQUEST_BYTES: String(1024 * 1024), SYNC_LIMIT_MAX_RESPONSE_BYTES: String(40 * 1024) },
      invokeLimitBytes: 48 * 1024,
    });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('is answered without a Lockstep body, and the client splits its chunks until they pass', async () => {
    const c = s.client('gw-user', 'src-gw');
    const raw = await c.post('/sync/connect', { has_local_pending_rows: false, padding: 'x'.repeat(60 * 1024) });
    expect(raw.status).toBe(413);
    expect(raw.body).toEqual({ message: 'Request Entity Too Large' });

    const statuses: number[] = [];
    const counting: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    };
    const a = await openDevice(s, 'gw-client', { config: { fetch: counting, pushChunkRows: 1000 } });
    devices.push(a);
    const listId = uuid();
    await write.list(a.db, listId, 'big');
    for (let i = 0; i < 100; i++) await write.item(a.db, uuid(), listId, `${i} ${'x'.repeat(900)}`);
    expect(await a.client.attach('gw-client')).toMatchObject({ status: 'attached' });
    expect(statuses.filter((st) => st === 413).length).toBeGreaterThan(0);
    await expectConverged(s, 'gw-client', a);
  });
});
