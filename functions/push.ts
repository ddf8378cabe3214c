/** Lambda: push sessions (create, chunks, commit, delete) and committed-bundle replay pages. */
import { parseChunkRequest, type ChunkRequest, PushSessionCreateRequest } from '../core/protocol/index.js';
import { commitPush, committedBundleRows, createAndStage, createPushSession, deletePushSession, namesUnknownSchema, uploadChunk, type CommitOutcome } from '../core/sync/index.js';
import { protocolOf, summaryInProtocol } from '../core/sync/wire-form.js';
import { createHandler, type Route, type RouteContext } from './edge/handler.js';
import { type EdgeAnswer } from './edge/http.js';
import { parseBody, pathInt, pathUuid, queryInt, type EdgeRequest } from './edge/request.js';

/** Runs `once`; a table or column this container does not know yet is looked up once more, then `once` again. */
async function withCatalogRetry<T>(ctx: RouteContext, once: () => Promise<T>): Promise<T> {
  try {
    return await once();
  } catch (error) {
    // A table or column this container's catalog does not know may be one bootstrap just added.
    if (namesUnknownSchema(error) && (await ctx.runtime.refreshCatalog(ctx.db))) return once();
    throw error;
  }
}

/** Stages `chunk` in the session. */
async function upload(req: EdgeRequest, ctx: RouteContext, pushId: string, chunk: ChunkRequest): Promise<EdgeAnswer> {
  return { status: 200, body: await withCatalogRetry(ctx, async () => uploadChunk(await ctx.sync(), ctx.actor, pushId, chunk, req.bodyBytes)) };
}

/** What a commit's outcome answers (commit, and a create that carried its rows). */
function commitAnswer(ctx: RouteContext, outcome: CommitOutcome): EdgeAnswer {
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
}

/**
 * Commits the session and answers; meanwhile this process holds PostgreSQL's signal of the
 * commit back, so the user's sockets hear of it first from the announcement with its rows.
 */
async function commitAndAnswer(ctx: RouteContext, pushId: string): Promise<EdgeAnswer> {
  const done = ctx.runtime.feed?.committing(ctx.actor.userId);
  try {
    return commitAnswer(ctx, await commitPush(await ctx.sync(), ctx.actor, pushId));
  } finally {
    done?.();
  }
}

/**
 * A create that carries its rows (protocol §5.2, `single_request_push`): one statement creates the
 * session and stages the rows, a second commits (two round trips for a small bundle instead of
 * three requests). Whatever does not commit drops the session, so nothing stays staged or counted
 * against the user.
 */
async function createStageAndCommit(req: EdgeRequest, ctx: RouteContext, request: PushSessionCreateRequest & { rows: ChunkRequest['rows'] }): Promise<EdgeAnswer> {
  let pushId: string | undefined;
  let answer: EdgeAnswer | undefined;
  try {
    const { created } = await withCatalogRetry(ctx, async () => createAndStage(await ctx.sync(), ctx.actor, request, req.bodyBytes, (id) => (pushId = id)));
    if (created.status !== 'staging') return (answer = { status: 200, body: created });
    answer = await commitAndAnswer(ctx, created.push_id);
    return answer;
  } finally {
    if (pushId !== undefined && answer?.status !== 200) await deletePushSession(await ctx.sync(), ctx.actor, pushId).catch(() => undefined);
  }
}

export const routes: readonly Route[] = [
  {
    method: 'POST',
    path: '/sync/push-sessions',
    auth: true,
    run: async (req, ctx) => {
      const request = parseBody(req, PushSessionCreateRequest);
      if (request.rows) return createStageAndCommit(req, ctx, { ...request, rows: request.rows });
      return { status: 200, body: await createPushSession(await ctx.sync(), ctx.actor, request) };
    },
  },
  {
    method: 'POST',
    path: '/sync/push-sessions/{push_id}/chunks',
    auth: true,
    run: async (req, ctx) => upload(req, ctx, pathUuid(req, 'push_id'), parseBody(req, { parse: parseChunkRequest })),
  },
  {
    method: 'POST',
    path: '/sync/push-sessions/{push_id}/commit',
    auth: true,
    run: async (req, ctx) => commitAndAnswer(ctx, pathUuid(req, 'push_id')),
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
