/** Lambda: GET /sync/capabilities, and the unauthenticated /syncx/health, /syncx/status and /syncx/openapi.json. */
import { openApiDocument } from '../core/protocol/openapi.js';
import { capabilities, health, status } from '../core/sync/index.js';
import { createHandler, type Route } from './edge/handler.js';

export const routes: readonly Route[] = [
  {
    method: 'GET',
    path: '/sync/capabilities',
    auth: true,
    run: async (_req, ctx) => {
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
    path: '/syncx/openapi.json',
    auth: false,
    // Generated once per container: it depends on the build only, never on the database.
    run: async () => ({ status: 200, body: (openApi ??= openApiDocument()) }),
  },
];

let openApi: ReturnType<typeof openApiDocument> | undefined;

export const handler = createHandler(routes);
