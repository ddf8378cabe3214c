/**
 * Proves each project's runtime pool goes where it claims: straight to PostgreSQL (pg16, pg17),
 * through PgBouncer in transaction mode (pgbouncer17: its own statistics count our
 * transactions, and consecutive statements may run on different server connections), or over
 * the Neon driver (neon17). Without this, a wiring slip would silently test the direct path.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { Pool as NeonPool } from '@neondatabase/serverless';
import { sql } from '../core/db/index.js';
import { HANG_MS } from './support/until.js';
import { openAppDb, type TestDb } from './support/server-db.js';

const runtime = inject('pgRuntime');
// The PgBouncer proofs exist only in the project that has PgBouncer: registered, not skipped,
// elsewhere (a skip means something is missing; see test/support/prerequisites.ts).
const viaBouncer = runtime.bouncerPort !== undefined ? it : () => undefined;

describe(`runtime pool route (${runtime.driver}${runtime.bouncerPort ? ' via PgBouncer' : ''})`, () => {
  let t: TestDb;
  beforeAll(async () => {
    t = await openAppDb();
  });
  afterAll(async () => t?.close());

  it('uses the driver the project names', async () => {
    if (runtime.driver === 'neon') expect(t.db.pool).toBeInstanceOf(NeonPool);
    else expect(t.db.pool).toBeInstanceOf(pg.Pool);
    const [row] = await t.db.query<{ db: string }>(sql`SELECT current_database() AS db`);
    expect(row?.db).toBe(new URL(t.url).pathname.slice(1));
  });

  viaBouncer('goes through PgBouncer in transaction pooling mode', async () => {
    const admin = new pg.Client({ connectionString: `postgres://postgres:postgres@127.0.0.1:${runtime.bouncerPort}/pgbouncer` });
    await admin.connect();
    try {
      const database = new URL(t.url).pathname.slice(1);
      const modeRows = (await admin.query('SHOW POOLS')).rows as Array<{ database: string; pool_mode: string }>;
      expect(modeRows.find((r) => r.database === database)?.pool_mode).toBe('transaction');
      const xacts = async () =>
        Number(((await admin.query('SHOW STATS')).rows as Array<{ database: string; total_xact_count: string }>).find((r) => r.database === database)?.total_xact_count ?? 0);
      const before = await xacts();
      await t.db.runTx(async (tx) => tx.query(sql`SELECT 1`));
      for (let i = 0; i < 3; i++) await t.db.query(sql`SELECT 1`);
      // PgBouncer may fold its counters in every stats_period (1 s here): poll briefly.
      await expect.poll(xacts, { timeout: HANG_MS, interval: 200 }).toBeGreaterThanOrEqual(before + 4);
    } finally {
      await admin.end();
    }
  });

  viaBouncer('hands consecutive statements of one client to different backends', async () => {
    // One client connection to PgBouncer, as a Lambda container holds; warm several server
    // connections first, then watch which backend serves each autocommit statement.
    const client = await t.db.pool.connect();
    try {
      await Promise.all([1, 2, 3].map(() => t.db.query(sql`SELECT pg_sleep(0.05)`)));
      const pids = new Set<number>();
      for (let i = 0; i < 6; i++) {
        const result = await client.query('SELECT pg_backend_pid() AS pid');
        const rows = Array.isArray(result) ? [] : result.rows;
        pids.add(Number(rows[0]?.['pid']));
      }
      // So any session state (SET, session advisory locks, named statements) would be lost.
      expect(pids.size).toBeGreaterThan(1);
    } finally {
      client.release();
    }
  });
});
