/** Lambda: push sessions (create, chunks, commit, delete) and committed-bundle replay pages. */
import { ChunkRequest, PushSessionCreateRequest } from '../core/protocol/index.js';
import { commitPush, committedBundleRows, createPushSession, deletePushSession, namesUnknownSchema, uploadChunk } from '../core/sync/index.js';
import { protocolOf, summaryInProtocol } from '../core/sync/wire-form.js';
import { createHandler, type Route } from './edge/handler.js';
import { parseBody, pathInt, pathUuid, queryInt } from './edge/request.js';

export const routes: readonly Route[] = [
  {
    method: 'POST',
    path: '/sync/push-sessions',
    auth: true,
    run: async (req, ctx) => ({ status: 200, body: await createPushSession(await ctx.sync(), ctx.actor, parseBody(req, PushSessionCreateRequest)) }),
  },
  {
    method: 'POST',
    path: '/sync/push-sessions/{push_id}/chunks',
    auth: true,
    run: async (req, ctx) => {
      const chunk = parseBody(req, ChunkRequest);
      const upload = async () => uploadChunk(await ctx.sync(), ctx.actor, pathUuid(req, 'push_id'), chunk, req.bodyBytes);
      try {
        return { status: 200, body: await upload() };
      } catch (error) {
        // A table or column this container's catalog does not know may be one bootstrap just added.
        if (namesUnknownSchema(error) && (await ctx.runtime.refreshCatalog(ctx.db))) return { status: 200, body: await upload() };
        throw error;
      }
    },
  },
  {
    method: 'POST',
    path: '/sync/push-sessions/{push_id}/commit',
    auth: true,
    run: async (req, ctx) => {
      const outcome = await commitPush(await ctx.sync(), ctx.actor, pathUuid(req, 'push_id'));
      switch (outcome.kind) {
        case 'committed':
          ctx.committed(ctx.actor.userId, outcome.answer.bundle_seq);
          ctx.count('Commits');
          ctx.count('CommittedRows', outcome.answer.row_count);
          return { status: 200, body: summaryInProtocol(outcome.answer, protocolOf(ctx.actor)) };
        case 'conflict':
          ctx.count('Conflicts');
          return {
            status: 409,
            body: { error: 'push_conflict', message: outcome.message, conflict: outcome.conflict, conflicts: outcome.conflicts, conflict_count: outcome.conflictCount },
          };
        case 'rejected':
          ctx.count('Rejections');
          return { status: 422, body: { error: 'push_rejected', message: outcome.message, violation: outcome.violation } };
      }
    },
  },
  {
    method: 'DELETE',
    path: '/sync/push-sessions/{push_id}',
    auth: true,
    run: async (req, ctx) => {
      await deletePushSession(await ctx.sync(), ctx.actor, pathUuid(req, 'push_id'));
      return { status: 204 };
    },
  },
  {
    method: 'GET',
    path: '/sync/committed-bundles/{bundle_seq}/rows',
    auth: true,
    run: async (req, ctx) => ({
      status: 200,
      body: await committedBundleRows(await ctx.sync(), ctx.actor, pathInt(req, 'bundle_seq'), queryInt(req, 'after_row_ordinal') ?? 0, queryInt(req, 'max_rows', { min: 1 })),
    }),
  },
];

export const handler = createHandler(routes);
