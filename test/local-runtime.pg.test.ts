/**
 * Issue 19, items 1–3: `npm start` as a developer meets it, on free ports and a temporary data
 * folder. Whatever way it stops — SIGINT or SIGTERM to npm alone, a hard kill of the server —
 * nothing it started keeps running; what a crash leaves (a postgres still running, a stale
 * postmaster.pid) is cleaned up by the next start; and a start that cannot work (a second start,
 * a busy port, PostgreSQL's own refusal, a missing SYNC_TABLES) says why in one line, without a
 * stack trace. Runs once, on the pg17 project: it starts its own embedded PostgreSQL 17.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from '../dev/processes.js';
import { freePort } from './support/pg-server.js';
import { dataPaths, gone, listening, npmStart, pidIn, ROOT, watchdogOf, type StartedProcess } from './support/local-start.js';

const SERVING = /lockstep: serving on http:\/\/localhost:(\d+)/;
/** A stack trace line: a one-line error must not come with one. */
const STACK = /^\s+at /m;

describe('npm start and the processes it runs', () => {
  let dataDir: string;
  let paths: ReturnType<typeof dataPaths>;
  let port: number;
  let pgPort: number;
  const running: StartedProcess[] = [];

  const start = (env: Record<string, string> = {}) => {
    const p = npmStart({ PORT: String(port), LOCKSTEP_PG_PORT: String(pgPort), LOCKSTEP_DATA_DIR: dataDir, ...env });
    running.push(p);
    return p;
  };

  /** Starts and waits until it serves; returns the pids of what runs. */
  const serve = async (env: Record<string, string> = {}) => {
    const p = start(env);
    await p.waitFor(SERVING);
    const health = await fetch(`http://127.0.0.1:${env['PORT'] ?? port}/syncx/health`);
    expect(health.status).toBe(200);
    const server = pidIn(paths.lock) as number;
    const postgres = pidIn(paths.postmaster) as number;
    expect(isAlive(server) && isAlive(postgres)).toBe(true);
    return { p, server, postgres, watchdog: watchdogOf(postgres) };
  };

  /** Nothing of a run is left: npm, the server and postgres are gone, the ports closed, the lock released. */
  const expectAllStopped = async (pids: { p: StartedProcess; server: number; postgres: number }) => {
    await pids.p.exited;
    expect(await gone(pids.server), 'the server process is gone').toBe(true);
    expect(await gone(pids.postgres), 'postgres is gone').toBe(true);
    expect(await listening(port)).toBe(false);
    expect(await listening(pgPort)).toBe(false);
  };

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'lockstep-start-'));
    paths = dataPaths(dataDir);
    port = await freePort();
    pgPort = await freePort();
  });

  afterAll(async () => {
    // Whatever a failed test left: only this suite's own processes, by pid.
    for (const p of running) {
      if (p.npm.exitCode !== null || p.npm.signalCode !== null || !p.npm.pid) continue;
      try {
        process.kill(-p.npm.pid, 'SIGKILL');
      } catch {
        // The group ended meanwhile.
      }
    }
    const postgres = pidIn(paths.postmaster);
    if (postgres && isAlive(postgres)) process.kill(postgres, 'SIGINT');
    if (postgres) await gone(postgres);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('serves, and SIGINT to npm alone stops the server and PostgreSQL', async () => {
    const run = await serve();
    expect(run.p.output()).toContain(`database: postgres://postgres:postgres@127.0.0.1:${pgPort}/lockstep`);
    expect(run.watchdog).not.toBeNull();
    process.kill(run.p.npm.pid as number, 'SIGINT');
    await expectAllStopped(run);
    expect(run.p.output()).toContain('SIGINT, shutting down');
    expect(existsSync(paths.lock)).toBe(false);
    expect(await gone(run.watchdog as number, 2000)).toBe(true);
  });

  it('kill <npm pid> (SIGTERM) stops the server and PostgreSQL', async () => {
    const run = await serve();
    process.kill(run.p.npm.pid as number, 'SIGTERM');
    await expectAllStopped(run);
  });

  it('npm run seed -- --user <id> --rows <n> gives that user n rows in the running database, as server bundles', async () => {
    const run = await serve();
    // Told only the start's data folder (as `npm start` was): the start's record there names its
    // database on the moved LOCKSTEP_PG_PORT.
    const seed = (...args: string[]) =>
      spawnSync('npm', ['run', 'seed', '--', ...args], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, LOCKSTEP_DATA_DIR: dataDir } });
    const result = seed('--user', 'carol', '--rows', '12345');
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('seed: 12345 / 12345 rows for carol');
    const client = new pg.Client({ connectionString: `postgres://postgres:postgres@127.0.0.1:${pgPort}/lockstep` });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT (SELECT count(*) FROM demo.lists WHERE _sync_scope_id = 'carol')::int AS lists,
        (SELECT count(*) FROM demo.todos WHERE _sync_scope_id = 'carol')::int AS todos,
        (SELECT count(*) FROM demo.todos WHERE _sync_scope_id <> 'carol')::int AS others`);
      expect(rows[0]).toEqual({ lists: 13, todos: 12345 - 13, others: 0 });
    } finally {
      await client.end();
    }
    const bad = seed('--user', 'carol');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('seed: --rows is required');
    // The status of the same start, found the same way.
    const status = spawnSync('npm', ['run', 'status', '--', '--user', 'carol'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, LOCKSTEP_DATA_DIR: dataDir } });
    expect(status.status, status.stderr).toBe(0);
    expect(status.stdout).toContain('user carol');
    // No start on that folder and nothing on the port: one line naming what was tried and what to set.
    const empty = mkdtempSync(join(tmpdir(), 'lockstep-nostart-'));
    try {
      const lost = spawnSync('npm', ['run', 'seed', '--', '--user', 'carol', '--rows', '1'], { cwd: ROOT, encoding: 'utf8',
        env: { ...process.env, LOCKSTEP_DATA_DIR: empty, LOCKSTEP_PG_PORT: String(await freePort()) } });
      expect(lost.status).toBe(1);
      expect(lost.stderr).toMatch(/seed: no database answers at 127\.0\.0\.1:\d+ \(no running npm start recorded in .*lockstep\.pid.*\).*LOCKSTEP_DATA_DIR.*DATABASE_URL/);
      expect(lost.stderr).not.toMatch(STACK);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
    process.kill(run.p.npm.pid as number, 'SIGTERM');
    await expectAllStopped(run);
  });

  it('a second start says which process holds the port, or which start holds the data folder', async () => {
    const first = await serve();
    const second = start();
    expect(await second.exited).toBe(1);
    const portLine = new RegExp(`lockstep: port ${port} \\(PORT, the API and demo\\) is already in use by pid ${first.server} \\(.*dev/start\\.ts\\): stop that process, or set PORT to a free port`);
    expect(second.output()).toMatch(portLine);
    expect(second.output()).not.toMatch(STACK);

    const otherPort = await freePort();
    const third = start({ PORT: String(otherPort) });
    expect(await third.exited).toBe(1);
    expect(third.output()).toMatch(new RegExp(`lockstep: another npm start \\(pid ${first.server} .*\\) is already running on ${dataDir}: stop it first`));
    expect(third.output()).not.toMatch(STACK);
    // The refused starts touched nothing of the first one.
    expect((await fetch(`http://127.0.0.1:${port}/syncx/health`)).status).toBe(200);
    process.kill(first.server, 'SIGTERM');
    await expectAllStopped(first);
  });

  it('after a hard kill of the server, its watchdog stops PostgreSQL and the next start serves', async () => {
    const run = await serve();
    process.kill(run.server, 'SIGKILL');
    expect(await gone(run.postgres), 'postgres stopped by the watchdog').toBe(true);
    await run.p.exited;
    expect(await listening(pgPort)).toBe(false);
    const next = await serve();
    process.kill(next.p.npm.pid as number, 'SIGINT');
    await expectAllStopped(next);
  });

  it('the next start stops a postgres left running and removes a stale postmaster.pid', async () => {
    // A run whose watchdog died too (as an older version had none): postgres outlives the server.
    const run = await serve();
    process.kill(run.watchdog as number, 'SIGKILL');
    process.kill(run.server, 'SIGKILL');
    await run.p.exited;
    expect(isAlive(run.postgres)).toBe(true);
    const next = await serve();
    expect(next.p.output()).toContain(`lockstep: stopping PostgreSQL pid ${run.postgres}`);
    expect(next.p.output()).toContain('left running by an earlier start');
    expect(isAlive(run.postgres)).toBe(false);

    // Everything killed at once (the process group, and the watchdog): postmaster.pid stays behind.
    process.kill(next.watchdog as number, 'SIGKILL');
    process.kill(-(next.p.npm.pid as number), 'SIGKILL');
    expect(await gone(next.postgres)).toBe(true);
    expect(pidIn(paths.postmaster)).toBe(next.postgres);
    const third = await serve();
    expect(third.p.output()).toContain('lockstep: removed a stale postmaster.pid left by an earlier start');
    process.kill(third.p.npm.pid as number, 'SIGTERM');
    await expectAllStopped(third);
  });

  it('a busy PostgreSQL or HTTP port is one line naming the process that holds it', async () => {
    const squatter: Server = createServer();
    const busy = await freePort();
    await new Promise<void>((resolve) => squatter.listen(busy, '127.0.0.1', resolve));
    try {
      const pgBusy = start({ LOCKSTEP_PG_PORT: String(busy) });
      expect(await pgBusy.exited).toBe(1);
      expect(pgBusy.output()).toMatch(
        new RegExp(`lockstep: port ${busy} \\(LOCKSTEP_PG_PORT, the embedded PostgreSQL\\) is already in use by pid ${process.pid} \\(.*\\): stop that process, or set LOCKSTEP_PG_PORT to a free port`),
      );
      expect(pgBusy.output()).not.toMatch(STACK);
      expect(existsSync(paths.lock)).toBe(false);

      const httpBusy = start({ PORT: String(busy) });
      expect(await httpBusy.exited).toBe(1);
      expect(httpBusy.output()).toMatch(new RegExp(`lockstep: port ${busy} \\(PORT, the API and demo\\) is already in use by pid ${process.pid} `));
      expect(httpBusy.output()).not.toMatch(STACK);
    } finally {
      squatter.close();
    }
  });

  it('PostgreSQL refusing to start is one line with the tail of its log', async () => {
    const conf = readFileSync(paths.conf, 'utf8');
    writeFileSync(paths.conf, `${conf}\nlockstep_no_such_setting = on\n`);
    try {
      const run = start();
      expect(await run.exited).toBe(1);
      expect(run.output()).toMatch(new RegExp(`lockstep: PostgreSQL did not start \\(data in ${dataDir}/pg17, port ${pgPort}\\); its log ends:`));
      expect(run.output()).toContain('unrecognized configuration parameter "lockstep_no_such_setting"');
      expect(run.output()).not.toMatch(STACK);
      expect(run.output()).not.toContain('undefined');
    } finally {
      writeFileSync(paths.conf, conf);
    }
  });

  it('DATABASE_URL without SYNC_TABLES says what SYNC_TABLES must hold', async () => {
    const run = start({ DATABASE_URL: `postgres://postgres:postgres@127.0.0.1:${pgPort}/lockstep` });
    expect(await run.exited).toBe(1);
    expect(run.output()).toContain('lockstep: invalid configuration: SYNC_TABLES: required: the registered tables, comma-separated schema.table:key_column');
    expect(run.output()).not.toMatch(STACK);
  });
});
