/**
 * `npm run bench`: starts its own embedded PostgreSQL 17 and local gateway, runs every
 * benchmark, prints one table and writes bench/results/latest.json (and latest.md, the table as
 * Markdown for the README). Each figure is a median of several runs with min and max, and a
 * ratio to a baseline measured in the same run. Row-count checks guard every figure: a failed
 * check or a crashed benchmark makes the run exit non-zero; a missed target does not (it is a
 * finding, reported in the table).
 *
 * Options: `--only a,b` runs only the named benchmarks (the only way to run an opt-in one such as
 * `capacity`); `--quick` uses the minimum run counts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Benchmark, type BenchContext } from './lib/context.js';
import { describeMachine } from './lib/machine.js';
import { formatTable, Recorder, type BenchResult } from './lib/report.js';
import { internalErrors, startBenchServer, RUNTIME_POOL_MAX, type BenchServer } from './lib/server.js';
import { nowMs } from './lib/stats.js';
import { coldStartBenchmark } from './cold-start.js';
import { pushBenchmark } from './push.js';
import { commitBreakdownBenchmark } from './commit-breakdown.js';
import { pullBenchmark } from './pull.js';
import { hydrationBenchmark } from './hydration.js';
import { browserHydrationBenchmark } from './browser-hydration.js';
import { historyScalingBenchmark } from './scaling-history.js';
import { ownHistoryBenchmark } from './own-history.js';
import { bundleSizeBenchmark } from './scaling-bundle-size.js';
import { concurrencyBenchmark } from './concurrency.js';
import { fairShareBenchmark } from './fair-share.js';
import { roundTripsBenchmark } from './round-trips.js';
import { liveQueryBenchmark } from './live-query.js';
import { browserLatencyBenchmark } from './browser-latency.js';
import { capacityBenchmark } from './capacity.js';
import { rejectionPathBenchmark } from './rejection-path.js';
import { localWritesBenchmark } from './local-writes.js';
import { attackBenchmark } from './attack.js';

const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'results');
/** The run must fit in this on a fresh clone (issue 9). */
const RUN_BUDGET_SECONDS = 600;

/** Round trips come last: they report every request the other benchmarks made. */
const BENCHMARKS: readonly Benchmark[] = [
  coldStartBenchmark,
  pushBenchmark,
  commitBreakdownBenchmark,
  pullBenchmark,
  localWritesBenchmark,
  hydrationBenchmark,
  browserHydrationBenchmark,
  historyScalingBenchmark,
  ownHistoryBenchmark,
  bundleSizeBenchmark,
  concurrencyBenchmark,
  fairShareBenchmark,
  liveQueryBenchmark,
  browserLatencyBenchmark,
  attackBenchmark,
  // Registers a table of its own by bootstrap: after every benchmark of the usual schema.
  rejectionPathBenchmark,
  roundTripsBenchmark,
  // Opt-in (minutes of ramp, two servers of its own): `npm run bench -- --only capacity`.
  capacityBenchmark,
];

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? (process.argv[i + 1] ?? '') : undefined;
}

async function runOne(bench: Benchmark, ctx: BenchContext): Promise<BenchResult> {
  const rec = new Recorder();
  const start = nowMs();
  console.log(`\n== ${bench.name}`);
  let error: string | undefined;
  try {
    await bench.run(ctx, rec);
  } catch (e) {
    error = e instanceof Error ? (e.stack ?? e.message) : String(e);
    console.error(`${bench.name} failed: ${error}`);
  }
  const seconds = (nowMs() - start) / 1000;
  for (const n of rec.notes) console.log(`  ${n}`);
  for (const c of rec.checks.filter((c) => !c.ok)) console.error(`  CHECK FAILED ${c.what}: ${c.detail}`);
  console.log(`  ${bench.name}: ${seconds.toFixed(1)} s, ${rec.figures.length} figures, ${rec.checks.filter((c) => c.ok).length}/${rec.checks.length} checks passed`);
  return { name: bench.name, seconds, figures: rec.figures, checks: rec.checks, notes: rec.notes, ...(error ? { error } : {}) };
}

async function main(): Promise<number> {
  const started = nowMs();
  const only = option('--only')?.split(',').filter(Boolean);
  const quick = process.argv.includes('--quick');
  const selected = only ? BENCHMARKS.filter((b) => only.includes(b.name)) : BENCHMARKS.filter((b) => !b.optIn);
  if (only && selected.length !== only.length) throw new Error(`unknown benchmark in --only; known: ${BENCHMARKS.map((b) => b.name).join(', ')}`);
  const machine = describeMachine();
  console.log(`machine: ${machine.nproc} CPUs (${machine.cpuModel}), node ${machine.node}, ${machine.platform}\n${machine.memory}`);

  let server: BenchServer | undefined;
  const results: BenchResult[] = [];
  try {
    for (const bench of selected) {
      if (!bench.standalone && !server) {
        server = await startBenchServer();
        machine.postgres = server.postgresVersion;
        console.log(`embedded PostgreSQL ${server.postgresVersion}, gateway ${server.url}, runtime pool ${RUNTIME_POOL_MAX} connections`);
      }
      const ctx: BenchContext = {
        get server(): BenchServer {
          if (!server) throw new Error('this benchmark is standalone and has no server');
          return server;
        },
        runs: (n) => (quick ? 3 : n),
        log: (message) => console.log(`  ${message}`),
      };
      results.push(await runOne(bench, ctx));
    }
  } finally {
    await server?.close();
  }

  const seconds = (nowMs() - started) / 1000;
  const failedChecks = results.flatMap((r) => r.checks.filter((c) => !c.ok).map((c) => `${r.name}: ${c.what}: ${c.detail}`));
  const crashed = results.filter((r) => r.error !== undefined).map((r) => r.name);
  const missed = results.flatMap((r) => r.figures.filter((f) => f.target && !f.target.met).map((f) => `${f.label}: ${f.value.median.toFixed(2)} ${f.unit}${f.ratio !== undefined ? ` (ratio ${f.ratio.toFixed(2)}×)` : ''}, target ${f.target?.text}`));

  console.log(`\n${formatTable(results)}\n`);
  for (const r of results) for (const n of r.notes) console.log(`note (${r.name}): ${n}`);
  for (const m of missed) console.log(`TARGET MISSED ${m}`);
  console.log(`run took ${seconds.toFixed(0)} s (budget ${RUN_BUDGET_SECONDS} s)${quick ? ', --quick' : ''}${only ? `, only ${only.join(',')}` : ''}`);

  mkdirSync(RESULTS_DIR, { recursive: true });
  const partial = Boolean(only) || quick;
  const stem = partial ? 'partial' : 'latest';
  const report = { date: new Date().toISOString(), seconds, quick, only: only ?? null, machine, results, failedChecks, crashed, missedTargets: missed };
  writeFileSync(join(RESULTS_DIR, `${stem}.json`), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(join(RESULTS_DIR, `${stem}.md`), `${formatTable(results, true)}\n`);
  console.log(`wrote bench/results/${stem}.json and ${stem}.md`);

  if (seconds > RUN_BUDGET_SECONDS) console.error(`the run took longer than its ${RUN_BUDGET_SECONDS} s budget`);
  for (const f of failedChecks) console.error(`FAILED CHECK ${f}`);
  for (const c of crashed) console.error(`CRASHED ${c}`);
  for (const e of internalErrors()) console.error(`INTERNAL ERROR (500) ${e}`);
  return failedChecks.length || crashed.length || internalErrors().length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
