/**
 * Pages asked for ahead (client-web/pages-ahead.ts): where the guesses go after a full or a short
 * page, that each page is asked for once, and that a page no longer wanted has its request aborted.
 */
import { describe, expect, it } from 'vitest';
import { type ClientLimits } from '../client-web/context.js';
import { PagesAhead, pagesAfter } from '../client-web/pages-ahead.js';
import { pullPageBundles } from '../client-web/pull.js';

/** A fetch whose requests stay open until answered by hand or aborted. */
function openRequests() {
  const asked: { at: number; signal: AbortSignal; answer: (page: string) => void }[] = [];
  const pages = new PagesAhead<string>((at, signal) => new Promise((resolve, reject) => {
    asked.push({ at, signal, answer: resolve });
    signal.addEventListener('abort', () => reject(new Error(`aborted ${at}`)), { once: true });
  }));
  return { asked, pages };
}

describe('pages asked for ahead', () => {
  it('after a full page, the next ones where full pages start, short of the end; after a short page only the next', () => {
    expect(pagesAfter(10, true, 5, 3, 100)).toEqual([10, 15, 20]);
    expect(pagesAfter(10, true, 5, 3, 21)).toEqual([10, 15, 20]);
    expect(pagesAfter(10, true, 5, 3, 20)).toEqual([10, 15]);
    expect(pagesAfter(10, false, 5, 3, 100)).toEqual([10]);
    expect(pagesAfter(10, true, 5, 1, 100)).toEqual([10]);
    expect(pagesAfter(10, true, 5, 3, 10)).toEqual([]);
  });

  it('asks for each page once, hands over the one asked for ahead, and aborts those no longer wanted', async () => {
    const { asked, pages } = openRequests();
    const first = pages.take(0);
    pages.keep([5, 10, 15]);
    expect(asked.map((r) => r.at)).toEqual([0, 5, 10, 15]);
    asked[0]?.answer('page 0');
    expect(await first).toEqual({ page: 'page 0' });
    // The page at 5 came back short (ending at 7): the guesses at 10 and 15 are abandoned.
    const second = pages.take(5);
    pages.keep([7]);
    expect(asked.map((r) => r.at)).toEqual([0, 5, 10, 15, 7]);
    expect(asked.filter((r) => r.signal.aborted).map((r) => r.at)).toEqual([10, 15]);
    asked[1]?.answer('page 5');
    expect(await second).toEqual({ page: 'page 5' });
    // Taking the page asked for ahead sends nothing new; abandon() aborts what is left.
    expect(pages.has(7)).toBe(true);
    const third = pages.take(7);
    expect(asked).toHaveLength(5);
    pages.keep([12]);
    pages.abandon();
    expect(asked.at(-1)?.signal.aborted).toBe(true);
    expect(pages.has(12)).toBe(false);
    asked[4]?.answer('page 7');
    expect(await third).toEqual({ page: 'page 7' });
  });

  it('a failed request is an outcome, never an unhandled rejection', async () => {
    const pages = new PagesAhead<string>(async (at) => {
      throw new Error(`no page at ${at}`);
    });
    pages.keep([3, 6]);
    pages.abandon();
    const taken = await pages.take(9);
    expect('error' in taken && String(taken.error)).toBe('Error: no page at 9');
  });
});

describe('the size of a pull page', () => {
  const limits = (bundlesPerPull: number, fixed: boolean, max = 1000) =>
    ({ bundlesPerPull, pullBundlesFixed: fixed, bundlesPerPullMax: max }) as ClientLimits;

  it('is the caller\'s pullBundles whatever the bundles carry', () => {
    expect(pullPageBundles(limits(7, true), undefined)).toBe(7);
    expect(pullPageBundles(limits(7, true), 1)).toBe(7);
    expect(pullPageBundles(limits(7, true), 10_000)).toBe(7);
  });

  it('starts at 25 bundles (fewer where the server\'s default is smaller) while the rows of a bundle are unknown', () => {
    expect(pullPageBundles(limits(100, false), undefined)).toBe(25);
    expect(pullPageBundles(limits(10, false), undefined)).toBe(10);
    expect(pullPageBundles(limits(100, false), 0)).toBe(25);
  });

  it('then holds about 2,500 rows, between one bundle and the server\'s maximum', () => {
    expect(pullPageBundles(limits(100, false), 100)).toBe(25);
    expect(pullPageBundles(limits(100, false), 50)).toBe(50);
    expect(pullPageBundles(limits(100, false), 3)).toBe(833);
    expect(pullPageBundles(limits(100, false), 1)).toBe(1000);
    expect(pullPageBundles(limits(100, false, 400), 1)).toBe(400);
    expect(pullPageBundles(limits(100, false), 2_000)).toBe(1);
    expect(pullPageBundles(limits(100, false), 10_000)).toBe(1);
  });
});
