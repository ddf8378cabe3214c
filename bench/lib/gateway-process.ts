/**
 * Lockstep's gateway as `npm start` runs it (dev/start.ts over the bench's database), in a process
 * of its own: the client's thread then does no server work, as a browser's beside a Lambda
 * function, and as Zero's client beside zero-cache in `bench:peers`. The bench's own gateway
 * (lib/server.ts) shares the client's thread, so the request for the next page, sent before the
 * client applies a page, reaches PostgreSQL only after that apply.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SYNC_TABLES_SPEC } from './schema.js';
import { BENCH_JWT_SECRET, freePort, type BenchServer } from './server.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const READY_MS = 120_000;

export interface GatewayProcess {
  /** The bench server as seen through this gateway: the same database, another URL. */
  readonly server: BenchServer;
  close(): Promise<void>;
}

export async function startGatewayProcess(server: BenchServer): Promise<GatewayProcess> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'lockstep-bench-start-'));
  const output: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'dev', 'start.ts')], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: server.databaseUrl, SYNC_TABLES: SYNC_TABLES_SPEC, SYNC_JWT_SECRET: BENCH_JWT_SECRET,
      SYNC_APP_NAME: 'lockstep-bench', PORT: String(port), LOCKSTEP_DATA_DIR: dataDir },
  });
  child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  const url = `http://127.0.0.1:${port}`;
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + READY_MS;
  for (;;) {
    if (await fetch(`${url}/syncx/health`).then((r) => r.ok, () => false)) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await close();
      throw new Error(`the gateway process (npm start) was not ready after ${READY_MS / 1000} s; its output:\n${output.join('').slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { server: { ...server, url }, close };
}
