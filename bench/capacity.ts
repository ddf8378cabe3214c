/**
 * The capacity of one PostgreSQL (issue 28; docs/capacity.md): N users × 2 devices with a
 * realistic mix (bench/lib/capacity-load.ts says what a device does) against the local gateway,
 * N ramped level by level until the p99 of commit or pull passes 250 ms or a request fails.
 * Reported at the knee (the last level that held): users, requests/s, p50/p99 per endpoint,
 * database CPU per request (the whole PostgreSQL process tree, from /proc), the database time of
 * each managed function (pg_stat_statements), connections used, and bytes stored per user. Then
 * the same through PgBouncer in transaction mode (more client connections, fewer server ones).
 *
 * The load generator is a child process, measured on its own: a level where it used most of a
 * core or its event loop lagged is reported as generator-bound and ends the ramp, so a knee is
 * never the generator's. Bounded: at most CAPACITY_MAX_USERS users, each ramp at most
 * RAMP_BUDGET_SECONDS, loopback only. Opt-in (`npm run bench -- --only capacity`): it takes
 * minutes and starts its own servers.
 *
 * Environment (to re-run a part): LOCKSTEP_CAPACITY_LEVELS (users per level, comma-separated),
 * LOCKSTEP_CAPACITY_MEASURE_SECONDS, LOCKSTEP_CAPACITY_MODES (`direct,pgbouncer` by default; `durable`
 * adds a direct run with fsync and synchronous_commit on).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Benchmark, type BenchContext } from './lib/context.js';
import { type Recorder } from './lib/report.js';
import { BENCH_ADMIN_APPLICATION, BENCH_JWT_SECRET, startBenchServer, type BenchServer } from './lib/server.js';
import { type FromChild, type LevelStats, type LoadConfig, type ToChild } from './lib/capacity-load.js';
import { postmasterPid, processCpuSeconds, treeCpuSeconds } from './lib/proc-cpu.js';
import { spread } from './lib/stats.js';
import { startPgBouncer } from '../test/support/pgbouncer.js';
import { PGBOUNCER_BIN } from '../test/support/prerequisites.js';

/** The knee: the p99 of commit or pull past this ends the ramp. */
const P99_LIMIT_MS = 250;
const DEFAULT_LEVELS = [10, 25, 50, 100, 200, 350, 500, 750, 1000, 1500, 2000, 3000, 4000];
const CAPACITY_MAX_USERS = 4000;
const RAMP_BUDGET_SECONDS = 360;
const WARMUP_MS = 5_000;
/**
 * A generator above this share of one core may be what limits the level; so may one lagging this
 * much while busy (lag alone is the machine's: on a loaded machine every process waits for a CPU).
 */
const GENERATOR_CPU_SHARE_MAX = 0.8;
const GENERATOR_BUSY_SHARE = 0.5;
const GENERATOR_LAG_P99_MAX_MS = 100;

const LOAD: Omit<LoadConfig, 'url' | 'secret'> = {
  devicesPerUser: 2,
  seedRows: 100,
  writeMinMs: 3_000,
  writeMaxMs: 7_000,
  offlineShare: 0.1,
  hydrationsPerDevicePerMinute: 0.01,
  seed: 28,
};

/** The endpoints a device calls, in the order the report lists them. */
const ROUTES = ['connect', 'push-create', 'push-chunk', 'push-commit', 'committed-rows', 'pull', 'snapshot-create', 'snapshot-page', 'snapshot-delete'];

interface Mode {
  readonly name: 'direct' | 'pgbouncer' | 'durable';
  readonly label: string;
  /** Connections of the gateway's pool (what the function instances hold, in all). */
  readonly clientConnections: number;
  /** PgBouncer's server connections (pool_mode=transaction). */
  readonly serverConnections?: number;
  /** Settings over the bench's (which turn fsync off, like the test servers). */
  readonly postgresFlags?: readonly string[];
  /** Runs only when LOCKSTEP_CAPACITY_MODES names it. */
  readonly optIn?: boolean;
}

const MODES: readonly Mode[] = [
  { name: 'direct', label: 'direct', clientConnections: 16 },
  { name: 'pgbouncer', label: 'through PgBouncer', clientConnections: 64, serverConnections: 8 },
  // Commits flushed to this machine's disk, as in production: every commit also NOTIFYs, and
  // PostgreSQL holds its cluster-wide notify lock from pre-commit until the commit record is
  // flushed, so notifying commits cannot share a flush (docs/capacity.md).
  { name: 'durable', label: 'direct, fsync and synchronous_commit on', clientConnections: 16, postgresFlags: ['-c', 'fsync=on', '-c', 'synchronous_commit=on', '-c', 'full_page_writes=on'], optIn: true },
];

