/** The read path: pull to a frozen ceiling, and the long-poll watch. */
import { sql } from '../../db/index.js';
import { type WatchResponse } from '../../protocol/index.js';
import { unwrapPage, pageSize, pageBudgetBytes, type Actor, type RawJson, type SyncContext } from '../context.js';

export interface PullParams {
  readonly afterBundleSeq: number;
  readonly maxBundles?: number | undefined;
  readonly targetBundleSeq?: number | undefined;
}

/** One page of complete committed bundles after the checkpoint. One round trip. */
export async function pull(ctx: SyncContext, actor: Actor, params: PullParams): Promise<RawJson> {
  const limit = pageSize(params.maxBundles, ctx.limits.defaultBundlesPerPull, ctx.limits.maxBundlesPerPull);
  const [row] = await ctx.db.query<{ error: unknown; body: string | null }>(sql`
    SELECT error, body FROM sync.pull(${actor.userId}, ${actor.sourceId}, ${params.afterBundleSeq}, ${limit},
      ${params.targetBundleSeq ?? null}::bigint, ${pageBudgetBytes(ctx.limits)})`);
  return unwrapPage(row);
}

/**
 * Long poll: answers as soon as the user's latest bundle_seq passes `afterBundleSeq`, or with
 * `changed: false` after `waitSeconds`. One indexed point read per poll step; no LISTEN, which a
 * transaction pooler would break.
 */
export async function watch(ctx: SyncContext, actor: Actor, afterBundleSeq: number, waitSeconds: number | undefined, signal?: AbortSignal): Promise<WatchResponse> {
  const wait = Math.min(waitSeconds ?? ctx.limits.watchDefaultWaitSeconds, ctx.limits.watchMaxWaitSeconds);
  const deadline = Date.now() + wait * 1000;
  for (;;) {
    const [row] = await ctx.db.query<{ latest: string }>(sql`
      SELECT latest_bundle_seq AS latest FROM sync.user_state WHERE user_id = ${actor.userId}`);
    const latest = Number(row?.latest ?? 0);
    if (latest > afterBundleSeq) return { latest_bundle_seq: latest, changed: true };
    // The last sleep is cut to the deadline, so "no change" is answered after the full wait,
    // not up to one poll interval early (a client would otherwise re-poll sooner than asked).
    const remainingMs = deadline - Date.now();
    if (remainingMs <= 0 || signal?.aborted) return { latest_bundle_seq: latest, changed: false };
    await new Promise((resolve) => setTimeout(resolve, Math.min(ctx.limits.watchPollIntervalMs, remainingMs)));
  }
}
