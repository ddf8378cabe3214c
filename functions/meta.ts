/** Lambda: GET /sync/capabilities, and the unauthenticated /syncx/health and /syncx/status. */
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
];

export const handler = createHandler(routes);
