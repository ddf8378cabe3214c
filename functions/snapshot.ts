/** Lambda: snapshot sessions (create, chunk reads, delete). */
import { ROW_FORMS, SnapshotCreateRequest } from '../core/protocol/index.js';
import { createSnapshotWithPage, deleteSnapshot, snapshotPage } from '../core/sync/index.js';
import { createHandler, type Route } from './edge/handler.js';
import { parseBody, pathUuid, queryEnum, queryInt } from './edge/request.js';

export const routes: readonly Route[] = [
  {
    method: 'POST',
    path: '/sync/snapshot-sessions',
    auth: true,
    run: async (req, ctx) => ({ status: 200, body: await createSnapshotWithPage(await ctx.sync(), ctx.actor, parseBody(req, SnapshotCreateRequest, true)) }),
  },
  {
    method: 'GET',
    path: '/sync/snapshot-sessions/{snapshot_id}',
    auth: true,
    run: async (req, ctx) => ({
      status: 200,
      body: await snapshotPage(await ctx.sync(), ctx.actor, pathUuid(req, 'snapshot_id'), queryInt(req, 'after_row_ordinal') ?? 0, queryInt(req, 'max_rows', { min: 1 }),
        queryEnum(req, 'row_form', ROW_FORMS)),
    }),
  },
  {
    method: 'DELETE',
    path: '/sync/snapshot-sessions/{snapshot_id}',
    auth: true,
    run: async (req, ctx) => {
      await deleteSnapshot(await ctx.sync(), ctx.actor, pathUuid(req, 'snapshot_id'));
      return { status: 204 };
    },
  },
];

export const handler = createHandler(routes);
