/** The read path: pull to a frozen ceiling, and the long-poll watch. */
import { sql } from '../../db/index.js';
import { type WatchResponse } from '../../protocol/index.js';
import { type CommitFeed } from '../notify/commit-feed.js';
import { readPage, pageSize, pageBudgetBytes, type Actor, type RawJson, type SyncContext } from '../context.js';
import { formArgument } from '../wire-form.js';

export interface PullParams {
  readonly afterBundleSeq: number;
  readonly maxBundles?: number | undefined;
  readonly targetBundleSeq?: number | undefined;
}

/** One page of complete committed bundles after the checkpoint. One round trip. */
export async function pull(ctx: SyncContext, actor: Actor, params: PullParams): Promise<RawJson> {
  const limit = pageSize(params.maxBundles, ctx.limits.defaultBundlesPerPull, ctx.limits.maxBundlesPerPull);
  return readPage(ctx, 'pull', sql`${actor.userId}, ${actor.sourceId}, ${params.afterBundleSeq}, ${limit},
    ${params.targetBundleSeq ?? null}::bigint, ${pageBudgetBytes(ctx.limits)}${formArgument(ctx, actor)}`);
}

/**
 * The layout whose `sync.watch_latest` carries the lock bound of a request; on older layouts the
 * watch reads with a plain SELECT (bounded only by the query timeout).
 */
const WATCH_READ_LAYOUT = 20;

export interface WatchOptions {
  /** Aborts when the caller is gone (the local gateway's connection closed): no more work for it. */
  readonly signal?: AbortSignal | undefined;
  /** A long-running process's commit feed: waits for its signal instead of polling. */
  readonly feed?: CommitFeed | undefined;
  /**
   * When the answer must be decided (epoch ms): the request's deadline less the watch's answer
   * reserve. A wait that would end later is cut to it, and ends `changed: false` like any other.
   */
  readonly answerBy?: number | undefined;
}

/**
 * Long poll: answers as soon as the user's latest bundle_seq passes `afterBundleSeq`, or with
 * `changed: false` after `waitSeconds`. With a commit feed (a long-running process), one indexed
 * point read, then nothing until the feed signals this user's commit (one LISTEN connection for the
 * whole process, never on the pooled request path). Without one (Lambda), a point read per poll
 * interval; no LISTEN, which a transaction pooler would break. Either way the wait ends when the
 * caller is gone (`signal`), so an abandoned watch stops costing queries.
 */
export async function watch(ctx: SyncContext, actor: Actor, afterBundleSeq: number, waitSeconds: number | undefined, options: WatchOptions = {}): Promise<WatchResponse> {
  const { signal, feed } = options;
  const wait = Math.min(waitSeconds ?? ctx.limits.watchDefaultWaitSeconds, ctx.limits.watchMaxWaitSeconds);
  // In Lambda a container may have less time left than the wait asks (issue 25 item 8: 26.2 s
  // left, wait 25 s, the last read missed the deadline and answered 503).
  const deadline = Math.min(Date.now() + wait * 1000, options.answerBy ?? Infinity);
  for (;;) {
    const [row] = await ctx.db.query<{ latest: string | null }>(ctx.catalog.layoutVersion >= WATCH_READ_LAYOUT
      ? sql`SELECT sync.watch_latest(${actor.userId}) AS latest`
      : sql`SELECT latest_bundle_seq AS latest FROM sync.user_state WHERE user_id = ${actor.userId}`);
    const latest = Number(row?.latest ?? 0);
    if (latest > afterBundleSeq) return { latest_bundle_seq: latest, changed: true };
    // The last wait is cut to the deadline, so "no change" is answered after the full wait,
    // not up to one poll interval early (a client would otherwise re-poll sooner than asked).
    const remainingMs = deadline - Date.now();
    if (remainingMs <= 0 || signal?.aborted) return { latest_bundle_seq: latest, changed: false };
    if (feed?.listening) {
      // Only this user's commit (or a feed reconnect, which may have missed one) wakes the wait;
      // the loop then reads again (also at the deadline or an abort, for the answer's latest).
      await feed.wait(actor.userId, remainingMs, signal);
    } else {
      await sleep(Math.min(ctx.limits.watchPollIntervalMs, remainingMs), signal);
    }
  }
}

/** A sleep that ends early when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