interface Level {
  readonly stats: LevelStats;
  readonly requestsPerSecond: number;
  readonly dbCpuMsPerRequest: number;
  readonly dbCpuCores: number;
  readonly gatewayCpuMsPerRequest: number;
  /** The gateway's event loop delay, p99: its own saturation, or a machine too busy to schedule it. */
  readonly gatewayLagP99Ms: number;
  readonly generatorCpuShare: number;
  readonly connectionsMax: number;
  readonly connectionsActiveMean: number;
  /** Connections waiting for the commit-time notify lock, mean of the samples. */
  readonly notifyWaitMean: number;
  /** Connections waiting for a WAL write or flush, mean of the samples. */
  readonly walWaitMean: number;
  readonly functions: FunctionTime[];
  readonly loadBefore: number[];
  readonly loadAfter: number[];
  readonly verdict: 'held' | 'knee passed' | 'errors' | 'generator-bound';
}

interface FunctionTime {
  readonly fn: string;
  readonly calls: number;
  readonly meanMs: number;
  readonly totalMs: number;
}

/** Tables that hold a request's work only while it runs (sessions, capture): not what a user keeps. */
const SCRATCH_TABLES = new Set(['sync.push_sessions', 'sync.push_session_rows', 'sync.snapshot_sessions', 'sync.snapshot_session_rows', 'sync.capture_rows', 'sync.bundle_context']);

interface Storage {
  readonly users: number;
  /** What users keep: business rows, row state, bundles, user and source state. */
  readonly bytesTotal: number;
  readonly scratchBytes: number;
  readonly byTable: { table: string; bytes: number }[];
  readonly liveRows: number;
  readonly bundles: number;
  readonly bundleRows: number;
}

function envList(name: string): string[] | undefined {
  const value = process.env[name];
  return value ? value.split(',').map((s) => s.trim()).filter(Boolean) : undefined;
}

/** How a level ended: the first of errors, a busy generator, a p99 past the limit; otherwise it held. */
function verdictOf(stats: LevelStats, generatorCpuShare: number): Level['verdict'] {
  if (stats.errors > 0) return 'errors';
  const busy = generatorCpuShare > GENERATOR_CPU_SHARE_MAX || (generatorCpuShare > GENERATOR_BUSY_SHARE && stats.eventLoopDelayP99Ms > GENERATOR_LAG_P99_MAX_MS);
  if (busy) return 'generator-bound';
  const p99 = (route: string): number => stats.routes[route]?.p99 ?? Infinity;
  return p99('push-commit') > P99_LIMIT_MS || p99('pull') > P99_LIMIT_MS ? 'knee passed' : 'held';
}

const fmtLoad = (l: readonly number[]): string => l.map((x) => x.toFixed(2)).join(' ');

/** The generator process and its one conversation at a time. */
class Generator {
  private readonly child: ChildProcess;
  private waiting: { type: FromChild['type']; resolve: (m: FromChild) => void; reject: (e: Error) => void } | undefined;
  /** Messages that arrived before anyone asked for them. */
  private readonly early: FromChild[] = [];
  private failure: Error | undefined;

  constructor() {
    const entry = join(dirname(fileURLToPath(import.meta.url)), 'lib', 'capacity-load.ts');
    // fork inherits this process's execArgv, tsx's loader included.
    this.child = fork(entry, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m: FromChild) => {
      if (m.type === 'failed') this.fail(new Error(`load generator failed: ${m.message}`));
      else this.early.push(m);
      this.deliver();
    });
    this.child.on('exit', (code) => this.fail(new Error(`load generator exited with ${code}`)));
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  send(message: ToChild): void {
    this.child.send(message);
  }

  next<T extends FromChild['type']>(type: T): Promise<Extract<FromChild, { type: T }>> {
    return new Promise((resolve, reject) => {
      this.waiting = { type, resolve: resolve as (m: FromChild) => void, reject };
      this.deliver();
    });
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.deliver();
  }

  private deliver(): void {
    const w = this.waiting;
    if (!w) return;
    if (this.failure) {
      this.waiting = undefined;
      w.reject(this.failure);
      return;
    }
    const i = this.early.findIndex((m) => m.type === w.type);
    if (i < 0) return;
    const [m] = this.early.splice(i, 1);
    this.waiting = undefined;
    w.resolve(m as FromChild);
  }

