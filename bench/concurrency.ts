/**
 * 50 concurrent users pushing through the local gateway: each pushes 10 bundles of 100 rows
 * back to back, all users at once. Throughput (bundles/s, rows/s), latency per bundle (create →
 * commit) p50/p99, and zero errors. Baseline: one user pushing 50 such bundles alone, measured
 * before each round, so the ratio is what concurrency buys on this machine.
 */
import { type Benchmark } from './lib/context.js';
import { countScope } from './lib/direct-pg.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { nowMs, percentile, spread } from './lib/stats.js';

const USERS = 50;
const BUNDLES_PER_USER = 10;
const ROWS_PER_BUNDLE = 100;
const SOLO_BUNDLES = 50;

export const concurrencyBenchmark: Benchmark = {
  name: 'concurrency',
  async run(ctx, rec) {
    const { server } = ctx;
    const runs = ctx.runs(3);
    const soloRate: number[] = [];
    const rate: number[] = [];
    const p50: number[] = [];
    const p99: number[] = [];
    let errors = 0;
    for (let round = 0; round < runs; round++) {
      const solo = server.client(`solo-r${round}`);
      await initEmpty(solo);
      const s0 = nowMs();
      for (let b = 0; b < SOLO_BUNDLES; b++) await pushBundle(solo, insertRows(makeNotes(ROWS_PER_BUNDLE, b)), b + 1);
      soloRate.push((SOLO_BUNDLES * 1000) / (nowMs() - s0));

      const clients = Array.from({ length: USERS }, (_, u) => server.client(`conc-r${round}-u${u}`));
      await Promise.all(clients.map((c) => initEmpty(c)));
      const payloads = clients.map(() => Array.from({ length: BUNDLES_PER_USER }, (_, b) => insertRows(makeNotes(ROWS_PER_BUNDLE, b))));
      const latencies: number[] = [];
      const failures: string[] = [];
      const t0 = nowMs();
      await Promise.all(
        clients.map(async (c, u) => {
          for (let b = 0; b < BUNDLES_PER_USER; b++) {
            try {
              latencies.push((await pushBundle(c, payloads[u]?.[b] ?? [], b + 1)).totalMs);
            } catch (error) {
              failures.push(error instanceof Error ? error.message : String(error));
              return;
            }
          }
        }),
      );
      const wallMs = nowMs() - t0;
      errors += failures.length;
      rec.check(`concurrency round ${round}: no errors`, failures.length === 0, failures.length ? `${failures.length} failed: ${failures[0]}` : '0 errors');
      rec.expectEqual(`concurrency round ${round}: bundles committed`, latencies.length, USERS * BUNDLES_PER_USER);
      let rows = 0;
      for (const c of clients) rows += await countScope(server.admin, 'notes', c.userId);
      rec.expectEqual(`concurrency round ${round}: rows in bench.notes`, rows, USERS * BUNDLES_PER_USER * ROWS_PER_BUNDLE);
      rate.push((latencies.length * 1000) / wallMs);
      p50.push(percentile(latencies, 50));
      p99.push(percentile(latencies, 99));
      ctx.log(`concurrency round ${round}: ${rate.at(-1)?.toFixed(0)} bundles/s (solo ${soloRate.at(-1)?.toFixed(0)}), p50 ${p50.at(-1)?.toFixed(0)} ms, p99 ${p99.at(-1)?.toFixed(0)} ms`);
    }
    const throughput = spread(rate);
    const solo = spread(soloRate);
    rec.figure({
      id: 'concurrency.bundles_per_s',
      label: `${USERS} users × ${BUNDLES_PER_USER} bundles of ${ROWS_PER_BUNDLE} rows, concurrent`,
      unit: 'bundles/s',
      value: throughput,
      baseline: { label: 'one user alone, same bundles', value: solo },
      ratio: throughput.median / solo.median,
    });
    rec.figure({ id: 'concurrency.rows_per_s', label: `${USERS} concurrent users: rows`, unit: 'rows/s', value: spread(rate.map((r) => r * ROWS_PER_BUNDLE)) });
    rec.figure({ id: 'concurrency.p50_ms', label: `${USERS} concurrent users: push latency p50 (create → commit)`, unit: 'ms', value: spread(p50) });
    rec.figure({ id: 'concurrency.p99_ms', label: `${USERS} concurrent users: push latency p99`, unit: 'ms', value: spread(p99) });
    rec.figure({ id: 'concurrency.errors', label: `${USERS} concurrent users: errors`, unit: 'requests', value: spread([errors]), target: { text: '0', met: errors === 0 } });
  },
};
