/**
 * Issue 26 item 3: the pool is shared fairly among the users who are using it. Orders and counts
 * only, never times: with the pool full of two heavy users' work, a third user's request is
 * served before either heavy user's next queued request; a user's in-flight part shrinks as more
 * users wait; the unauthenticated routes hold their own fixed place and never a user's.
 */
import { describe, expect, it } from 'vitest';
import { ANONYMOUS_OWNER, PoolShare } from '../core/db/index.js';
import { SyncError } from '../core/errors.js';

const LONG = 60_000;

/** Starts an acquire and records the order in which grants arrive. */
function tracker(share: PoolShare) {
  const order: string[] = [];
  const releases = new Map<string, Array<() => void>>();
  const start = (owner: string, label = owner): Promise<void> =>
    share.acquire(owner, LONG).then((release) => {
      order.push(label);
      releases.set(owner, [...(releases.get(owner) ?? []), release]);
    });
  const release = (owner: string): void => {
    const list = releases.get(owner) ?? [];
    (list.shift() as () => void)();
  };
  return { order, start, release };
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('fair share of the pool among waiting users', () => {
  it("with the pool full of two users' work, the third user is served before either heavy user's next request", async () => {
    const share = new PoolShare(2, 4);
    const t = tracker(share);
    for (const owner of ['a', 'a', 'b', 'b']) await t.start(owner);
    expect(t.order).toEqual(['a', 'a', 'b', 'b']);
    // Both heavy users queue more work, then the victim asks once.
    const queued = [t.start('a', 'a3'), t.start('b', 'b3'), t.start('a', 'a4'), t.start('b', 'b4'), t.start('c', 'c1')];
    await settle();
    expect(t.order).toHaveLength(4);
    t.release('a');
    await settle();
    expect(t.order.slice(4)).toEqual(['c1']);
    // Three users active: each may hold floor(4 / 3) = 1. b holds 2, a holds 1: the next place
    // freed by b stays with a's turn only once a is under its part.
    t.release('b');
    await settle();
    t.release('b');
    await settle();
    // a (1 held) and b (0 held) take turns in the order they first waited: a3 was first in line,
    // but a is at its part (1); b is not.
    expect(t.order.slice(5)).toEqual(['b3']);
    // One place is free, but each active user holds its part (1). When the victim leaves, the
    // heavy users' parts grow back to 2 and they take turns again.
    t.release('c');
    await settle();
    expect(t.order.slice(6)).toEqual(['a3', 'b4']);
    t.release('b');
    await settle();
    expect(t.order.slice(8)).toEqual([]);
    t.release('a');
    await settle();
    expect(t.order.slice(8)).toEqual(['a4']);
    await Promise.all(queued);
  });

  it("a user's part shrinks as more users are active and grows back when they leave", async () => {
    const share = new PoolShare(4, 6);
    expect(share.capOf('a')).toBe(4);
    const t = tracker(share);
    await t.start('a');
    expect(share.capOf('b')).toBe(3);
    await t.start('b');
    await t.start('c');
    expect(share.capOf('a')).toBe(2);
    expect(share.capOf('d')).toBe(1);
    t.release('b');
    t.release('c');
    expect(share.capOf('a')).toBe(4);
  });

  it('each waiting user gets a turn: round robin over users, not over requests', async () => {
    const share = new PoolShare(1, 1);
    const t = tracker(share);
    await t.start('a', 'a0');
    const queued = [t.start('a', 'a1'), t.start('a', 'a2'), t.start('a', 'a3'), t.start('b', 'b1'), t.start('c', 'c1'), t.start('b', 'b2')];
    for (let i = 0; i < queued.length; i++) {
      const last = t.order.at(-1) as string;
      t.release(last[0] as string);
      await settle();
    }
    await Promise.all(queued);
    expect(t.order).toEqual(['a0', 'a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
  });

  it('the unauthenticated routes hold their one place and never take a user\'s part', async () => {
    const share = new PoolShare(2, 4, new Map([[ANONYMOUS_OWNER, 1]]));
    const t = tracker(share);
    await t.start(ANONYMOUS_OWNER, 'anon1');
    const flood = Array.from({ length: 31 }, (_, i) => t.start(ANONYMOUS_OWNER, `anon${i + 2}`));
    await settle();
    expect(share.heldBy(ANONYMOUS_OWNER)).toBe(1);
    // The users still have the other three places.
    await t.start('u');
    await t.start('u');
    await t.start('v');
    expect(t.order).toEqual(['anon1', 'u', 'u', 'v']);
    t.release(ANONYMOUS_OWNER);
    await settle();
    expect(share.heldBy(ANONYMOUS_OWNER)).toBe(1);
    expect(t.order.at(-1)).toBe('anon2');
    for (let i = 0; i < 30; i++) {
      t.release(ANONYMOUS_OWNER);
      await settle();
    }
    await Promise.all(flood);
  });

  it('a wait beyond the bound is 429 rate_limited, and leaves the queue as it was', async () => {
    const share = new PoolShare(1, 2);
    const t = tracker(share);
    await t.start('a');
    const error = await share.acquire('a', 0).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SyncError);
    expect((error as SyncError).code).toBe('rate_limited');
    await t.start('b');
    expect(t.order).toEqual(['a', 'b']);
  });
});
