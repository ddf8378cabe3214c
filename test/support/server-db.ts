/** Per-file database fixture for server tests: fresh database, app schema, bootstrap. */
import { inject } from 'vitest';
import pg from 'pg';
import { Db, createPool, type PoolOptions } from '../../core/db/index.js';
import { bootstrap, BOOTSTRAP_LOCK_KEY } from '../../core/bootstrap/bootstrap.js';
import { type RegisteredTableDecl } from '../../core/config.js';
import { defaultLimits } from '../../core/limits.js';
import { createDatabase } from './pg-server.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './schemas.js';

// Lives beside the template (no vitest import there, so globalSetup can use it); re-exported for the suites.
export { bootstrapAppSchema } from './app-template.js';

export interface TestDb {
  /** Direct URL of the database (admin work, `pg` clients of the test itself). */
  readonly url: string;
  /** The runtime's pool: direct, through PgBouncer or over the Neon driver (see runtimePoolOptions). */
  readonly db: Db;
  /** Runs SQL as the owner, outside any sync bundle (so the guards apply). */
  exec(text: string, values?: unknown[]): Promise<pg.QueryResult>;
  /**
   * Runs SQL as an operator repairing by hand: in a transaction that holds the bootstrap lock, as
   * the README says, since the sync tables refuse direct writes otherwise (tests use it to age a
   * session or a lease as time would).
   */
  operator(text: string, values?: unknown[]): Promise<pg.QueryResult>;
  close(): Promise<void>;
}

/**
 * Pool options for the runtime under test: node-postgres straight to the server (pg16, pg17),
 * through PgBouncer in transaction mode (pgbouncer17), or the Neon driver over a WebSocket
 * forwarder (neon17). `url` is a direct URL as `createDatabase` returns it.
 */
export function runtimePoolOptions(url: string, max: number): PoolOptions {
  const runtime = inject('pgRuntime') ?? { driver: 'pg' };
  if (runtime.driver === 'neon') return { connectionString: url, max, driver: 'neon', ...(runtime.neonWsProxy ? { neonWsProxy: runtime.neonWsProxy } : {}) };
  if (runtime.bouncerPort === undefined) return { connectionString: url, max, driver: 'pg' };
  const pooled = new URL(url);
  pooled.hostname = '127.0.0.1';
  pooled.port = String(runtime.bouncerPort);
  return { connectionString: pooled.toString(), max, driver: 'pg' };
}

/** `exec` and `operator` of a TestDb, over the test's own admin connection. */
export function adminHandle(admin: pg.Client): Pick<TestDb, 'exec' | 'operator'> {
  return {
    exec: (text, values) => admin.query(text, values as unknown[]),
    operator: async (text, values) => {
      await admin.query('BEGIN');
      try {
        await admin.query(`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`);
        const result = await admin.query(text, values as unknown[]);
        await admin.query('COMMIT');
        return result;
      } catch (error) {
        await admin.query('ROLLBACK');
        throw error;
      }
    },
  };
}

/**
 * A fresh database: empty but for `schemaSql`, or with `template: true` a copy of the app
 * database the real bootstrap prepared once for this server (test/support/app-template.ts).
 */
export async function openTestDb(options: { schemaSql?: string; prefix?: string; template?: boolean } = {}): Promise<TestDb> {
  const url = await createDatabase(inject('pgAdminUrl'), options.prefix ?? 't', options.template ? inject('pgAppTemplate') : undefined);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  if (options.schemaSql) await admin.query(options.schemaSql);
  const pool = await createPool(runtimePoolOptions(url, 8));
  const db = new Db(pool, { statementTimeoutMs: defaultLimits.statementTimeoutMs, lockTimeoutMs: defaultLimits.lockTimeoutMs });
  return {
    url,
    db,
    ...adminHandle(admin),
    close: async () => {
      await pool.end();
      await admin.end();
    },
  };
}

/** A fresh database with the app schema, bootstrapped (copied from the template when it is the default). */
export async function openAppDb(tables: readonly RegisteredTableDecl[] = APP_TABLES, seedSql?: string): Promise<TestDb> {
  if (tables === APP_TABLES && !seedSql) return openTestDb({ template: true });
  const t = await openTestDb({ schemaSql: APP_SCHEMA_SQL + (seedSql ?? '') });
  await bootstrap(t.db, { tables });
  return t;
}
