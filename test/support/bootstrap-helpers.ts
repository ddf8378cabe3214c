/**
 * Helpers for the bootstrap suites (test/bootstrap-*.pg.test.ts): a catalog fingerprint of the
 * managed layout, and a database handle that records every statement it sends and can force
 * every transaction to be read only (so a write attempt fails loudly instead of going unseen).
 */
import pg from 'pg';
import { Db, type PoolLike } from '../../core/db/index.js';
import { defaultLimits } from '../../core/limits.js';
import { type TestDb } from './server-db.js';

/**
 * Everything bootstrap could change, with the row versions (xmin) and file nodes that any
 * rewrite, ALTER, CREATE OR REPLACE or UPDATE would move: relations, columns, constraints,
 * indexes, functions and sequences of `sync`, the `sync.meta` and `sync.table_catalog` rows, and
 * every trigger on a table outside `sync`.
 */
export async function layoutFingerprint(t: TestDb): Promise<string[]> {
  const { rows } = await t.exec(`
    WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = 'sync')
    SELECT 'rel ' || c.relname || ' ' || c.oid || ' ' || c.relfilenode || ' ' || c.xmin AS line FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns)
    UNION ALL SELECT 'att ' || c.relname || '.' || a.attname || ' ' || a.xmin FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE c.relnamespace = (SELECT oid FROM ns) AND a.attnum > 0
    UNION ALL SELECT 'con ' || con.conname || ' ' || con.oid || ' ' || con.xmin FROM pg_constraint con WHERE con.connamespace = (SELECT oid FROM ns)
    UNION ALL SELECT 'proc ' || p.proname || ' ' || p.oid || ' ' || p.xmin || ' ' || md5(p.prosrc) FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM ns)
    UNION ALL SELECT 'trg ' || t.tgrelid::regclass || '.' || t.tgname || ' ' || t.oid || ' ' || t.xmin || ' ' || t.tgenabled::text FROM pg_trigger t
      JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace <> (SELECT oid FROM ns) AND NOT t.tgisinternal
    UNION ALL SELECT 'meta ' || m.key || ' ' || m.xmin || ' ' || md5(m.value) FROM sync.meta m
    UNION ALL SELECT 'catalog ' || tc.table_id || ' ' || tc.xmin FROM sync.table_catalog tc
    ORDER BY 1`);
  return rows.map((r) => r.line as string);
}

export interface RecordingDb {
  readonly db: Db;
  /** Every statement text sent, in order. */
  readonly statements: string[];
  close(): Promise<void>;
}

/**
 * A fresh pool on `url` whose sessions start with `default_transaction_read_only = on` when
 * `readOnly` is set, recording every statement text. Real connections, real driver; only the
 * text is noted on the way out.
 */
export function recordingDb(url: string, options: { readOnly?: boolean } = {}): RecordingDb {
  const statements: string[] = [];
  const pool = new pg.Pool({
    connectionString: url,
    max: 2,
    ...(options.readOnly ? { options: '-c default_transaction_read_only=on' } : {}),
  });
  pool.on('error', () => {});
  const wrappedClients = new WeakSet<object>();
  const wrapped: PoolLike = {
    query: (text, values) => {
      statements.push(text);
      return pool.query(text, values) as any;
    },
    connect: async () => {
      const client = await pool.connect();
      if (!wrappedClients.has(client)) {
        wrappedClients.add(client);
        const original = client.query.bind(client) as (...args: unknown[]) => unknown;
        (client as any).query = (text: unknown, ...rest: unknown[]) => {
          statements.push(typeof text === 'string' ? text : String((text as { text?: string }).text));
          return original(text, ...rest);
        };
      }
      return client as any;
    },
    end: () => pool.end(),
  };
  return {
    db: new Db(wrapped, { statementTimeoutMs: defaultLimits.statementTimeoutMs, lockTimeoutMs: defaultLimits.lockTimeoutMs }),
    statements,
    close: () => pool.end(),
  };
}
