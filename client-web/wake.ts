/**
 * Wake sources: how the sync loop (loop.ts) learns that other devices committed. A source is
 * started while the loop runs, the device is attached and the network is up, and stopped
 * otherwise; it calls `wake(latestBundleSeq)` whenever the server may hold bundles past the
 * checkpoint. The loop then syncs (coalescing wake-ups that arrive during a sync).
 *
 * `long-poll` (here) waits on `GET /sync/watch`. A push-notification source (`GET /sync/ws`)
 * plugs in the same way: a factory in WAKE_SOURCES under its mode name, or passed as
 * `watch` in the client's config; long poll stays the fallback.
 */
import { WatchResponse } from '../core/protocol/read-path.js';
import { type Transport } from './transport.js';

/** What a wake source may use. */
export interface WakeSourceContext {
  /** The client's transport (bearer token, Sync-Source-ID, typed errors). */
  readonly transport: Transport;
  /** Origin of the sync API, for sources that open their own connection. */
  readonly baseUrl: string;
  readonly getToken: () => string | Promise<string>;
  /** This device's current source id. */
  readonly sourceId: () => string;
  /** The read checkpoint now. */
  readonly checkpoint: () => Promise<number>;
  /** Resolves when the loop's next sync attempt ends (whatever its outcome). */
  readonly afterNextSync: () => Promise<void>;
  /** The server's longest long-poll wait. */
  readonly watchMaxWaitSeconds: number;
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
 * Long poll (`GET /sync/watch`): one request at a time, each answered when a commit passes the
 * checkpoint or the wait ends. After a wake-up it waits for the loop's sync before it polls again:
 * until then the checkpoint has not moved, and the server would answer `changed` at once.
 */
export const longPollWakeSource: WakeSourceFactory = (context, wake) => {
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
        const answer = await context.transport.request('GET', '/sync/watch', {
          query: { after_bundle_seq: await context.checkpoint(), wait_seconds: context.watchMaxWaitSeconds },
          schema: WatchResponse,
          retry: false,
          signal: abort.signal,
        });
        failures = 0;
        if (answer.changed && !abort.signal.aborted) {
          const synced = context.afterNextSync();
          wake(answer.latest_bundle_seq);
          await synced;
        }
      } catch {
        if (abort.signal.aborted) return;
        failures++;
        await pause(Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (failures - 1)));
      }
    }
  })();
  return { stop: () => abort.abort() };
};

/** The wake sources the client knows by name (`ClientConfig.watch`). */
export const WAKE_SOURCES: Readonly<Record<'long-poll', WakeSourceFactory>> = { 'long-poll': longPollWakeSource };