  /** Stops the devices; answers what they committed (undefined when the generator had failed). */
  async stop(): Promise<Extract<FromChild, { type: 'stopped' }> | undefined> {
    if (this.child.exitCode !== null || this.failure) {
      if (this.child.exitCode === null) this.child.kill('SIGKILL');
      return undefined;
    }
    const stopped = this.next('stopped').catch(() => undefined);
    this.send({ type: 'stop' });
    const answer = await Promise.race([stopped, new Promise<undefined>((r) => setTimeout(() => r(undefined), 5000))]);
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
    return answer;
  }
}

async function functionTimes(server: BenchServer): Promise<FunctionTime[]> {
  const result = await server.admin.query<{ query: string; calls: string; total: number }>(
    `SELECT query, calls, total_exec_time AS total FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`);
  const byFn = new Map<string, { calls: number; totalMs: number }>();
  for (const row of result.rows) {
    // The runtime calls one managed function per request; the feed's and the bench's own statements are "other".
    const fn = /\bsync\.([a-z_]+)\(/.exec(row.query)?.[1] ?? 'other';
    const entry = byFn.get(fn) ?? { calls: 0, totalMs: 0 };
    entry.calls += Number(row.calls);
    entry.totalMs += row.total;
    byFn.set(fn, entry);
  }
  return [...byFn].map(([fn, e]) => ({ fn, calls: e.calls, totalMs: e.totalMs, meanMs: e.totalMs / Math.max(1, e.calls) })).sort((a, b) => b.totalMs - a.totalMs);
}

async function storage(server: BenchServer): Promise<Storage> {
  const tables = await server.admin.query<{ table: string; bytes: string }>(`
    SELECT n.nspname || '.' || c.relname AS table, pg_total_relation_size(c.oid) AS bytes
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname IN ('sync', 'bench') AND c.relkind = 'r' AND c.relname <> 'notes_direct'
     ORDER BY pg_total_relation_size(c.oid) DESC`);
  const counts = await server.admin.query<{ users: string; live: string; bundles: string; bundle_rows: string }>(`
    SELECT (SELECT count(*) FROM sync.user_state) AS users, (SELECT count(*) FROM bench.notes) AS live,
           (SELECT count(*) FROM sync.bundle_log) AS bundles, (SELECT count(*) FROM sync.bundle_rows) AS bundle_rows`);
  const c = counts.rows[0] as { users: string; live: string; bundles: string; bundle_rows: string };
  const byTable = tables.rows.map((r) => ({ table: r.table, bytes: Number(r.bytes) }));
  return {
    users: Number(c.users),
    bytesTotal: byTable.filter((t) => !SCRATCH_TABLES.has(t.table)).reduce((n, t) => n + t.bytes, 0),
    scratchBytes: byTable.filter((t) => SCRATCH_TABLES.has(t.table)).reduce((n, t) => n + t.bytes, 0),
    byTable,
    liveRows: Number(c.live),
    bundles: Number(c.bundles),
    bundleRows: Number(c.bundle_rows),
  };
}

async function runMode(ctx: BenchContext, rec: Recorder, mode: Mode, levels: readonly number[], measureMs: number): Promise<void> {
  const server = await startBenchServer({
    // Later -c settings win over the bench's own (fsync off), so a mode can turn durability back on.
    postgresFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=top', ...(mode.postgresFlags ?? [])],
    feed: true,
    runtimePoolMax: mode.clientConnections,
    ...(mode.serverConnections !== undefined
      ? {
          pooler: async (url: string) => {
            const size = mode.serverConnections as number;
            const bouncer = await startPgBouncer(url, { poolSize: size, maxDbConnections: size });
            return { url: bouncer.rewrite(url), close: () => bouncer.stop() };
          },
        }
      : {}),
  });
  const generator = new Generator();
  const done: Level[] = [];
  let stopped: Awaited<ReturnType<Generator['stop']>>;
  const started = Date.now();
  try {
    const statements = await server.admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements').then(() => true, () => false);
    const postmaster = postmasterPid(server.dataDir);
    ctx.log(`${mode.label}: PostgreSQL ${server.postgresVersion} (pid ${postmaster}), gateway ${server.url}, ${mode.clientConnections} client connections` +
      `${mode.serverConnections !== undefined ? ` → PgBouncer (transaction mode) → ${mode.serverConnections} server connections` : ''}, generator pid ${generator.pid}` +
      `${statements ? '' : ' (pg_stat_statements unavailable: no per-function times)'}`);
    const ready = generator.next('ready');
    generator.send({ type: 'init', config: { ...LOAD, url: server.url, secret: BENCH_JWT_SECRET } });
    await ready;
    ctx.log('  users  devices  req/s  commit p50/p99  pull p50/p99  db CPU ms/req (cores)  gateway ms/req (lag p99)  generator (lag p99)  conns max/active (notify/WAL waits)  errors  load average before → after  verdict');
    for (const users of levels) {
      if ((Date.now() - started) / 1000 > RAMP_BUDGET_SECONDS) {
        rec.note(`${mode.label}: the ramp stopped at its ${RAMP_BUDGET_SECONDS} s budget before ${users} users`);
        break;
      }
      const loadBefore = loadavg();
      const measureStart = generator.next('measureStart');
      generator.send({ type: 'level', users, warmupMs: WARMUP_MS, measureMs });
      await measureStart;
      if (statements) await server.admin.query('SELECT pg_stat_statements_reset()');
      const gatewayLag = monitorEventLoopDelay({ resolution: 10 });
      gatewayLag.enable();
      const db0 = treeCpuSeconds(postmaster);
      const gw0 = process.cpuUsage();
      const gen0 = processCpuSeconds(generator.pid);
      const samples: { total: number; active: number; notify: number; wal: number }[] = [];
      const levelDone = generator.next('levelDone');
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          // The runtime's connections (direct, or PgBouncer's server side): not the bench's own, not the commit feed's LISTEN.
          // Waits: the notify lock (a heavyweight lock on "object 0 of class 1262", which every
          // committing NOTIFY takes: wait event Lock/object) and the WAL flush of a commit (IO/WALSync, LWLock/WALWrite).
          const r = await server.admin.query<{ total: string; active: string; notify: string; wal: string }>(`
            SELECT count(*) AS total, count(*) FILTER (WHERE state = 'active') AS active,
                   count(*) FILTER (WHERE wait_event_type = 'Lock' AND wait_event = 'object') AS notify,
                   count(*) FILTER (WHERE wait_event IN ('WALSync', 'WALWrite', 'WALInsert')) AS wal
              FROM pg_stat_activity
             WHERE backend_type = 'client backend' AND datname = current_database() AND application_name <> $1
               AND query NOT ILIKE 'LISTEN %'`, [BENCH_ADMIN_APPLICATION]);
          const row = r.rows[0];
          if (row) samples.push({ total: Number(row.total), active: Number(row.active), notify: Number(row.notify), wal: Number(row.wal) });
          await new Promise((res) => setTimeout(res, 1000));
        }
      })();
      const { stats } = await levelDone;
      const dbCpu = treeCpuSeconds(postmaster) - db0;
      const gw = process.cpuUsage(gw0);
      const genCpu = processCpuSeconds(generator.pid) - gen0;
      gatewayLag.disable();
      sampling = false;
      await sampler;
      const functions = statements ? await functionTimes(server) : [];
      const loadAfter = loadavg();
      const seconds = stats.windowMs / 1000;
      const commit = stats.routes['push-commit'];
      const pull = stats.routes['pull'];
      const generatorCpuShare = Math.max(genCpu, stats.generatorCpuMs / 1000) / seconds;
      const verdict = verdictOf(stats, generatorCpuShare);
      const level: Level = {
        stats,
        requestsPerSecond: stats.requests / seconds,
        dbCpuMsPerRequest: (dbCpu * 1000) / Math.max(1, stats.requests),
        dbCpuCores: dbCpu / seconds,
        gatewayCpuMsPerRequest: (gw.user + gw.system) / 1000 / Math.max(1, stats.requests),
        gatewayLagP99Ms: gatewayLag.percentile(99) / 1e6,
        generatorCpuShare,
        connectionsMax: Math.max(0, ...samples.map((s) => s.total)),
        connectionsActiveMean: samples.reduce((n, s) => n + s.active, 0) / Math.max(1, samples.length),
        notifyWaitMean: samples.reduce((n, s) => n + s.notify, 0) / Math.max(1, samples.length),
        walWaitMean: samples.reduce((n, s) => n + s.wal, 0) / Math.max(1, samples.length),
        functions,
        loadBefore,
        loadAfter,
        verdict,
      };
      done.push(level);
      ctx.log(`  ${String(users).padStart(5)}  ${String(stats.devices).padStart(7)}  ${level.requestsPerSecond.toFixed(0).padStart(5)}` +
        `  ${(commit?.p50 ?? NaN).toFixed(0).padStart(5)} / ${(commit?.p99 ?? NaN).toFixed(0).padEnd(5)}  ${(pull?.p50 ?? NaN).toFixed(0).padStart(4)} / ${(pull?.p99 ?? NaN).toFixed(0).padEnd(5)}` +
        `  ${level.dbCpuMsPerRequest.toFixed(2).padStart(12)} (${level.dbCpuCores.toFixed(2)})  ${level.gatewayCpuMsPerRequest.toFixed(2).padStart(14)} (${level.gatewayLagP99Ms.toFixed(0)} ms)` +
        `  ${(generatorCpuShare * 100).toFixed(0).padStart(4)}% (${stats.eventLoopDelayP99Ms.toFixed(0)} ms)  ${String(level.connectionsMax).padStart(4)} / ${level.connectionsActiveMean.toFixed(1)} (${level.notifyWaitMean.toFixed(1)}/${level.walWaitMean.toFixed(1)})` +
        `  ${String(stats.errors).padStart(6)}  ${fmtLoad(loadBefore)} → ${fmtLoad(loadAfter)}  ${verdict}` +
        `${stats.setupMs > 1000 ? ` (setup of new users ${(stats.setupMs / 1000).toFixed(1)} s)` : ''}`);
      for (const e of stats.errorSamples) ctx.log(`    error: ${e}`);
      if (verdict !== 'held') break;
    }
  } finally {
    stopped = await generator.stop();
  }
  try {
    // Correctness: every new row a commit was answered for is in the table; at most the rows of
    // commits still unanswered at the stop are there besides.
    const rows = Number((await server.admin.query<{ n: string }>('SELECT count(*) AS n FROM bench.notes')).rows[0]?.n ?? 0);
    if (stopped) {
      rec.check(`${mode.label}: the rows committed are in bench.notes`, rows >= stopped.insertedRows && rows <= stopped.insertedRows + stopped.insertedRowsInFlight,
        `${rows} rows; ${stopped.insertedRows} answered as committed, ${stopped.insertedRowsInFlight} unanswered at the stop`);
    } else rec.check(`${mode.label}: the generator stopped cleanly`, false, 'no answer to stop');
    report(ctx, rec, mode, done, await storage(server));
  } finally {
    await server.close();
  }
}

