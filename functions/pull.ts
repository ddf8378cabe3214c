/** Lambda: GET /sync/pull and the long-poll GET /sync/watch. */
import { pull, watch } from '../core/sync/index.js';
import { NOTIFY_LAYOUT_VERSION } from '../core/sync/notify/connections.js';
import { createHandler, type Route } from './edge/handler.js';
import { queryInt } from './edge/request.js';

export const routes: readonly Route[] = [
  {
    method: 'GET',
    path: '/sync/pull',
    auth: true,
    run: async (req, ctx) => ({
      status: 200,
      body: await pull(await ctx.sync(), ctx.actor, {
        afterBundleSeq: queryInt(req, 'after_bundle_seq') ?? 0,
        maxBundles: queryInt(req, 'max_bundles', { min: 1 }),
        targetBundleSeq: queryInt(req, 'target_bundle_seq'),
      }),
    }),
  },
  {
    method: 'GET',
    path: '/sync/watch',
    auth: true,
    run: async (req, ctx) => {
      const sync = await ctx.sync();
      // Before layout 10 no trigger signals commits: the feed would never wake the wait.
      const feed = sync.catalog.layoutVersion >= NOTIFY_LAYOUT_VERSION ? ctx.runtime.feed : undefined;
      const answer = await watch(sync, ctx.actor, queryInt(req, 'after_bundle_seq') ?? 0, queryInt(req, 'wait_seconds'), {
        signal: ctx.signal,
        feed,
        // The wait ends early enough for its last read and answer within the function's time.
        answerBy: ctx.deadline - sync.limits.watchAnswerReserveMs,
      });
      return { status: 200, body: answer };
    },
  },
];

export const handler = createHandler(routes);
