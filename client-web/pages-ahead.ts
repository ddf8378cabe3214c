/**
 * Pages asked for ahead of the one being applied (a hydration's snapshot pages, a pull's pages),
 * by where each starts. A page is full unless the server's byte budget cut it short, so after a
 * full page the next ones are asked for where full pages would start: on a link with latency the
 * requests overlap each other, not only the apply. A short page makes those guesses wrong; they
 * are abandoned (their requests aborted, retries included) and the page that really follows is
 * asked for.
 */

/** A request's outcome, settled when it is asked for: a page never taken is never an unhandled rejection. */
export type Settled<T> = { readonly page: T } | { readonly error: unknown };

export class PagesAhead<T> {
  private readonly asked = new Map<number, { readonly settled: Promise<Settled<T>>; readonly abort: AbortController }>();

  constructor(private readonly fetchPage: (at: number, signal: AbortSignal) => Promise<T>) {}

  /** The page starting at `at`: the one asked for ahead, or a request now. It leaves the set. */
  take(at: number): Promise<Settled<T>> {
    this.ask(at);
    const entry = this.asked.get(at) as { readonly settled: Promise<Settled<T>> };
    this.asked.delete(at);
    return entry.settled;
  }

  /** A page already in hand (one an earlier answer carried), taken like one asked for. */
  seed(at: number, page: T): void {
    this.asked.set(at, { settled: Promise.resolve({ page }), abort: new AbortController() });
  }

  /** Whether the page starting at `at` is asked for. */
  has(at: number): boolean {
    return this.asked.has(at);
  }

  /** Asks for the pages starting at `wanted` (those not asked for yet) and abandons every other. */
  keep(wanted: readonly number[]): void {
    for (const [at, entry] of this.asked) {
      if (wanted.includes(at)) continue;
      entry.abort.abort();
      this.asked.delete(at);
    }
    for (const at of wanted) this.ask(at);
  }

  /** Abandons every page asked for (the run ended, failed, or starts over). */
  abandon(): void {
    this.keep([]);
  }

  private ask(at: number): void {
    if (this.asked.has(at)) return;
    const abort = new AbortController();
    const settled = this.fetchPage(at, abort.signal).then((page) => ({ page }), (error: unknown) => ({ error }));
    this.asked.set(at, { settled, abort });
  }
}

/**
 * Where the pages after one that ended at `next` start: `count` of them `size` apart when that
 * page was full (`full`), only `next` when it was short; none at or past `end`.
 */
export function pagesAfter(next: number, full: boolean, size: number, count: number, end: number): number[] {
  const starts = full ? Array.from({ length: count }, (_, i) => next + i * size) : [next];
  return starts.filter((at) => at < end);
}