function report(ctx: BenchContext, rec: Recorder, mode: Mode, levels: readonly Level[], stored: Storage): void {
  const knee = [...levels].reverse().find((l) => l.verdict === 'held');
  const past = levels.find((l) => l.verdict !== 'held');
  const id = `capacity.${mode.name}`;
  // No level holding is a finding about the machine (a loaded one fails even the first), not a wrong answer.
  if (!knee) rec.note(`${mode.label}: no level held: the first (${past?.stats.users ?? '?'} users) ended ${past?.verdict ?? 'without a verdict'}`);
  rec.check(`${mode.label}: pushed rows were committed`, levels.every((l) => l.stats.bundles > 0), levels.map((l) => `${l.stats.users}: ${l.stats.bundles} bundles`).join(', '));
  const ending = past
    ? `${past.verdict} at ${past.stats.users} users (commit p99 ${(past.stats.routes['push-commit']?.p99 ?? NaN).toFixed(0)} ms, pull p99 ${(past.stats.routes['pull']?.p99 ?? NaN).toFixed(0)} ms, ${past.stats.errors} errors, DB ${past.dbCpuCores.toFixed(2)} cores)`
    : 'no level passed the knee within the levels and budget: the knee is above the last level';
  rec.note(`${mode.label}: knee ${knee ? `${knee.stats.users} users × ${LOAD.devicesPerUser} devices, ${knee.requestsPerSecond.toFixed(0)} requests/s` : 'not reached'}; ramp ended: ${ending}`);
  if (past?.verdict === 'generator-bound') rec.note(`${mode.label}: the generator, not the server, limited the last level: the knee is at least the last level that held`);
  if (!knee) return;
  const one = (label: string, unit: string, value: number, idSuffix: string, note?: string) =>
    rec.figure({ id: `${id}.${idSuffix}`, label: `capacity ${mode.label}: ${label}`, unit, value: spread([value]), ...(note ? { note } : {}) });
  one('users at the knee (2 devices each; p99 of commit and pull ≤ 250 ms, no errors)', 'users', knee.stats.users, 'users');
  one('requests/s at the knee', 'req/s', knee.requestsPerSecond, 'rps');
  one('bundles committed/s at the knee', 'bundles/s', knee.stats.bundles / (knee.stats.windowMs / 1000), 'bundles_per_s');
  for (const route of ROUTES) {
    const r = knee.stats.routes[route];
    if (!r) continue;
    one(`${route} p50 at the knee (${r.count} requests)`, 'ms', r.p50, `${route}.p50`);
    one(`${route} p99 at the knee`, 'ms', r.p99, `${route}.p99`);
  }
  one('database CPU per request at the knee (PostgreSQL process tree, /proc)', 'ms', knee.dbCpuMsPerRequest, 'db_cpu_ms_per_request');
  one('database CPU at the knee', 'cores', knee.dbCpuCores, 'db_cores');
  one('gateway (handlers) CPU per request at the knee', 'ms', knee.gatewayCpuMsPerRequest, 'gateway_cpu_ms_per_request');
  one('load generator CPU at the knee (share of one core)', '%', knee.generatorCpuShare * 100, 'generator_cpu');
  one('database connections of the runtime at the knee (max sampled)', 'conns', knee.connectionsMax, 'connections_max');
  one('database connections running a statement at the knee (mean)', 'conns', knee.connectionsActiveMean, 'connections_active');
  one('of which waiting for the commit-time notify lock (mean)', 'conns', knee.notifyWaitMean, 'notify_waits');
  one('of which waiting for a WAL write or flush (mean)', 'conns', knee.walWaitMean, 'wal_waits');
  one(`bytes stored per user after the ramp, sessions and capture scratch left out (${stored.users} users, ${(stored.liveRows / stored.users).toFixed(0)} rows and ${(stored.bundles / stored.users).toFixed(0)} bundles each)`, 'bytes', stored.bytesTotal / stored.users, 'bytes_per_user');
  const fnLine = knee.functions.filter((f) => f.fn !== 'other').map((f) => `${f.fn} ${f.calls}× ${f.meanMs.toFixed(2)} ms`).join(', ');
  if (fnLine) rec.note(`${mode.label}: database time per call at the knee (pg_stat_statements, wall time in the server): ${fnLine}`);
  rec.note(`${mode.label}: storage after the ramp: ${stored.byTable.slice(0, 8).map((t) => `${t.table} ${(t.bytes / 2 ** 20).toFixed(1)} MiB`).join(', ')}; ` +
    `${stored.liveRows} live rows, ${stored.bundles} bundles, ${stored.bundleRows} bundle rows; scratch tables (sessions, capture; emptied as requests finish, space reused after vacuum) ${(stored.scratchBytes / 2 ** 20).toFixed(1)} MiB`);
  rec.note(`${mode.label}: load average (1, 5, 15 min) around the knee level: ${fmtLoad(knee.loadBefore)} → ${fmtLoad(knee.loadAfter)}`);
  ctx.log(`${mode.label}: knee at ${knee.stats.users} users, ${knee.requestsPerSecond.toFixed(0)} req/s; ${ending}`);
}

