/** POST /sync/connect: the first-connect lifecycle of a user's scope (docs/protocol.md §5.1). One round trip. */
import { sql } from '../../db/index.js';
import { type ConnectRequest, type ConnectResponse } from '../../protocol/index.js';
import { unwrap, type Actor, type SyncContext } from '../context.js';

export async function connect(ctx: SyncContext, actor: Actor, request: ConnectRequest): Promise<ConnectResponse> {
  const [row] = await ctx.db.query<{ answer: unknown }>(sql`
    SELECT sync.connect(${actor.userId}, ${actor.sourceId}, ${request.has_local_pending_rows},
                        ${ctx.limits.initializationLeaseTtlSeconds}) AS answer`);
  return unwrap<ConnectResponse>(row?.answer);
}
