/**
 * The sync loop every offline-first app needs, in the library (`client.start()`): when to sync,
 * and what the app shows about it (`onStatus`). Local reads and writes never wait for it.
 *
 *   local write (debounced) ─┐
 *   wake source says changed ─┤                        ┌─ ok ──────────────▶ idle
 *   `online`, visible again ──┼─▶ attach if needed ─▶ sync() ─ may pass (503, offline server) ─▶ backoff ─┐
 *   every periodMs, request ──┘        ▲                └─ needs a change (rejected, refused) ─▶ needs_attention
 *                                      └────────────── timer (full jitter, 1 s … 60 s) ◀────────────────┘
 *
 * One sync at a time: a trigger during a sync runs one more after it. While the environment
 * reports no network the loop rests (`offline`) and the wake source is stopped; `online` resets
 * the backoff and syncs at once. The wake source (wake.ts) runs while the loop runs, the device is
 * attached and the network is up; when one of its waits fails, the loop syncs, so a server
 * outage shows as `backoff` with its error even when nothing is pending. The status is never
 * `idle` before a sync answered: `start()` reports `syncing` (or `offline`), and a device
 * without a user to attach `needs_attention` (`not_attached`).
 */
import { type AttachResult, type LoopEnvironment, type PendingStatus, type RebuildResult, type StartOptions, type SyncPhase, type SyncResult, type SyncStatus } from './api.js';
import { errorCodeOf, isRetriableCode, type SyncErrorCode } from './errors.js';
import { type WakeSource } from './wake.js';

/** What the loop drives: the client's own operations. */
export interface LoopClient {
  pendingStatus(): Promise<PendingStatus>;
  attach(userId: string): Promise<AttachResult>;
  sync(): Promise<SyncResult>;
  rebuild(): Promise<RebuildResult>;
}

/**
 * Starts the configured wake source (null when watch mode is off); `afterNextSync`, `waitFailed`
 * and `syncing` are the loop's.
 */
export type StartWakeSource = (wake: () => void, afterNextSync: () => Promise<void>, waitFailed: (error: unknown) => void, syncing: () => boolean) => WakeSource | null;

/**
 * The debounce only gathers writes that come in a burst (one handler's several statements): a sync
 * in flight already gathers whatever is written meanwhile into the next one, so a longer quiet
 * period would only hold every write back from the other devices (bench/propagation.ts: 300 ms of
 * debounce were 90 % of a write's way to another device).
 */
const DEFAULTS = { debounceMs: 25, periodicMs: 60_000, backoff: { baseMs: 1000, maxMs: 60_000 } } as const;
const noop = () => undefined;

/** The global scope's network and visibility signals (a window or a worker); quiet under Node. */
export function globalEnvironment(): LoopEnvironment {
  const g = globalThis as unknown as {
    navigator?: { onLine?: boolean };
    addEventListener?: (type: string, listener: () => void) => void;
    removeEventListener?: (type: string, listener: () => void) => void;
    document?: { visibilityState?: string; addEventListener(type: string, l: () => void): void; removeEventListener(type: string, l: () => void): void };
  };
  const on = (type: string) => (listener: () => void) => {
    if (!g.addEventListener || !g.removeEventListener) return noop;
    g.addEventListener(type, listener);
    return () => g.removeEventListener?.(type, listener);
  };
  return {
    isOnline: () => g.navigator?.onLine ?? true,
    onOnline: on('online'),
    onOffline: on('offline'),
    onVisible: (listener) => {
      const d = g.document;
      if (!d) return noop;
      const handler = () => d.visibilityState === 'visible' && listener();
      d.addEventListener('visibilitychange', handler);
      return () => d.removeEventListener('visibilitychange', handler);
    },
  };
}

export class SyncLoop {
  private options: StartOptions = {};
  private running = false;
  private cycleInFlight: Promise<void> | null = null;
  private again = false;
  /** The next cycle: a timer, or (due at once) a microtask that runs it unless cancelled first. */
  private timer: ReturnType<typeof setTimeout> | { readonly now: true } | undefined;
  private dueAt = Infinity;
  private periodic: ReturnType<typeof setInterval> | undefined;
  private failures = 0;
  private wakeSource: WakeSource | null = null;
  private unsubscribe: (() => void)[] = [];
  private waiters: (() => void)[] = [];
  private readonly listeners = new Set<(status: SyncStatus) => void>();
  private current: SyncStatus = {
    phase: 'stopped',
    attachedUserId: null,
    pendingRows: 0,
    quarantinedRows: 0,
    checkpoint: 0,
    lastError: null,
    lastSyncedAt: null,
    nextAttemptAt: null,
    rejected: null,
    conflictsResolved: 0,
    attach: null,
  };

