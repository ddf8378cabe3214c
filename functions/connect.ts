/** Lambda: POST /sync/connect. */
import { ConnectRequest } from '../core/protocol/index.js';
import { connect } from '../core/sync/index.js';
import { createHandler, type Route } from './edge/handler.js';
import { parseBody } from './edge/request.js';

export const routes: readonly Route[] = [
  {
    method: 'POST',
    path: '/sync/connect',
    auth: true,
    run: async (req, ctx) => ({ status: 200, body: await connect(await ctx.sync(), ctx.actor, parseBody(req, ConnectRequest)) }),
  },
];

export const handler = createHandler(routes);
