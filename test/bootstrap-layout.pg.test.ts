/**
 * Issue 3, the managed layout: a second bootstrap changes nothing (catalog fingerprint equal, run
 * on read-only sessions, no lock, no business-row read), and each kind of tampering with a managed
 * object is a ManagedLayoutMismatchError that names the object.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAppDb, openTestDb, type TestDb } from './support/server-db.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './support/schemas.js';
import { layoutFingerprint, recordingDb } from './support/bootstrap-helpers.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { ManagedLayoutMismatchError } from '../core/errors.js';

describe('bootstrap twice', () => {
  let t: TestDb;
  beforeAll(async () => {
    // The first bootstrap runs on its own pool, closed at once: its backends exit and flush
    // their statistics, so the statistics below see only what the second run does.
    t = await openTestDb({ schemaSql: APP_SCHEMA_SQL });
    const first = recordingDb(t.url);
    try {
      expect((await bootstrap(first.db, { tables: APP_TABLES })).created).toBe(true);
    } finally {
      await first.close();
    }
  });
  afterAll(async () => t?.close());

  it('the second run changes nothing, takes no lock, reads no business row and runs READ ONLY', async () => {
    const before = await layoutFingerprint(t);
    expect(before.some((l) => l.startsWith('trg app.lists._lockstep_guard '))).toBe(true);
    // Every session of this pool defaults to read only, so any write (DDL, DML, nextval, a
    // table lock stronger than ACCESS SHARE) would fail the run rather than go unnoticed.
    const r = recordingDb(t.url, { readOnly: true });
    let result;
    try {
      result = await bootstrap(r.db, { tables: APP_TABLES });
    } finally {
      await r.close();
    }
    expect(result.created).toBe(false);
    expect(result.adoptedRows).toBe(0);
    expect(await layoutFingerprint(t)).toEqual(before);
    const begins = r.statements.filter((s) => /^\s*BEGIN/i.test(s));
    expect(begins.length).toBeGreaterThan(0);
    expect(begins.every((s) => /READ ONLY/.test(s)), begins.join('\n')).toBe(true);
    const writes = r.statements.filter((s) => /\b(LOCK TABLE|CREATE|INSERT INTO|UPDATE\s+\w|DELETE FROM|ALTER|DROP|TRUNCATE|pg_advisory)\b|(?<!format\(')nextval\(/i.test(s));
    expect(writes).toEqual([]);
    // No statement names a business table: validation reads catalogs only.
    expect(r.statements.filter((s) => /"?app"?\.\s*"?(lists|items|kinds)\b/.test(s))).toEqual([]);
  });

  it('the second run commits no write transaction (statistics: no rollback, no tuple written, no business-table scan)', async () => {
    // Measured with the statistics of this database only; other suites run in other databases.
    // Tuple counters of the sync and business tables (not the database total: autovacuum's
    // ANALYZE of a fresh layout writes catalog rows at any moment), and scans of business tables.
    const stats = async (): Promise<{ commits: number; rollbacks: number; tup: number; appScans: number }> => {
      await t.exec(`SELECT pg_stat_clear_snapshot()`);
      const { rows } = await t.exec(`SELECT d.xact_commit::int AS c, d.xact_rollback::int AS r,
        (SELECT sum(n_tup_ins + n_tup_upd + n_tup_del)::int FROM pg_stat_user_tables WHERE schemaname IN ('sync', 'app')) AS tup,
        (SELECT sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0))::int FROM pg_stat_user_tables WHERE schemaname = 'app') AS scans
        FROM pg_stat_database d WHERE d.datname = current_database()`);
      return { commits: rows[0].c, rollbacks: rows[0].r, tup: rows[0].tup, appScans: rows[0].scans };
    };
    // Statistics arrive when a backend exits: wait until no other session of this database is
    // left and the counters stop moving (the first bootstrap's adoption scans arrive late).
    const settled = async (): Promise<{ commits: number; rollbacks: number; tup: number; appScans: number }> => {
      for (let i = 0; i < 50; i++) {
        const { rows } = await t.exec(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
        if (rows[0].n === 0) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      // Six equal reads 300 ms apart: under load a backend's exit flush lands well after it leaves pg_stat_activity.
      let last = await stats();
      let equalReads = 0;
      for (let i = 0; i < 40 && equalReads < 5; i++) {
        await new Promise((res) => setTimeout(res, 300));
        const next = await stats();
        equalReads = JSON.stringify({ ...next, commits: 0 }) === JSON.stringify({ ...last, commits: 0 }) ? equalReads + 1 : 0;
        last = next;
      }
      return last;
    };
    const before = await settled();
    const r2 = recordingDb(t.url);
    try {
      await bootstrap(r2.db, { tables: APP_TABLES });
    } finally {
      await r2.close(); // a closing backend flushes its statistics
    }
    const after = await settled();
    // Transactions happened (the read-only ones), but none rolled back and no tuple was written.
    expect(after.commits).toBeGreaterThan(before.commits);
    expect(after.rollbacks).toBe(before.rollbacks);
    expect(after.tup).toBe(before.tup);
    expect(after.appScans).toBe(before.appScans);
  });
});

/** Each case: fresh bootstrapped database, one tampering statement, the name the error must carry. */
const TAMPERING: { name: string; sql: string; names: RegExp }[] = [
  { name: 'drop an index in sync', sql: 'DROP INDEX sync.snapshot_sessions_expires_idx', names: /snapshot_sessions_expires_idx/ },
  { name: 'alter a column type', sql: 'ALTER TABLE sync.bundle_log ALTER COLUMN bundle_hash TYPE varchar(64)', names: /bundle_log\.bundle_hash/ },
  {
    name: 'replace a sync function with another body',
    sql: `CREATE OR REPLACE FUNCTION sync.op_name(p_op smallint) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$ SELECT 'INSERT' $fn$`,
    names: /function sync\.op_name/,
  },
  { name: 'disable the guard trigger', sql: 'ALTER TABLE app.lists DISABLE TRIGGER _lockstep_guard', names: /app\.lists\._lockstep_guard / },
  { name: 'drop a capture trigger', sql: 'DROP TRIGGER _lockstep_capture_update ON app.items', names: /app\.items\._lockstep_capture_update/ },
  { name: 'drop a counter sequence', sql: 'DROP SEQUENCE sync.counter_rejected_direct_writes', names: /counter_rejected_direct_writes/ },
  // Under the bootstrap lock, as an operator would have to (the sync tables refuse direct writes).
  { name: 'mark the layout not ready', sql: `BEGIN; SELECT pg_advisory_xact_lock(7020140421); UPDATE sync.meta SET value = 'false' WHERE key = 'ready'; COMMIT`, names: /ready/ },
  // Issue 15 item 13: a layout whose own bookkeeping is gone or reshaped failed with a raw
  // PostgreSQL error (42P01, 42703; 25P02 once a failed read had aborted the transaction) instead
  // of naming what drifted.
  { name: 'drop sync.meta', sql: 'DROP TABLE sync.meta', names: /sync\.meta/ },
  { name: 'drop sync.meta and sync.table_catalog', sql: 'DROP TABLE sync.meta, sync.table_catalog CASCADE', names: /sync\.meta/ },
  { name: 'rename a column of sync.meta', sql: 'ALTER TABLE sync.meta RENAME COLUMN value TO v', names: /sync\.meta/ },
  { name: 'replace sync.meta by a table of another shape', sql: 'DROP TABLE sync.meta; CREATE TABLE sync.meta (key int)', names: /sync\.meta/ },
  { name: 'an empty schema named sync', sql: 'DROP SCHEMA sync CASCADE; CREATE SCHEMA sync', names: /sync\.meta/ },
];

describe('tampering with a managed object', () => {
  for (const c of TAMPERING) {
    it(`${c.name} → managed_layout_mismatch naming it`, async () => {
      const t = await openAppDb();
      try {
        await t.exec(c.sql);
        const error = await bootstrap(t.db, { tables: APP_TABLES }).catch((e: unknown) => e);
        expect(error, String(error)).toBeInstanceOf(ManagedLayoutMismatchError);
        expect((error as ManagedLayoutMismatchError).code).toBe('managed_layout_mismatch');
        expect((error as Error).message).toMatch(c.names);
      } finally {
        await t.close();
      }
    });
  }
});
