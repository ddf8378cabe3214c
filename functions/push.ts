/** Lambda: push sessions (create, chunks, commit, delete) and committed-bundle replay pages. */
import { ChunkRequest, PushSessionCreateRequest } from '../core/protocol/index.js';
import { commitPush, committedBundleRows, createPushSession, deletePushSession, namesUnknownSchema, uploadChunk, type CommitOutcome } from '../core/sync/index.js';
import { protocolOf, summaryInProtocol } from '../core/sync/wire-form.js';
import { createHandler, type Route, type RouteContext } from './edge/handler.js';
import { type EdgeAnswer } from './edge/http.js';
import { parseBody, pathInt, pathUuid, queryInt, type EdgeRequest } from './edge/request.js';

/** Stages `chunk` in the session; a table or column this container does not know yet is looked up once more. */
async function upload(req: EdgeRequest, ctx: RouteContext, pushId: string, chunk: ChunkRequest): Promise<EdgeAnswer> {
  const once = async () => uploadChunk(await ctx.sync(), ctx.actor, pushId, chunk, req.bodyBytes);
  try {
    return { status: 200, body: await once() };
  } catch (error) {
    // A table or column this container's catalog does not know may be one bootstrap just added.
    if (namesUnknownSchema(error) && (await ctx.runtime.refreshCatalog(ctx.db))) return { status: 200, body: await once() };
    throw error;
  }
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
 * A create that carries its rows (protocol §5.2, `single_request_push`): the session it opened
 * takes them and commits in this same request, one round trip for a small bundle instead of three.
 * Whatever does not commit drops the session, so nothing stays staged or counted against the user.
 */
async function stageAndCommit(req: EdgeRequest, ctx: RouteContext, pushId: string, rows: NonNullable<PushSessionCreateRequest['rows']>): Promise<EdgeAnswer> {
  let answer: EdgeAnswer | undefined;
  try {
    await upload(req, ctx, pushId, { start_row_ordinal: 0, rows });
    answer = await commitAndAnswer(ctx, pushId);
    return answer;
  } finally {
    if (answer?.status !== 200) await deletePushSession(await ctx.sync(), ctx.actor, pushId).catch(() => undefined);
  }
}

export const routes: readonly Route[] = [
  {
    method: 'POST',
    path: '/sync/push-sessions',
    auth: true,
    run: async (req, ctx) => {
      const request = parseBody(req, PushSessionCreateRequest);
      const created = await createPushSession(await ctx.sync(), ctx.actor, request);
      if (!request.rows || created.status !== 'staging') return { status: 200, body: created };
      return stageAndCommit(req, ctx, created.push_id, request.rows);
    },
  },
  {
    method: 'POST',
    path: '/sync/push-sessions/{push_id}/chunks',
    auth: true,
    run: async (req, ctx) => upload(req, ctx, pathUuid(req, 'push_id'), parseBody(req, ChunkRequest)),
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
