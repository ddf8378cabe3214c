/**
 * `npm start`: the whole product on one machine. Without DATABASE_URL it starts embedded
 * PostgreSQL 17 under .data/, creates the demo schema, bootstraps, and serves the API and the
 * demo app on http://localhost:8787. With DATABASE_URL it bootstraps that database (a no-op
 * revalidation when it is already ready) and serves it. The demo is built into demo/dist first
 * (dev/build-demo.ts).
 */
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../core/config.js';
import { createPool } from '../core/db/index.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { createRuntime } from '../functions/index.js';
import { THIS_BUILD } from '../core/sync/index.js';
import { startCommitFeed } from '../core/sync/notify/commit-feed.js';
import { DEMO_SCHEMA_SQL, DEMO_SYNC_TABLES } from '../demo/schema.js';
import { buildDemo } from './build-demo.js';
import { startGateway } from './gateway.js';
import { startLocalDatabase, type LocalDatabase } from './embedded-db.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const DEV_SECRET = 'lockstep-local-development-secret-change-me';

async function main(): Promise<void> {
  const env: Record<string, string | undefined> = { ...process.env };
  let local: LocalDatabase | undefined;
  if (!env['DATABASE_URL']) {
    const port = Number(env['LOCKSTEP_PG_PORT'] ?? 54329);
    console.log(`lockstep: starting embedded PostgreSQL 17 in .data/pg17 (port ${port})`);
    local = await startLocalDatabase(join(root, '.data'), port);
    env['DATABASE_URL'] = local.url;
    const client = new pg.Client({ connectionString: local.url });
    await client.connect();
    await client.query(DEMO_SCHEMA_SQL);
    await client.end();
    env['SYNC_TABLES'] ??= DEMO_SYNC_TABLES;
    env['SYNC_APP_NAME'] ??= 'lockstep-demo';
  }
  if (!env['SYNC_JWT_SECRET'] && !env['SYNC_JWKS_URL']) {
    env['SYNC_JWT_SECRET'] = DEV_SECRET;
    console.warn('lockstep: SYNC_JWT_SECRET is not set; using a development secret and enabling POST /dev/token');
  }
  const config = loadConfig(env);
  const pool = await createPool({
    connectionString: config.databaseUrl,
    max: config.dbPoolMax,
    driver: config.dbDriver,
    ...(config.neonWsProxy ? { neonWsProxy: config.neonWsProxy } : {}),
  });
  // One LISTEN connection for the whole process (never through the pool): long polls and the
  // WebSockets of /sync/ws wait on it instead of polling.
  const feed = config.listenUrl ? await startCommitFeed(config.listenUrl) : undefined;
  const runtime = createRuntime(config, pool, THIS_BUILD, { feed });
  const result = await bootstrap(runtime.db, { tables: config.tables, maxSchemaVersion: config.maxSchemaVersion });
  console.log(`lockstep: bootstrap ${result.created ? `created the sync layout (adopted ${result.adoptedRows} rows)` : 'verified the existing sync layout'}`);

  // The demo is rebuilt on every start (under a second), so it always matches the sources.
  const demo = await buildDemo();
  console.log(`lockstep: built the demo app in ${demo.elapsedMs} ms`);
  const staticDir = demo.outDir;
  const gateway = await startGateway({
    runtime,
    auth: { secret: env['SYNC_JWT_SECRET'], jwksUrl: env['SYNC_JWKS_URL'] },
    host: env['HOST'] ?? '127.0.0.1',
    port: Number(env['PORT'] ?? 8787),
    staticDir,
    devTokens: env['SYNC_JWT_SECRET'] === DEV_SECRET || env['LOCKSTEP_DEV_TOKENS'] === '1',
  });
  console.log(`lockstep: serving on ${gateway.url.replace('127.0.0.1', 'localhost')} (health: /syncx/health)`);

  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    console.log(`lockstep: ${signal}, shutting down`);
    await gateway.close();
    await feed?.close();
    await pool.end();
    await local?.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
