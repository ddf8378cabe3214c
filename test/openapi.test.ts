/**
 * Issue 19, item 11: the OpenAPI document (core/protocol/openapi.ts) against the handlers' route
 * table: every route is documented once, with its method, path and authentication, and the
 * document has no path no handler serves. The document itself holds together: OpenAPI 3.1, every
 * $ref resolves, every path parameter is declared, every error code is the registry's with its
 * status, and it is what GET /syncx/openapi.json answers.
 */
import { describe, expect, it } from 'vitest';
import { errorRegistry, isErrorCode } from '../core/errors.js';
import { openApiDocument } from '../core/protocol/openapi.js';
import { OPERATIONS } from '../core/protocol/operations.js';
import { createHandler, functionRoutes } from '../functions/index.js';
import { createPool } from '../core/db/index.js';
import { createRuntime } from '../functions/index.js';
import { loadConfig } from '../core/config.js';

type Json = Record<string, any>;
const doc = openApiDocument() as Json;
const METHODS = ['get', 'post', 'delete', 'put', 'patch'];

/** Every (method, path, auth) the document describes. */
function documented(d: Json = doc): string[] {
  const out: string[] = [];
  for (const [path, item] of Object.entries<Json>(d['paths'])) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const open = Array.isArray(op.security) && op.security.length === 0;
      out.push(`${method.toUpperCase()} ${path} auth=${!open}`);
    }
  }
  return out.sort();
}

const served = Object.values(functionRoutes)
  .flat()
  .map((r) => `${r.method} ${r.path} auth=${r.auth}`)
  .sort();

/** Differences between the document and the route table, both ways. */
function drift(d: Json): string[] {
  const have = documented(d);
  return [...served.filter((r) => !have.includes(r)).map((r) => `undocumented: ${r}`), ...have.filter((r) => !served.includes(r)).map((r) => `no handler: ${r}`)];
}

describe('the OpenAPI document', () => {
  it('documents exactly the routes the handlers serve, with their authentication', () => {
    expect(drift(doc)).toEqual([]);
    expect(documented().length).toBe(served.length);
    expect(new Set(OPERATIONS.map((o) => o.operationId)).size).toBe(OPERATIONS.length);
  });

  it('notices drift: a route missing, a path no handler serves, authentication flipped', () => {
    const missing = structuredClone(doc);
    delete missing['paths']['/sync/watch'];
    expect(drift(missing)).toEqual(['undocumented: GET /sync/watch auth=true']);
    const extra = structuredClone(doc);
    extra['paths']['/sync/bogus'] = { get: { responses: {} } };
    expect(drift(extra)).toEqual(['no handler: GET /sync/bogus auth=true']);
    const open = structuredClone(doc);
    open['paths']['/sync/pull']['get'].security = [];
    expect(drift(open)).toEqual(['undocumented: GET /sync/pull auth=true', 'no handler: GET /sync/pull auth=false']);
  });

  it('is OpenAPI 3.1 whose references resolve and whose path parameters are declared', () => {
    expect(doc['openapi']).toBe('3.1.0');
    const text = JSON.stringify(doc);
    for (const [, name] of text.matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) expect(doc['components']['schemas'], name).toHaveProperty(name as string);
    expect(text).not.toContain('"$schema"');
    for (const [path, item] of Object.entries<Json>(doc['paths'])) {
      const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const method of METHODS) {
        if (!item[method]) continue;
        const declared = (item[method].parameters as Json[]).filter((p) => p['in'] === 'path').map((p) => p['name']);
        expect(declared.sort(), `${method} ${path}`).toEqual(inPath.sort());
      }
    }
  });

  it('lists each error code under its registry status, and the source header on every /sync route', () => {
    for (const [path, item] of Object.entries<Json>(doc['paths'])) {
      for (const method of METHODS) {
        const op = item[method];
        if (!op) continue;
        for (const [status, answer] of Object.entries<Json>(op.responses)) {
          for (const code of answer['x-error-codes'] ?? []) {
            expect(isErrorCode(code), code).toBe(true);
            expect(String(errorRegistry[code as keyof typeof errorRegistry].status), `${method} ${path} ${code}`).toBe(status);
          }
        }
        const header = (op.parameters as Json[]).some((p) => p['in'] === 'header' && p['name'] === 'Sync-Source-ID' && p['required']);
        expect(header, `${method} ${path}`).toBe(path.startsWith('/sync/'));
      }
    }
    expect(doc['paths']['/sync/push-sessions/{push_id}/commit'].post.responses['409']['x-error-codes']).toContain('push_conflict');
    expect(doc['paths']['/sync/push-sessions/{push_id}/commit'].post.responses['422']['x-error-codes']).toEqual(['push_rejected']);
  });

  it('is served at GET /syncx/openapi.json without credentials', async () => {
    // A real runtime whose pool never connects: the route needs no database.
    const config = loadConfig({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', SYNC_TABLES: 'app.t:id' });
    const runtime = createRuntime(config, await createPool({ connectionString: config.databaseUrl, driver: 'pg', max: 1 }));
    const handler = createHandler(functionRoutes['meta'] ?? [], async () => runtime);
    const answer = await handler({
      version: '2.0', routeKey: 'GET /syncx/openapi.json', rawPath: '/syncx/openapi.json', rawQueryString: '', headers: {}, isBase64Encoded: false,
      requestContext: { http: { method: 'GET', path: '/syncx/openapi.json', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' } },
    } as never);
    expect(answer.statusCode).toBe(200);
    expect(JSON.parse(answer.body ?? '{}')).toEqual(JSON.parse(JSON.stringify(doc)));
    await runtime.db.pool.end();
  });
});