export const capacityBenchmark: Benchmark = {
  name: 'capacity',
  standalone: true,
  optIn: true,
  async run(ctx, rec) {
    const levels = (envList('LOCKSTEP_CAPACITY_LEVELS')?.map(Number) ?? DEFAULT_LEVELS).filter((n) => Number.isInteger(n) && n > 0 && n <= CAPACITY_MAX_USERS);
    const quick = ctx.runs(5) === 3;
    const measureMs = 1000 * Number(process.env['LOCKSTEP_CAPACITY_MEASURE_SECONDS'] ?? (quick ? 10 : 20));
    const wanted = envList('LOCKSTEP_CAPACITY_MODES') ?? MODES.filter((m) => !m.optIn).map((m) => m.name);
    ctx.log(`load average at start: ${fmtLoad(loadavg())}; levels ${levels.join(', ')} users; ${WARMUP_MS / 1000} s warm-up + ${measureMs / 1000} s measured per level`);
    for (const mode of MODES.filter((m) => wanted.includes(m.name))) {
      if (mode.name === 'pgbouncer' && (!PGBOUNCER_BIN || !existsSync(PGBOUNCER_BIN))) {
        rec.note('through PgBouncer: skipped, pgbouncer is not installed (apt-get install pgbouncer)');
        continue;
      }
      await runMode(ctx, rec, mode, levels, measureMs);
    }
  },
};
