/** Per-file database fixture for server tests: fresh database, app schema, bootstrap. */
import { inject } from 'vitest';
import pg from 'pg';
import { Db, createPool } from '../../core/db/index.js';
import { bootstrap } from '../../core/bootstrap/bootstrap.js';
import { type RegisteredTableDecl } from '../../core/config.js';
import { defaultLimits } from '../../core/limits.js';
import { createDatabase } from './pg-server.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './schemas.js';

export interface TestDb {
  readonly url: string;
  readonly db: Db;
  /** Runs SQL as the owner, outside any sync bundle (so the guards apply). */
  exec(text: string, values?: unknown[]): Promise<pg.QueryResult>;
  close(): Promise<void>;
}

export async function openTestDb(options: { schemaSql?: string; prefix?: string } = {}): Promise<TestDb> {
  const url = await createDatabase(inject('pgAdminUrl'), options.prefix ?? 't');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  if (options.schemaSql) await admin.query(options.schemaSql);
  const pool = await createPool({ connectionString: url, max: 8, driver: 'pg' });
  const db = new Db(pool, { statementTimeoutMs: defaultLimits.statementTimeoutMs, lockTimeoutMs: defaultLimits.lockTimeoutMs });
  return {
    url,
    db,
    exec: (text, values) => admin.query(text, values as unknown[]),
    close: async () => {
      await pool.end();
      await admin.end();
    },
  };
}

/** A fresh database with the app schema, bootstrapped. */
export async function openAppDb(tables: readonly RegisteredTableDecl[] = APP_TABLES, seedSql?: string): Promise<TestDb> {
  const t = await openTestDb({ schemaSql: APP_SCHEMA_SQL + (seedSql ?? '') });
  await bootstrap(t.db, { tables, maxSchemaVersion: 1 });
  return t;
}
