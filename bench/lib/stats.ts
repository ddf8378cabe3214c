/**
 * Figures from repeated runs: every figure is a median with its min and max, because the
 * machines are shared and one run says little. Ratios compare medians of runs that were
 * interleaved with their baseline, so both saw the same machine.
 */

/** Median, min and max of some runs; `n` is how many. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly n: number;
}

export function spread(samples: readonly number[]): Spread {
  if (samples.length === 0) throw new Error('spread of no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { median, min: sorted[0] as number, max: sorted[sorted.length - 1] as number, n: sorted.length };
}

/** The p-th percentile (0..100) by nearest rank. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) throw new Error('percentile of no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/** Milliseconds since an arbitrary origin, sub-millisecond resolution. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Runs `fn` and returns its result with its wall time in milliseconds. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const start = nowMs();
  const result = await fn();
  return { ms: nowMs() - start, result };
}

/** Rows per second from a row count and milliseconds. */
export function rowsPerSecond(rows: number, ms: number): number {
  return (rows * 1000) / ms;
}
