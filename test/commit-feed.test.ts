/**
 * The commit feed's fan-out (core/sync/notify/commit-feed.ts): a push this process is committing
 * holds PostgreSQL's plain signal of the user back until the commit's own announcement (with its
 * pull page) went out, so a socket hears the page first; other users' signals are not held.
 */
import { describe, expect, it } from 'vitest';
import { createFanOut, type PageLoader } from '../core/sync/notify/commit-feed.js';

describe('commit feed fan-out', () => {
  it('holds the plain signal of a user while this process commits for them, until the announcement went out', () => {
    const feed = createFanOut();
    const heard: Array<[string, number | null, boolean]> = [];
    feed.subscribe('u', (seq, page) => heard.push(['u', seq, page !== undefined]));
    feed.subscribe('v', (seq, page) => heard.push(['v', seq, page !== undefined]));
    const page: PageLoader = () => Promise.resolve(null);
    const done = feed.committing('u');
    feed.deliver('u', 5);
    feed.deliver('v', 9);
    expect(heard).toEqual([['v', 9, false]]);
    feed.announce('u', 5, page);
    expect(heard).toEqual([['v', 9, false], ['u', 5, true]]);
    done();
    done();
    expect(heard).toEqual([['v', 9, false], ['u', 5, true], ['u', 5, false]]);
    feed.deliver('u', 6);
    expect(heard.at(-1)).toEqual(['u', 6, false]);
  });
});
