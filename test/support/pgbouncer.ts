/**
 * PgBouncer in transaction pooling mode in front of a test server: the pooled PostgreSQL the
 * protocol targets (docs/protocol.md §1). Every transaction, and every statement outside one, may land on a
 * different server connection, so any session state the runtime relied on would break here.
 *
 * Uses the Debian package's /usr/sbin/pgbouncer (`.ci/run` installs it). PgBouncer refuses to run
 * as root, so as root it drops to an unprivileged user.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './pg-server.js';
import { needs, PGBOUNCER_BIN } from './prerequisites.js';
import { HANG_MS } from './until.js';

export interface PgBouncer {
  readonly port: number;
  /** The same URL with host and port replaced by PgBouncer's. */
  rewrite(url: string): string;
  stop(): Promise<void>;
}

function unprivilegedUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const user of ['postgres', 'nobody']) if (spawnSync('id', ['-u', user]).status === 0) return user;
  throw new Error('pgbouncer cannot run as root and no unprivileged user (postgres, nobody) exists');
}

async function waitForPort(port: number, child: ChildProcess, output: () => string, timeoutMs = HANG_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited with ${child.exitCode}: ${output()}`);
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`pgbouncer did not listen on ${port} within ${timeoutMs} ms: ${output()}`);
}

export interface PgBouncerOptions {
  /**
   * PgBouncer's `query_wait_timeout`: how long a client waits for a server connection before
   * PgBouncer fails its query (default 120 s). Tests that make the server unreachable set it low.
   */
  readonly queryWaitTimeoutSeconds?: number;
  /** PgBouncer's `server_login_retry`: the pause after a failed server login (default 15 s). */
  readonly serverLoginRetrySeconds?: number;
  /** Server connections per database and user (`default_pool_size`, 10 here unless set). */
  readonly poolSize?: number;
  /** Server connections per database in all (`max_db_connections`, 20 here unless set). */
  readonly maxDbConnections?: number;
}

/** Starts PgBouncer (pool_mode=transaction) forwarding every database to `adminUrl`'s server. */
export async function startPgBouncer(adminUrl: string, options: PgBouncerOptions = {}): Promise<PgBouncer> {
  if (!PGBOUNCER_BIN) throw new Error(needs().pgbouncer.missing);
  const server = new URL(adminUrl);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'lockstep-pgbouncer-'));
  chmodSync(dir, 0o755);
  const ini = join(dir, 'pgbouncer.ini');
  const userlist = join(dir, 'userlist.txt');
  // Clients on loopback are trusted; the userlist holds the password PgBouncer uses to log in to
  // the server. Server connections are plentiful: the point is transaction pooling, not scarcity.
  writeFileSync(userlist, `"${user}" "${password}"\n`, { mode: 0o644 });
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${userlist}`,
      'pool_mode = transaction',
      'max_client_conn = 1000',
      `default_pool_size = ${options.poolSize ?? 10}`,
      `max_db_connections = ${options.maxDbConnections ?? 20}`,
      'ignore_startup_parameters = extra_float_digits,options',
      'stats_period = 1',
      // Hand each transaction the longest-idle server connection rather than the last one, so
      // consecutive transactions of one client really land on different backends.
      'server_round_robin = 1',
      ...(options.queryWaitTimeoutSeconds !== undefined ? [`query_wait_timeout = ${options.queryWaitTimeoutSeconds}`] : []),
      ...(options.serverLoginRetrySeconds !== undefined ? [`server_login_retry = ${options.serverLoginRetrySeconds}`] : []),
      'log_connections = 0',
      'log_disconnections = 0',
      `admin_users = ${user}`,
      `stats_users = ${user}`,
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const runAs = unprivilegedUser();
  const child = spawn(PGBOUNCER_BIN, [...(runAs ? ['-u', runAs] : []), ini], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  await waitForPort(port, child, () => output);
  return {
    port,
    rewrite(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGINT');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
