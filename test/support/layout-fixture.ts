/**
 * The first release's database (layout version 1), loaded from test/fixtures/layout-v1.sql: the
 * test app schema bootstrapped by that release and used through its HTTP API (see the file's
 * header). The ids below are the fixture's.
 */
import { readFileSync } from 'node:fs';
import { inject } from 'vitest';
import pg from 'pg';
import { Db, createPool } from '../../core/db/index.js';
import { defaultLimits } from '../../core/limits.js';
import { createDatabase } from './pg-server.js';
import { adminHandle, runtimePoolOptions, type TestDb } from './server-db.js';

export const V1_FIXTURE_SQL = readFileSync(new URL('../fixtures/layout-v1.sql', import.meta.url), 'utf8');

/** Keys and names the fixture's rows use. */
export const V1 = {
  adoptedList: '0a000000-0000-4000-8000-000000000001',
  aliceList: '0b000000-0000-4000-8000-000000000001',
  aliceItem: '0b000000-0000-4000-8000-000000000003',
  staged: '0b000000-0000-4000-8000-000000000005',
  staged2: '0b000000-0000-4000-8000-000000000006',
  bobList: '0c000000-0000-4000-8000-000000000001',
} as const;

/** A fresh database holding the v1 fixture, with the runtime's pool as server-db opens it. */
export async function openV1Db(): Promise<TestDb> {
  const url = await createDatabase(inject('pgAdminUrl'), 'v1');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(V1_FIXTURE_SQL);
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
