/**
 * Wake sources: how the sync loop (loop.ts) learns that other devices committed. A source is
 * started while the loop runs, the device is attached and the network is up, and stopped
 * otherwise; it calls `wake(latestBundleSeq)` whenever the server may hold bundles past the
 * checkpoint. The loop then syncs (coalescing wake-ups that arrive during a sync).
 *
 * `long-poll` waits on `GET /sync/watch`; `websocket` listens for push notifications and long-polls
 * while it has no socket. An app's own source plugs in the same way, passed as `watch` in the
 * client's config.
 */
import { WatchResponse } from '../core/protocol/read-path.js';
import { type NotifiedPages } from './notified-pages.js';
import { type TokenProvider, type Transport } from './transport.js';
import { defaultSocketUrl, platformWebSocket, SocketWatch, type WebSocketFactory } from './watch-socket.js';

/** What a wake source may use. */
export interface WakeSourceContext {
  /** The client's transport (bearer token, Sync-Source-ID, typed errors). */
  readonly transport: Transport;
  /** Origin of the sync API, for sources that open their own connection. */
  readonly baseUrl: string;
  readonly getToken: TokenProvider;
  /** This device's current source id. */
  readonly sourceId: () => string;
  /** The read checkpoint now. */
  readonly checkpoint: () => Promise<number>;
  /** Resolves when the loop's next sync attempt ends (whatever its outcome); the one under way, if any. */
  readonly afterNextSync: () => Promise<void>;
  /** A sync attempt is under way. */
  readonly syncing: () => boolean;
  /** The server's longest long-poll wait. */
  readonly watchMaxWaitSeconds: number;
  /**
   * A wait failed, so the source cannot tell whether anything changed: the loop syncs to find
   * out, and that sync's outcome is what its status shows (an outage is `backoff` with the error,
   * never `idle`).
   */
  readonly waitFailed: (error: unknown) => void;
  /** Where a socket puts the pull pages its notifications carry (protocol §5.9), for the next pull. */
  readonly notified: NotifiedPages;
}

/** A running wake source. */
export interface WakeSource {
  stop(): void;
}

/** Starts a wake source; `wake` is called with the server's latest bundle sequence. */
export type WakeSourceFactory = (context: WakeSourceContext, wake: (latestBundleSeq: number) => void) => WakeSource;

/** Pause after a failed long poll: doubling from 1 s up to 30 s, reset by an answer. */
const RETRY_BASE_MS = 1000;
const RETRY_MAX_MS = 30_000;

/**
 * One wait for a commit past `checkpoint`: changed (with the latest bundle) or not. `announced`:
 * the change names a bundle the server committed, which a sync reaching it has seen; a re-check
 * (a socket just opened, or lost) names none.
 */
type WaitOnce = (checkpoint: number, signal: AbortSignal) => Promise<{ readonly changed: boolean; readonly latestBundleSeq: number; readonly announced: boolean }>;

/** One long poll: `GET /sync/watch`, answered when a commit passes the checkpoint or the wait ends. */
function longPollOnce(context: WakeSourceContext): WaitOnce {
  return async (checkpoint, signal) => {
    const answer = await context.transport.request('GET', '/sync/watch', {
      query: { after_bundle_seq: checkpoint, wait_seconds: context.watchMaxWaitSeconds },
      schema: WatchResponse,
      retry: false,
      signal,
    });
    return { changed: answer.changed, latestBundleSeq: answer.latest_bundle_seq, announced: answer.changed };
  };
}

/**
 * Waits in a loop, one wait at a time. After a wake-up it waits for the loop's sync before it
 * waits again: until then the checkpoint has not moved, and the server would answer `changed` at
 * once. A failed wait is reported (`waitFailed`: the loop syncs to learn the truth) and pauses,
 * doubling from 1 s up to 30 s, reset by an answer.
 *
 * An announced bundle wakes the loop only if the device does not hold it yet, once the sync
 * under way (if any) has ended. Every socket of a user hears each of its commits, the pushing
 * device's own too, while that device's sync replays the bundle or just after, and this wait
 * began before the push: a wake-up then made the loop sync once more, a pull request that found
 * nothing, for every push. A re-check (a socket just opened or lost) names no bundle and always
 * wakes: what it may have missed came after the sync under way may have looked.
 */
function waitLoop(context: WakeSourceContext, wake: (latestBundleSeq: number) => void, waitOnce: WaitOnce, onStop?: () => void): WakeSource {
  const abort = new AbortController();
  let failures = 0;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      abort.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
  void (async () => {
    while (!abort.signal.aborted) {
      try {
        const answer = await waitOnce(await context.checkpoint(), abort.signal);
        failures = 0;
        if (answer.changed && !abort.signal.aborted) {
          if (answer.announced) {
            if (context.syncing()) await context.afterNextSync();
            if (abort.signal.aborted || (await context.checkpoint()) >= answer.latestBundleSeq) continue;
          }
          const synced = context.afterNextSync();
          wake(answer.latestBundleSeq);
          await synced;
        }
      } catch (error) {
        if (abort.signal.aborted) return;
        failures++;
        context.waitFailed(error);
        await pause(Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (failures - 1)));
      }
    }
  })();
  return {
    stop: () => {
      abort.abort();
      onStop?.();
    },
  };
}

/** Long poll (`GET /sync/watch`) only. */
export const longPollWakeSource: WakeSourceFactory = (context, wake) => waitLoop(context, wake, longPollOnce(context));

/**
 * Push notifications (protocol §5.9): one WebSocket (`GET /sync/ws` locally, the WebSocket API in
 * AWS, see watch-socket.ts) whose `changed` messages wake the loop, costing the server nothing
 * while nothing happens. While no socket can be had (refused, a proxy that drops upgrades, no
 * WebSocket on the platform) each wait is a long poll instead, and the socket is tried again later.
 */
export function webSocketWakeSource(options: { readonly url?: string | undefined; readonly connect?: WebSocketFactory | undefined }): WakeSourceFactory {
  return (context, wake) => {
    const connect = options.connect ?? platformWebSocket();
    const poll = longPollOnce(context);
    if (!connect) return waitLoop(context, wake, poll);
    const socket = new SocketWatch({
      url: options.url ?? defaultSocketUrl(context.baseUrl),
      getToken: context.getToken,
      sourceId: context.sourceId,
      connect,
      protocol: () => context.transport.protocol,
      onPage: (page) => context.notified.offer(page),
    });
    return waitLoop(
      context,
      wake,
      async (checkpoint, signal) => {
        const heard = await socket.waitAnnounced(checkpoint, context.watchMaxWaitSeconds * 1000, signal);
        return heard ? { ...heard.result, announced: heard.announced } : poll(checkpoint, signal);
      },
      () => socket.close(),
    );
  };
}