  constructor(
    private readonly client: LoopClient,
    private readonly startWakeSource: StartWakeSource,
  ) {}

  get status(): SyncStatus {
    return this.current;
  }

  private get env(): LoopEnvironment {
    return this.options.environment ?? globalEnvironment();
  }

  onStatus(listener: (status: SyncStatus) => void): () => void {
    this.listeners.add(listener);
    listener(this.current);
    return () => this.listeners.delete(listener);
  }

  private update(changes: Partial<SyncStatus>): void {
    this.current = { ...this.current, ...changes };
    for (const listener of this.listeners) listener(this.current);
  }

  /** Reads the device's counts into the status (and emits it). */
  private async refresh(phase?: SyncPhase): Promise<void> {
    const s = await this.client.pendingStatus();
    this.update({
      ...(phase ? { phase } : {}),
      attachedUserId: s.attachedUserId,
      pendingRows: s.dirtyRows + s.frozenRows,
      quarantinedRows: s.quarantinedRows,
      checkpoint: s.checkpoint,
      rejected: s.rejected,
    });
  }

  start(options: StartOptions = {}): void {
    this.options = options;
    if (this.running) return this.schedule(0);
    this.running = true;
    const env = this.env;
    this.unsubscribe = [
      env.onOnline(() => {
        this.failures = 0;
        this.schedule(0, 'force');
      }),
      env.onOffline(() => {
        this.stopWakeSource();
        if (!this.cycleInFlight) this.update({ phase: 'offline' });
      }),
      env.onVisible(() => this.schedule(0)),
    ];
    const periodicMs = options.periodicMs ?? DEFAULTS.periodicMs;
    if (periodicMs > 0) this.periodic = setInterval(() => this.current.phase === 'idle' && this.schedule(0), periodicMs);
    // A cycle is due at once: until it answers nothing is known, so the status is not `idle`.
    this.update({ phase: env.isOnline() ? 'syncing' : 'offline', conflictsResolved: 0 });
    this.schedule(0);
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.cancelTimer();
    this.dueAt = Infinity;
    clearInterval(this.periodic);
    for (const off of this.unsubscribe.splice(0)) off();
    this.stopWakeSource();
    await this.cycleInFlight;
    this.update({ phase: 'stopped', nextAttemptAt: null });
  }

  /** A local write happened: sync after a quiet moment (never earlier than a backoff allows). */
  localWrite(): void {
    if (this.current.phase === 'backoff') return;
    this.schedule(this.options.debounceMs ?? DEFAULTS.debounceMs, 'debounce');
  }

  /**
   * The attachment changed outside the loop (an attach or a detach by the app): the wake source
   * belonged to the old state, and the next cycle decides afresh.
   */
  attachmentChanged(): void {
    this.stopWakeSource();
    this.schedule(0, 'force');
  }

  /** The app asks for a sync now (a "sync now" button, writes through another handle): it cuts a backoff short. */
  requestSync(): void {
    this.schedule(0, 'force');
  }

  /**
   * Schedules a cycle in `delayMs`. `earliest` keeps a cycle already due sooner and never cuts a
   * backoff short; `debounce` restarts the quiet period of local writes; `force` runs at the given
   * time whatever is scheduled (the network came back).
   */
  private schedule(delayMs: number, mode: 'earliest' | 'debounce' | 'force' = 'earliest'): void {
    if (!this.running) return;
    if (this.cycleInFlight) {
      this.again = true;
      return;
    }
    const due = Date.now() + delayMs;
    if (mode === 'earliest' && this.timer !== undefined && (this.dueAt <= due || this.current.phase === 'backoff')) return;
    this.setTimer(delayMs);
  }

  private cancelTimer(): void {
    // A browser's timer is a number, Node's an object: only the microtask token has `now`.
    const timer = this.timer;
    if (timer !== undefined && !(typeof timer === 'object' && 'now' in timer)) clearTimeout(timer);
    this.timer = undefined;
  }

  private setTimer(delayMs: number): void {
    this.cancelTimer();
    this.dueAt = Date.now() + delayMs;
    const fire = () => {
      this.timer = undefined;
      this.dueAt = Infinity;
      void this.runCycle();
    };
    if (delayMs > 0) {
      this.timer = setTimeout(fire, delayMs);
      return;
    }
    // Due now: the cycle starts before the events already queued (the app's own reads right after
    // its write, a tab's live queries), so a write is on its way to the server first.
    const token = { now: true } as const;
    this.timer = token;
    queueMicrotask(() => {
      if (this.timer === token) fire();
    });
  }

