/**
 * Lambda: GET /sync/capabilities, the unauthenticated /syncx/health, /syncx/status and
 * /syncx/openapi.json, and the operator's GET /syncx/operator/users/{user_id} (IAM-authorized).
 */
import { SyncError } from '../core/errors.js';
import { openApiDocument } from '../core/protocol/openapi.js';
import { userIdProblem } from '../core/protocol/index.js';
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
      // Coalesced, and on the unauthenticated routes' own place in the pool (functions/edge/handler.ts).
      const h = await ctx.runtime.shared('health', () => health(ctx.db));
      if (h.status === 'healthy') return { status: 200, body: h };
      return { status: 503, body: h, headers: { 'retry-after': String(ctx.runtime.config.limits.unavailableRetryAfterSeconds) } };
    },
  },
  {
    method: 'GET',
    path: '/syncx/status',
    auth: false,
    run: async (_req, ctx) => {
      const body = await ctx.runtime.shared('status', async () => {
        const { catalog, limits } = await ctx.sync();
        return status(ctx.db, catalog, limits);
      });
      return { status: 200, body };
    },
  },
  {
    method: 'GET',
    path: '/syncx/operator/users/{user_id}',
    auth: 'operator',
    run: async (req, ctx) => {
      // The same user id check as every other entrance: an id no user can have is a 400, never a
      // statement PostgreSQL refuses (U+0000 was a 500).
      const userId = req.params['user_id'];
      const problem = userIdProblem(userId);
      if (problem !== null || userId === undefined) throw new SyncError('invalid_request', `user_id: ${problem ?? 'no user id'}`);
      return { status: 200, body: await userStatus(ctx.db, userId) };
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
