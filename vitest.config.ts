import { defineConfig } from 'vitest/config';
import { needs, skipAllowed } from './test/support/prerequisites.js';
import { RunPlan } from './test/support/run-plan.js';
import { SkipSummary, type SkippedProject } from './test/support/skip-summary.js';

// Suites are named by what they need: `*.test.ts` pure, `*.pg.test.ts` real PostgreSQL (run on
// 16 and 17), `*.web.test.ts` a real browser. Each PostgreSQL project starts its own server.
// The client model suites (random convergence under faults, a kill at every await point) test
// the client, not the database: they run once, on 17 direct, where they take minutes; the other
// suites of the client's state machine run on 17 (CLIENT_SUITES below).
const CLIENT_MODEL_SUITES = ['test/convergence*.pg.test.ts', 'test/client-crash*.pg.test.ts'];
// `npm start` as a process (its own embedded PostgreSQL 17), the README's example and the OpenAPI
// conformance round (what they check no pool route changes): once, on pg17.
// The attack suite waits out fixed attack windows and lock bounds (~40 s), and the built bundles
// are the same SQL as the runtime every project already runs: what they add is the fairness of
// the pool and the Lambda packaging, which no PostgreSQL major changes. The 100k-row snapshot
// checks the byte budget at scale (its server write alone takes 10-16 s on a busy machine); its
// paging is the SQL read-snapshot runs on every project at 1,234 rows.
const ONCE_SUITES = [
  ...CLIENT_MODEL_SUITES, 'test/local-runtime.pg.test.ts', 'test/readme-example.pg.test.ts', 'test/openapi-conformance.pg.test.ts',
  'test/attack-perf.pg.test.ts', 'test/built-bundles.pg.test.ts', 'test/read-snapshot-scale.pg.test.ts',
];
// Suites of the client's own state machine (recovery paths, one bad row, the quarantine, the
// loop, the defects found from outside) and the model suites' pinned regressions drive the same
// server SQL as the server suites: on 17, direct and through PgBouncer (a client retrying across
// pooled connections), not again on 16 and over the Neon driver, whose differences every server
// suite covers. The client suites that check values end to end (client-sync's wire types,
// value-fidelity, client-wire-values) stay on every project.
const CLIENT_SUITES = [
  'test/regressions/convergence-pinned.pg.test.ts', 'test/client-recovery.pg.test.ts', 'test/client-one-bad-row.pg.test.ts',
  'test/client-quarantine.pg.test.ts', 'test/client-loop.pg.test.ts', 'test/client-defects.pg.test.ts', 'test/client-apply-keys.pg.test.ts',
];

const pgProject = (major: 16 | 17) => ({
  extends: true as const,
  test: {
    name: `pg${major}`,
    include: ['test/**/*.pg.test.ts'],
    exclude: major === 17 ? [] : [...ONCE_SUITES, ...CLIENT_SUITES],
    globalSetup: ['test/support/global-setup.ts'],
  },
});

// Pool-safety proofs (docs/protocol.md §1): the PostgreSQL suites again on 17 with the runtime's pool
// through PgBouncer in transaction mode, and over the Neon driver (WebSocket) instead of `pg`.
// See test/support/global-setup.ts and runtimePoolOptions in test/support/server-db.ts.
// Suites that spawn built bundles or measure performance stay on the direct projects, and so do
// suites that never use the runtime's pool: the bootstrap CLI opens its own connection to the
// direct URL, so a pooled project would repeat pg17's run exactly.
const DIRECT_ONLY_SUITES = ['test/built-bundles.pg.test.ts', 'test/**/*perf*.pg.test.ts', 'test/bootstrap-cli.pg.test.ts'];
const pooledProject = (name: 'pgbouncer17' | 'neon17') => ({
  extends: true as const,
  test: {
    name,
    include: ['test/**/*.pg.test.ts'],
    exclude: [...DIRECT_ONLY_SUITES, ...ONCE_SUITES, ...(name === 'neon17' ? CLIENT_SUITES : [])],
    globalSetup: ['test/support/global-setup.ts'],
  },
});

// Without PgBouncer (no npm package provides it) the pgbouncer17 project is left out and named in
// the final summary; under LOCKSTEP_REQUIRE_ALL=1 it stays and fails (test/support/prerequisites.ts).
const skippedProjects: SkippedProject[] = [];
const pooledProjects = [pooledProject('pgbouncer17'), pooledProject('neon17')].filter((p) => {
  if (p.test.name !== 'pgbouncer17' || needs().pgbouncer.available || !skipAllowed('pgbouncer')) return true;
  skippedProjects.push({ project: p.test.name, need: 'pgbouncer' });
  return false;
});

export default defineConfig({
  test: {
    // A test may take as long as a loaded machine needs; these bounds only catch a hang
    // (never blocked forever), so they are minutes, far above any passing run (no test asserts
    // a wall-clock time: timings are in `npm run bench`).
    testTimeout: 600_000,
    hookTimeout: 600_000,
    pool: 'forks',
    // One fork more than the 2 cores the suite is sized for: many suites wait rather than compute
    // (lock and statement bounds run out, child processes and npm start boot, a browser loads),
    // and a third fork fills the core each wait leaves idle. Whole suite on a quiet 2-core machine:
    // 788 s with 2 forks, 659 s with 3, 627 s with 4 (at load ~6, too close to what the burner
    // check already adds).
    // The files of one project share their forks and the modules those have loaded: each fork
    // imports the runtime, the client and their packages once per project, not once per file
    // (~1 s of CPU a file, 300 files). vitest in fresh-clone CI runs: 815 s → 606-642 s; beside
    // a CPU burner: 902-1,048 s → 677-816 s (bench/README, thirty-sixth pass). vitest still runs each
    // file's own module and the setup files afresh, and starts new forks for each project. minForks equals maxForks: below it, tinypool ends a worker it thinks idle
    // (idleTimeout 0) while vitest runs a file in it ("Terminating worker thread"), which stops
    // the run and leaves that fork and its PostgreSQL behind.
    poolOptions: { forks: { maxForks: 3, minForks: 3, isolate: false } },
    setupFiles: ['test/support/http-agent.ts', 'test/support/scratch.ts'],
    reporters: ['default', new SkipSummary(skippedProjects), new RunPlan()],
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: ['test/**/*.pg.test.ts', 'test/**/*.web.test.ts'] } },
      pgProject(16),
      pgProject(17),
      ...pooledProjects,
      {
        extends: true,
        test: { name: 'web17', include: ['test/**/*.web.test.ts'], globalSetup: ['test/support/global-setup.ts'] },
      },
    ],
  },
});