  private afterNextSync = (): Promise<void> => new Promise((resolve) => this.waiters.push(resolve));

  private async runCycle(): Promise<void> {
    if (!this.running || this.cycleInFlight) return;
    this.cycleInFlight = this.cycle();
    try {
      await this.cycleInFlight;
    } finally {
      this.cycleInFlight = null;
      for (const resolve of this.waiters.splice(0)) resolve();
    }
    if (this.again) {
      this.again = false;
      if (this.current.phase !== 'backoff' && this.current.phase !== 'offline') this.schedule(this.options.debounceMs ?? DEFAULTS.debounceMs);
    }
  }

  private async cycle(): Promise<void> {
    if (!this.env.isOnline()) {
      this.stopWakeSource();
      await this.refresh('offline').catch(noop);
      return;
    }
    this.update({ phase: 'syncing', nextAttemptAt: null });
    try {
      if (!(await this.ensureAttached())) return;
      const result = await this.client.sync();
      const push = result.push;
      if (push.status === 'committed' || push.status === 'resolved_without_commit') {
        this.update({ conflictsResolved: this.current.conflictsResolved + push.conflictsResolved });
      }
      this.failures = 0;
      if (push.status === 'rejected') {
        this.update({ lastError: { code: push.code, message: push.message } });
        await this.refresh('needs_attention');
      } else {
        this.update({ lastError: null, lastSyncedAt: Date.now() });
        await this.refresh('idle');
      }
      this.ensureWakeSource();
    } catch (error) {
      await this.failed(error);
    }
  }

  /** Attaches the configured user when the database is not attached; false when it cannot yet. */
  private async ensureAttached(): Promise<boolean> {
    const status = await this.client.pendingStatus();
    if (status.attachedUserId !== null) return true;
    const userId = this.options.userId;
    if (!userId) {
      // Nothing syncs without a user, and waiting does not bring one: the app attaches (or
      // passes userId to start), which runs the loop again.
      this.update({ lastError: { code: 'not_attached', message: 'no user is attached: call attach(userId) or pass userId to start()' } });
      await this.refresh('needs_attention');
      return false;
    }
    const result = await this.client.attach(userId);
    this.update({ attach: result });
    if (result.status === 'retry_later') {
      if (result.reason === 'server_schema_behind') {
        this.update({ lastError: { code: 'server_schema_behind', message: 'the server does not publish yet a table or column this app version declares; waiting for its deploy' } });
      }
      await this.refresh('backoff');
      this.retryIn(result.retryAfterMs);
      return false;
    }
    return true;
  }

  private async failed(error: unknown): Promise<void> {
    const code: SyncErrorCode | 'unknown' = errorCodeOf(error) ?? 'unknown';
    this.update({ lastError: { code, message: error instanceof Error ? error.message : String(error) } });
    if (code === 'source_recovery_required' && this.options.recoverSource) {
      try {
        // The app chose automatic source recovery: rotate now and sync again.
        await this.client.rebuild();
        this.schedule(0);
        await this.refresh('idle').catch(noop);
        return;
      } catch (second) {
        return this.failed(second);
      }
    }
    if (code !== 'unknown' && isRetriableCode(code)) {
      this.stopWakeSource();
      this.failures++;
      const { baseMs, maxMs } = this.options.backoff ?? DEFAULTS.backoff;
      const ceiling = Math.min(maxMs, baseMs * 2 ** (this.failures - 1));
      await this.refresh('backoff').catch(() => this.update({ phase: 'backoff' }));
      this.retryIn(Math.max(baseMs / 2, Math.floor(Math.random() * ceiling)));
      return;
    }
    // Waiting does not cure it: the next write or request tries again.
    await this.refresh('needs_attention').catch(() => this.update({ phase: 'needs_attention' }));
  }

  private retryIn(delayMs: number): void {
    this.update({ nextAttemptAt: Date.now() + delayMs });
    this.setTimer(delayMs);
  }

  private ensureWakeSource(): void {
    if (this.wakeSource || !this.running || !this.env.isOnline()) return;
    // A wake-up never cuts a backoff short (the source stops during one anyway). A failed wait
    // while idle syncs: the watch alone cannot tell an outage from a quiet server, a sync can.
    this.wakeSource = this.startWakeSource(() => this.schedule(0), this.afterNextSync, () => {
      if (this.current.phase === 'idle') this.schedule(0);
    }, () => this.cycleInFlight !== null);
  }

  private stopWakeSource(): void {
    this.wakeSource?.stop();
    this.wakeSource = null;
  }
}
