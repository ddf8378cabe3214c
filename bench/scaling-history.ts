/**
 * Scaling with other users' history: one user's commit and pull latency when the database holds
 * 1,000 and then 100,000 bundles of OTHER users. Cost must not grow with others' history, so
 * the figure is the ratio of the medians at 100k to those at 1k (target ≤ 1.5×, room for noise).
 * The history is a template user's real bundles cloned set-based (lib/history-seed.ts); the
 * database is ANALYZEd after each load, as autovacuum would do in production.
 */
import { type Benchmark, type BenchContext } from './lib/context.js';
import { cloneTemplate, countOthers, seedTemplate } from './lib/history-seed.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { type Recorder } from './lib/report.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { spread, timed, type Spread } from './lib/stats.js';
import { type HttpClient } from './lib/http-client.js';

const TEMPLATE_BUNDLES = 100;
const ROWS_PER_OTHER_BUNDLE = 4;
const OWN_BUNDLES = 20;
const BUNDLE_ROWS = 10;
const PULL_BUNDLES = 10;
const LEVELS = [1_000, 100_000] as const;
export const HISTORY_TARGET_RATIO = 1.5;
const PREFIX = 'other-';

interface Level {
  readonly commitMs: Spread;
  readonly pullMs: Spread;
}

async function measure(ctx: BenchContext, rec: Recorder, me: HttpClient, state: { next: number }, level: number): Promise<Level> {
  const commits: number[] = [];
  const pulls: number[] = [];
  const runs = ctx.runs(9);
  for (let i = 0; i < runs; i++) {
    const t = await pushBundle(me, insertRows(makeNotes(BUNDLE_ROWS, state.next)), state.next++);
    commits.push(t.commitMs);
    const after = t.bundleSeq - PULL_BUNDLES;
    const pulled = await timed(() => me.get<{ bundles: { row_count: number }[] }>(`/sync/pull?after_bundle_seq=${after}&max_bundles=${PULL_BUNDLES}`));
    pulls.push(pulled.ms);
    rec.expectEqual(`history ${level}: run ${i} pulled bundles`, pulled.result.body.bundles.length, PULL_BUNDLES);
  }
  return { commitMs: spread(commits), pullMs: spread(pulls) };
}

export const historyScalingBenchmark: Benchmark = {
  name: 'scaling-history',
  async run(ctx, rec) {
    const { server } = ctx;
    const me = server.client('history-me');
    await initEmpty(me);
    const state = { next: 1 };
    for (let b = 0; b < OWN_BUNDLES; b++) await pushBundle(me, insertRows(makeNotes(BUNDLE_ROWS, b)), state.next++);

    const seeded = await timed(() => seedTemplate(server, 'history-template', TEMPLATE_BUNDLES, ROWS_PER_OTHER_BUNDLE));
    ctx.log(`template: ${TEMPLATE_BUNDLES} bundles of ${ROWS_PER_OTHER_BUNDLE} rows in ${seeded.ms.toFixed(0)} ms`);
    const template = seeded.result;
    const levels: Level[] = [];
    let users = 0;
    for (const bundles of LEVELS) {
      const want = bundles / TEMPLATE_BUNDLES;
      const cloned = await timed(() => cloneTemplate(server.admin, template, PREFIX, users, want));
      users = want;
      await server.admin.query('ANALYZE');
      const counts = await countOthers(server.admin, PREFIX);
      rec.expectEqual(`history ${bundles}: other users' bundles`, counts.bundles, bundles);
      rec.expectEqual(`history ${bundles}: other users' bundle rows`, counts.bundleRows, bundles * ROWS_PER_OTHER_BUNDLE);
      rec.expectEqual(`history ${bundles}: other users' business rows`, counts.notes, bundles * ROWS_PER_OTHER_BUNDLE);
      ctx.log(`history: ${counts.users} other users, ${counts.bundles} bundles, ${counts.bundleRows} bundle rows (clone ${cloned.ms.toFixed(0)} ms)`);
      const level = await measure(ctx, rec, me, state, bundles);
      ctx.log(`history ${bundles}: commit ${level.commitMs.median.toFixed(1)} ms, pull ${level.pullMs.median.toFixed(1)} ms`);
      levels.push(level);
    }
    const [small, large] = levels as [Level, Level];
    for (const [kind, a, b] of [
      ['commit', small.commitMs, large.commitMs],
      ['pull', small.pullMs, large.pullMs],
    ] as const) {
      const ratio = b.median / a.median;
      rec.figure({
        id: `scaling_history.${kind}_ms`,
        label: kind === 'commit' ? `commit of a ${BUNDLE_ROWS}-row bundle, 100k other users' bundles` : `pull of ${PULL_BUNDLES} bundles × ${BUNDLE_ROWS} rows, 100k other users' bundles`,
        unit: 'ms',
        value: b,
        baseline: { label: "the same with 1k other users' bundles", value: a },
        ratio,
        target: { text: `≤ ${HISTORY_TARGET_RATIO}× (flat)`, met: ratio <= HISTORY_TARGET_RATIO },
      });
    }
  },
};
