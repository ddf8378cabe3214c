/**
 * Commit latency against bundle size (1, 100, 1,000, 10,000 rows), one user, sizes interleaved
 * in each round. Linearity: the marginal cost per row (commit time over the 1-row commit,
 * divided by the extra rows) at 10,000 rows against that at 1,000 (target ≤ 1.5×).
 */
import { type Benchmark } from './lib/context.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { spread } from './lib/stats.js';

const SIZES = [1, 100, 1_000, 10_000] as const;
export const LINEARITY_TARGET_RATIO = 1.5;

export const bundleSizeBenchmark: Benchmark = {
  name: 'scaling-bundle-size',
  async run(ctx, rec) {
    const { server } = ctx;
    const me = server.client('size-me');
    await initEmpty(me);
    let next = 1;
    await pushBundle(me, insertRows(makeNotes(100)), next++);
    const commits = new Map<number, number[]>(SIZES.map((s) => [s, []]));
    const runs = ctx.runs(5);
    for (let i = 0; i < runs; i++) {
      const order = i % 2 === 0 ? SIZES : [...SIZES].reverse();
      for (const size of order) {
        const t = await pushBundle(me, insertRows(makeNotes(size, next)), next++);
        rec.expectEqual(`bundle size ${size}: run ${i} committed rows`, t.rowCount, size);
        commits.get(size)?.push(t.commitMs);
      }
    }
    const one = spread(commits.get(1) ?? []).median;
    const marginal = new Map<number, number[]>();
    for (const size of SIZES) {
      const ms = commits.get(size) ?? [];
      rec.figure({ id: `bundle_size.commit_ms.${size}`, label: `commit of a ${size.toLocaleString('en-US')}-row bundle`, unit: 'ms', value: spread(ms) });
      if (size === 1) continue;
      const perRow = ms.map((m) => ((m - one) * 1000) / (size - 1));
      marginal.set(size, perRow);
      rec.figure({ id: `bundle_size.marginal_us.${size}`, label: `commit: marginal cost per row at ${size.toLocaleString('en-US')} rows`, unit: 'µs/row', value: spread(perRow) });
    }
    const at1k = spread(marginal.get(1_000) ?? []);
    const at10k = spread(marginal.get(10_000) ?? []);
    const ratio = at10k.median / at1k.median;
    rec.figure({
      id: 'bundle_size.linearity',
      label: 'commit linearity: marginal µs/row at 10,000 rows',
      unit: 'µs/row',
      value: at10k,
      baseline: { label: 'marginal µs/row at 1,000 rows', value: at1k },
      ratio,
      target: { text: `≤ ${LINEARITY_TARGET_RATIO}× (linear)`, met: ratio <= LINEARITY_TARGET_RATIO },
    });
  },
};
