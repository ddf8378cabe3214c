/**
 * Issue 25 item 10: `npm run build` failed on a busy machine, because a function's import took
 * 106-130 ms of wall clock under load against a 100 ms budget. The build fails on sizes only (the
 * same on every machine); init time is reported and benchmarked (bench/cold-start.ts, CPU time,
 * medians), never a reason for the build or a test to fail.
 */
import { describe, expect, it } from 'vitest';
import { BUNDLE_BYTES_MAX, budgetFailures, INIT_CPU_MS_TARGET, initNotes, type BundleReport } from '../infra/build.js';

function report(overrides: Partial<BundleReport> = {}): BundleReport {
  return {
    name: 'push',
    dir: '/tmp/push',
    entryBytes: 120 * 1024,
    loadedBytes: { neon: 310 * 1024, pg: 200 * 1024 },
    neonChunks: [],
    totalBytes: 900 * 1024,
    gzipBytes: 260 * 1024,
    files: 12,
    ...overrides,
  };
}

describe('build budgets', () => {
  it('never fail the build on init time, however slow the machine made it', () => {
    // What the audit measured under load, and far worse.
    for (const initMs of [106, 130, 880, 10_000]) {
      const slow = report({ initMs, initWithNeonMs: initMs * 2 });
      expect(budgetFailures([slow])).toEqual([]);
      expect(initNotes([slow])).toHaveLength(1);
    }
    expect(initNotes([report({ initMs: INIT_CPU_MS_TARGET - 1 })])).toEqual([]);
  });

  it('fail the build on a bundle over its size budget, on either driver', () => {
    const big = report({ loadedBytes: { neon: BUNDLE_BYTES_MAX + 1, pg: 100 } });
    expect(budgetFailures([big])).toEqual([expect.stringMatching(/^push: .* on the neon driver exceeds the 500\.0 KB bundle budget$/)]);
  });
});
