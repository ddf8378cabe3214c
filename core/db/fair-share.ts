/**
 * Fair sharing of one container's pool among the users who are using it (issue 26 item 3: with a
 * fixed share per user, two heavy users held the whole pool and a third waited behind them).
 *
 * Every request takes a place here before it takes a pooled connection; at most `capacity` places
 * (the pool's size) are held at once, so the pool itself never queues. A user's cap is the
 * smaller of `perOwner` (the configured share) and an equal part of the pool among the *active*
 * users (those holding or waiting for a place): as more users wait, each one's in-flight share
 * shrinks. When a place frees, the waiting users take turns (round robin over users, each user's
 * own requests in arrival order), skipping users at their cap: a user who holds nothing is served
 * before the next request of a user who holds its part already. Places are never taken back from a
 * running request, so a newcomer waits for at most the next place that frees.
 *
 * Some owners have a fixed cap whatever the others do (the unauthenticated routes share one
 * place: ANONYMOUS_OWNER). A wait longer than the caller's bound answers 429 rate_limited.
 * In-process only: each Lambda container has its own (README, "One user cannot hurt the others").
 */
import { SyncError } from '../errors.js';

/** The owner the unauthenticated routes (`/syncx/status`, health) share their place under. */
export const ANONYMOUS_OWNER = '\u0000anonymous';

interface Waiter {
  readonly grant: () => void;
}

export class PoolShare {
  private readonly held = new Map<string, number>();
  /** Each owner's waiting requests, oldest first. */
  private readonly waiting = new Map<string, Waiter[]>();
  /** Owners with waiting requests, in the order they get their next turn. */
  private readonly turns: string[] = [];
  private inUse = 0;

  /**
   * @param perOwner the most places one user holds, whoever else is active
   * @param capacity places in all (the pool's size); Infinity: only `perOwner` applies
   * @param fixedCaps owners whose cap does not depend on the others (and who do not count as active users)
   */
  constructor(
    readonly perOwner: number,
    readonly capacity: number = Infinity,
    private readonly fixedCaps: ReadonlyMap<string, number> = new Map(),
  ) {}

  /** The most places `owner` may hold now. */
  capOf(owner: string): number {
    const fixed = this.fixedCaps.get(owner);
    if (fixed !== undefined) return fixed;
    if (!Number.isFinite(this.capacity)) return this.perOwner;
    const active = new Set([owner]);
    for (const o of this.held.keys()) if (!this.fixedCaps.has(o)) active.add(o);
    for (const o of this.waiting.keys()) if (!this.fixedCaps.has(o)) active.add(o);
    const reserved = [...this.fixedCaps.values()].reduce((a, b) => a + b, 0);
    return Math.max(1, Math.min(this.perOwner, Math.floor(Math.max(1, this.capacity - reserved) / active.size)));
  }

  /** Places `owner` holds now (tests and diagnostics). */
  heldBy(owner: string): number {
    return this.held.get(owner) ?? 0;
  }

  /** Takes a place for `owner`, waiting at most `timeoutMs`; returns the function that gives it back. */
  async acquire(owner: string, timeoutMs: number): Promise<() => void> {
    if (!this.waiting.has(owner) && this.canTake(owner)) {
      this.take(owner);
      return this.releaser(owner);
    }
    await new Promise<void>((resolve, reject) => {
      let granted = false;
      const waiter: Waiter = {
        grant: () => {
          granted = true;
          clearTimeout(timer);
          resolve();
        },
      };
      const queue = this.waiting.get(owner) ?? [];
      if (queue.length === 0) {
        this.waiting.set(owner, queue);
        if (!this.turns.includes(owner)) this.turns.push(owner);
      }
      queue.push(waiter);
      const timer = setTimeout(() => {
        if (granted) return;
        queue.splice(queue.indexOf(waiter), 1);
        if (queue.length === 0) this.forgetWaiting(owner);
        // The others' caps may have grown now that this owner is no longer active.
        this.dispatch();
        reject(new SyncError('rate_limited', `this user's requests already hold their share of the database connections (${this.capOf(owner)} now); retry later`,
          { limit: 'pool_share_per_user' }, 1));
      }, Math.max(0, timeoutMs));
      // A place may be free already (this owner was only behind its own earlier waiters).
      this.dispatch();
    });
    return this.releaser(owner);
  }

  private canTake(owner: string): boolean {
    return this.inUse < this.capacity && (this.held.get(owner) ?? 0) < this.capOf(owner);
  }

  private take(owner: string): void {
    this.held.set(owner, (this.held.get(owner) ?? 0) + 1);
    this.inUse++;
  }

  private forgetWaiting(owner: string): void {
    this.waiting.delete(owner);
    const at = this.turns.indexOf(owner);
    if (at >= 0) this.turns.splice(at, 1);
  }

  /** Hands free places to waiting owners in turn, skipping those at their cap. */
  private dispatch(): void {
    for (;;) {
      const at = this.turns.findIndex((o) => this.canTake(o));
      if (at < 0) return;
      const owner = this.turns[at] as string;
      const queue = this.waiting.get(owner) as Waiter[];
      const next = queue.shift() as Waiter;
      this.take(owner);
      // This owner's next request goes to the back of the turns.
      this.turns.splice(at, 1);
      if (queue.length === 0) this.waiting.delete(owner);
      else this.turns.push(owner);
      next.grant();
    }
  }

  private releaser(owner: string): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const have = (this.held.get(owner) ?? 1) - 1;
      if (have <= 0) this.held.delete(owner);
      else this.held.set(owner, have);
      this.inUse--;
      this.dispatch();
    };
  }
}
