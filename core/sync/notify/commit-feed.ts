/**
 * The commit feed of a long-running process: one LISTEN connection (core/db/listen.ts) on channel
 * `lockstep_commit`, which `sync.bundle_log`'s trigger signals at every commit, fanned out in
 * memory to whatever waits for a user: long polls (`watch`) and WebSockets of the local gateway.
 * The same connection hears `lockstep_layout`, bootstrap's signal that the catalog changed.
 * So a waiting watch costs no query per poll interval, and a thousand waiting devices cost one
 * connection, not a thousand (issue 15 item 8, issue 18).
 */
import { listen, type Listener } from '../../db/listen.js';
import { type ProtocolVersion } from '../../protocol/version.js';
import { LAYOUT_CHANNEL } from './channels.js';

export const COMMIT_CHANNEL = 'lockstep_commit';
export { LAYOUT_CHANNEL };

/**
 * The pull page of one announced bundle in a protocol's json form, as raw JSON text, or null when
 * it is not small and whole (protocol §5.9); read once per protocol, however many sockets ask.
 */
export type PageLoader = (protocol: ProtocolVersion) => Promise<string | null>;

/**
 * `bundleSeq` of a commit of the user, or null: signals may have been missed, check again. `page`
 * comes with a commit this process announced itself (not with PostgreSQL's signal), and with it
 * `committedBy`, the source whose push it was (that device has the rows: its answer and replay).
 */
export type CommitSignal = (bundleSeq: number | null, page?: PageLoader, committedBy?: string) => void;

export type WaitOutcome = 'signalled' | 'timeout' | 'aborted';

export interface CommitFeed {
  /** False while the LISTEN connection is down; callers then poll. */
  readonly listening: boolean;
  /** Calls `fn` for every commit of `userId` (and with null after a reconnect); answers the unsubscribe. */
  subscribe(userId: string, fn: CommitSignal): () => void;
  /**
   * A commit this process made itself (a push it answered): delivered to the user's subscribers at
   * once, before the LISTEN signal of the same commit, which follows a round trip through
   * PostgreSQL later and repeats it (the WebSockets send each bundle seq once; a long poll reads
   * the user's latest again).
   */
  announce(userId: string, bundleSeq: number, page?: PageLoader, committedBy?: string): void;
  /**
   * This process is committing a push of `userId`: until the answer `done` is called (after the
   * announcement), PostgreSQL's plain signals for the user are held back, so the announcement
   * with its page comes first; then the held signal goes out (subscribers skip what they had).
   */
  committing(userId: string): () => void;
  /** Waits for the next signal for `userId`, at most `timeoutMs`, or until `signal` aborts. */
  wait(userId: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitOutcome>;
  /** Calls `fn` when bootstrap committed a change (and after a reconnect: one may have been missed). */
  onLayout(fn: () => void): () => void;
  /** Users with a subscriber, and subscribers in all (for tests and status). */
  size(): { users: number; subscribers: number };
  close(): Promise<void>;
}

/** A feed that fans signals out to subscribers; `deliver` and `reset` feed it. */
export function createFanOut(): CommitFeed & { deliver(userId: string, bundleSeq: number, page?: PageLoader): void; layoutChanged(): void; reset(): void; listener: Listener | undefined } {
  const byUser = new Map<string, Set<CommitSignal>>();
  const layoutListeners = new Set<() => void>();
  let subscribers = 0;
  /** Pushes of a user this process is committing, and the highest signal held back meanwhile. */
  const inFlight = new Map<string, number>();
  const held = new Map<string, number>();
  const fanOut = (userId: string, bundleSeq: number, page?: PageLoader, committedBy?: string) => {
    for (const fn of [...(byUser.get(userId) ?? [])]) fn(bundleSeq, page, committedBy);
  };
  const feed = {
    listener: undefined as Listener | undefined,
    get listening() {
      return feed.listener?.listening ?? false;
    },
    subscribe(userId: string, fn: CommitSignal) {
      let set = byUser.get(userId);
      if (!set) byUser.set(userId, (set = new Set()));
      set.add(fn);
      subscribers++;
      return () => {
        if (set.delete(fn)) subscribers--;
        if (set.size === 0 && byUser.get(userId) === set) byUser.delete(userId);
      };
    },
    wait(userId: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitOutcome> {
      if (signal?.aborted) return Promise.resolve('aborted');
      return new Promise<WaitOutcome>((resolve) => {
        const done = (outcome: WaitOutcome) => {
          clearTimeout(timer);
          unsubscribe();
          signal?.removeEventListener('abort', onAbort);
          resolve(outcome);
        };
        const onAbort = () => done('aborted');
        const unsubscribe = feed.subscribe(userId, () => done('signalled'));
        const timer = setTimeout(() => done('timeout'), Math.max(0, timeoutMs));
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    },
    deliver(userId: string, bundleSeq: number, page?: PageLoader) {
      if (!page && inFlight.has(userId)) {
        held.set(userId, Math.max(held.get(userId) ?? bundleSeq, bundleSeq));
        return;
      }
      fanOut(userId, bundleSeq, page);
    },
    announce(userId: string, bundleSeq: number, page?: PageLoader, committedBy?: string) {
      fanOut(userId, bundleSeq, page, committedBy);
    },
    committing(userId: string) {
      inFlight.set(userId, (inFlight.get(userId) ?? 0) + 1);
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        const left = (inFlight.get(userId) ?? 1) - 1;
        if (left > 0) return void inFlight.set(userId, left);
        inFlight.delete(userId);
        const seq = held.get(userId);
        held.delete(userId);
        if (seq !== undefined) fanOut(userId, seq);
      };
    },
    onLayout(fn: () => void) {
      layoutListeners.add(fn);
      return () => void layoutListeners.delete(fn);
    },
    layoutChanged() {
      for (const fn of [...layoutListeners]) fn();
    },
    reset() {
      for (const set of [...byUser.values()]) for (const fn of [...set]) fn(null);
      feed.layoutChanged();
    },
    size: () => ({ users: byUser.size, subscribers }),
    async close() {
      await feed.listener?.close();
    },
  };
  return feed;
}

/** Starts the feed on its own connection (a direct URL: LISTEN does not survive a transaction pooler). */
export async function startCommitFeed(connectionString: string): Promise<CommitFeed> {
  const feed = createFanOut();
  feed.listener = await listen({
    connectionString,
    channel: COMMIT_CHANNEL,
    moreChannels: [LAYOUT_CHANNEL],
    onMessage(payload, channel) {
      if (channel === LAYOUT_CHANNEL) return feed.layoutChanged();
      let parsed: { user_id?: unknown; bundle_seq?: unknown };
      try {
        parsed = JSON.parse(payload) as typeof parsed;
      } catch {
        return;
      }
      if (typeof parsed.user_id === 'string' && typeof parsed.bundle_seq === 'number') feed.deliver(parsed.user_id, parsed.bundle_seq);
    },
    onReset: () => feed.reset(),
  });
  return feed;
}
