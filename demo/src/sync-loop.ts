/**
 * When the demo syncs, and what it shows about it. Local reads and writes never wait for this.
 *
 *   write (debounced 300 ms) ─┐
 *   `online` event ───────────┼─▶ syncNow(): attach if needed → sync() → state → onChange
 *   watch() says changed ─────┤        │ failure: lastError, retry with backoff (1 s … 30 s)
 *   every 60 s, "Sync now" ───┘        ▼
 *                                 watch loop: long poll while online and attached
 *
 * Only the tab that owns the database (see client-web/browser/worker-host.ts) runs the loops;
 * the others follow its change events. Every sync is one call at a time: a request made while a
 * sync runs schedules one more after it.
 */
import type { WorkerSyncClient } from '../../client-web/browser/worker-client.js';

export interface SyncState {
  /** This device holds the user's data (attach succeeded, now or in an earlier session). */
  attached: boolean;
  syncing: boolean;
  /** The last sync reached the server. False after a network failure until one succeeds. */
  reachable: boolean;
  lastSyncedAt: number | null;
  lastError: string | null;
  /** Conflicts resolved by the tables' policies (server wins) since the app started. */
  conflictsResolved: number;
  /** The server's refusal of the frozen bundle, until discarded. */
  rejected: { readonly code: string; readonly message: string } | null;
  /** How the first attach of this device went, e.g. remote_authoritative with N rows hydrated. */
  attachNote: string | null;
}

export interface SyncLoopDeps {
  readonly client: WorkerSyncClient;
  readonly userId: string;
  /** Whether this tab runs the loops (it owns the database). */
  readonly isActive: () => boolean;
  /** Gets a fresh token after the server refused the current one. */
  readonly refreshToken: () => Promise<void>;
  readonly onChange: (state: Readonly<SyncState>) => void;
}

const WRITE_DEBOUNCE_MS = 300;
const PERIODIC_SYNC_MS = 60_000;
const RETRY_MAX_MS = 30_000;

const errorCode = (error: unknown): string => (typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : 'error');
const errorText = (error: unknown): string => `${errorCode(error)}: ${error instanceof Error ? error.message : String(error)}`;

export class SyncLoop {
  readonly state: SyncState = {
    attached: false,
    syncing: false,
    reachable: true,
    lastSyncedAt: null,
    lastError: null,
    conflictsResolved: 0,
    rejected: null,
    attachNote: null,
  };
  private timer: ReturnType<typeof setTimeout> | undefined;
  private periodic: ReturnType<typeof setInterval> | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private failures = 0;
  private watchAbort: AbortController | undefined;
  private wakeWatch: (() => void) | undefined;
  private readonly onOnline = () => {
    this.state.reachable = true;
    this.failures = 0;
    this.emit();
    this.request(0);
  };
  private readonly onOffline = () => {
    this.watchAbort?.abort();
    this.emit();
  };

  constructor(private readonly deps: SyncLoopDeps) {}

  /** Reads the durable state (attached? rejected?), then starts syncing and watching. */
  async start(): Promise<void> {
    const status = await this.deps.client.pendingStatus();
    this.state.attached = status.attachedUserId === this.deps.userId;
    this.state.rejected = status.rejected;
    this.emit();
    addEventListener('online', this.onOnline);
    addEventListener('offline', this.onOffline);
    this.periodic = setInterval(() => this.request(0), PERIODIC_SYNC_MS);
    this.request(0);
    void this.watchLoop();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.periodic);
    removeEventListener('online', this.onOnline);
    removeEventListener('offline', this.onOffline);
    this.watchAbort?.abort();
    this.wakeWatch?.();
  }

  /** Schedules a sync; a later request within the delay replaces this one (debounce). */
  request(delayMs = WRITE_DEBOUNCE_MS): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.syncNow();
    }, delayMs);
  }

  /** Syncs now, or once more right after the sync that is running. */
  syncNow(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.cycle().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        this.request(0);
      }
    });
    return this.running;
  }

  /** Drops the rejected bundle; the next sync restores the server's rows. */
  async discardRejected(): Promise<void> {
    await this.deps.client.discardRejected();
    this.state.rejected = null;
    this.emit();
    await this.syncNow();
  }

  private emit(): void {
    this.deps.onChange(this.state);
  }

  private async cycle(): Promise<void> {
    if (this.stopped || !this.deps.isActive() || !navigator.onLine) return;
    this.state.syncing = true;
    this.emit();
    try {
      if (!this.state.attached && !(await this.attach())) return;
      const result = await this.deps.client.sync();
      if (result.push.status === 'committed' || result.push.status === 'resolved_without_commit') {
        this.state.conflictsResolved += result.push.conflictsResolved;
      }
      this.state.rejected = result.push.status === 'rejected' ? { code: result.push.code, message: result.push.message } : null;
      if (!this.state.rejected) this.state.lastSyncedAt = Date.now();
      this.state.lastError = null;
      this.state.reachable = true;
      this.failures = 0;
      this.wakeWatch?.();
    } catch (error) {
      await this.recover(error);
    } finally {
      this.state.syncing = false;
      this.emit();
    }
  }

  /** Attaches this device to the user: hydrates it, or pushes what was written before. */
  private async attach(): Promise<boolean> {
    const result = await this.deps.client.attach(this.deps.userId);
    if (result.status === 'retry_later') {
      this.state.attachNote = `the server is initializing this user; retrying in ${Math.ceil(result.retryAfterMs / 1000)} s`;
      this.request(result.retryAfterMs);
      return false;
    }
    this.state.attached = true;
    this.state.attachNote = `${result.resolution.replaceAll('_', ' ')}${result.hydratedRows ? `: ${result.hydratedRows} rows hydrated` : ''}`;
    return true;
  }

  private async recover(error: unknown): Promise<void> {
    const code = errorCode(error);
    this.state.lastError = errorText(error);
    if (code === 'network_error') this.state.reachable = false;
    this.failures++;
    try {
      if (code === 'authentication_failed') await this.deps.refreshToken();
      // The server refused this device's source: rebuilding rotates to a new one and keeps every local change.
      if (code === 'source_recovery_required') await this.deps.client.rebuild();
    } catch (second) {
      this.state.lastError = errorText(second);
    }
    this.request(Math.min(RETRY_MAX_MS, 1000 * 2 ** (this.failures - 1)));
  }

  /** Long polls for other devices' commits while this tab can sync; otherwise naps. */
  private async watchLoop(): Promise<void> {
    while (!this.stopped) {
      if (!this.deps.isActive() || !navigator.onLine || !this.state.attached || !this.state.reachable || this.state.rejected) {
        await this.nap(5000);
        continue;
      }
      const abort = new AbortController();
      this.watchAbort = abort;
      try {
        const answer = await this.deps.client.watch(abort.signal);
        if (answer.changed) await this.syncNow();
      } catch (error) {
        // An abort (going offline, stopping) restarts the loop at once; anything else waits.
        if (!abort.signal.aborted) await this.nap(Math.min(RETRY_MAX_MS, 2000 * 2 ** Math.min(this.failures, 4)));
      } finally {
        this.watchAbort = undefined;
      }
    }
  }

  /** Waits `ms`, or less when a sync succeeds (watching can resume). */
  private nap(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeWatch = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeWatch = done;
    });
  }
}
