/**
 * Lambda: GET /sync/capabilities, the unauthenticated /syncx/health, /syncx/status and
 * /syncx/openapi.json, and the operator's GET /syncx/operator/users/{user_id} (IAM-authorized).
 */
import { openApiDocument } from '../core/protocol/openapi.js';
import { capabilities, health, status, userStatus } from '../core/sync/index.js';
import { createHandler, type Route } from './edge/handler.js';

export const routes: readonly Route[] = [
  {
    method: 'GET',
    path: '/sync/capabilities',
    auth: true,
    run: async (req, ctx) => {
      // A client whose app declares what the server does not publish yet asks past the cache:
      // bootstrap may have just added it (one cheap read, and a reload only when it did).
      if (/no-cache|max-age=0/.test(req.headers['cache-control'] ?? '')) await ctx.runtime.refreshCatalog(ctx.db);
      const { catalog, limits } = await ctx.sync();
      return { status: 200, body: capabilities(catalog, limits, ctx.runtime.config.appName) };
    },
  },
  {
    method: 'GET',
    path: '/syncx/health',
    auth: false,
    run: async (_req, ctx) => {
      const h = await health(ctx.db);
      if (h.status === 'healthy') return { status: 200, body: h };
      return { status: 503, body: h, headers: { 'retry-after': String(ctx.runtime.config.limits.unavailableRetryAfterSeconds) } };
    },
  },
  {
    method: 'GET',
    path: '/syncx/status',
    auth: false,
    run: async (_req, ctx) => {
      const { catalog, limits } = await ctx.sync();
      return { status: 200, body: await status(ctx.db, catalog, limits) };
    },
  },
  {
    method: 'GET',
    path: '/syncx/operator/users/{user_id}',
    auth: 'operator',
    run: async (req, ctx) => ({ status: 200, body: await userStatus(ctx.db, req.params['user_id'] as string) }),
  },
  {
    method: 'GET',
    path: '/syncx/openapi.json',
    auth: false,
    // Generated once per container: it depends on the build only, never on the database.
    run: async () => ({ status: 200, body: (openApi ??= openApiDocument()) }),
  },
];

let openApi: ReturnType<typeof openApiDocument> | undefined;

export const handler = createHandler(routes);
