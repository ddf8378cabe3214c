/**
 * A deterministic description of every managed object: the `sync` schema's relations, columns,
 * constraints, indexes, sequences and functions, plus the reserved `_lockstep_*` triggers on the
 * registered tables. Bootstrap stores it whenever it changes the layout; a restart compares the
 * live description with the stored one and names every line that differs (drift). Function
 * bodies are described by the hash of their normalized text, so comments and formatting do not
 * count. The upgrade tests compare the descriptions of a fresh and an upgraded database.
 */
import { sql, type Queryable } from '../db/index.js';
import { createHash } from 'node:crypto';
import { sqlHash } from '../layout/managed-sql.js';

/**
 * 1: the first release's format (function bodies as md5 of their raw text), kept to check a
 * database of that release before upgrading it; 2: bodies as hashes of normalized text.
 */
export type DescriptionFormat = 1 | 2;

export async function describeLayout(db: Queryable, format: DescriptionFormat = 2): Promise<string[]> {
  const rows = await db.query<{ line: string }>(sql`
    WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = 'sync')
    SELECT 'relation sync.' || c.relname || ' kind=' || c.relkind::text || ' persistence=' || c.relpersistence::text AS line
      FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns)
    UNION ALL
    SELECT 'column sync.' || c.relname || '.' || a.attname || ' #' || a.attnum || ' ' || format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
      FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
      LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
     WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'constraint sync.' || c.relname || '.' || con.conname || ' ' || pg_get_constraintdef(con.oid)
           || CASE WHEN con.convalidated THEN '' ELSE ' not valid' END
      FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
     WHERE c.relnamespace = (SELECT oid FROM ns)
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid) || CASE WHEN i.indisvalid THEN '' ELSE ' invalid' END
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = (SELECT oid FROM ns)
    UNION ALL
    SELECT 'sequence sync.' || c.relname || ' ' || format_type(s.seqtypid, NULL) || ' start=' || s.seqstart
           || ' increment=' || s.seqincrement || ' min=' || s.seqmin || ' max=' || s.seqmax || ' cycle=' || s.seqcycle
      FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace = (SELECT oid FROM ns)
    UNION ALL
    SELECT 'function sync.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') returns '
           || pg_get_function_result(p.oid) || ' lang=' || l.lanname || ' volatility=' || p.provolatile::text
           || ' config=' || coalesce(array_to_string(p.proconfig, ','), '') || ' body=' || chr(1) || p.prosrc
      FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = (SELECT oid FROM ns)
    UNION ALL
    SELECT 'trigger ' || n.nspname || '.' || c.relname || '.' || t.tgname || ' type=' || t.tgtype
           || ' enabled=' || t.tgenabled::text || ' function=' || t.tgfoid::regprocedure::text
           || ' args=' || encode(t.tgargs, 'escape') || ' old=' || coalesce(t.tgoldtable, '') || ' new=' || coalesce(t.tgnewtable, '')
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE NOT t.tgisinternal AND (t.tgname LIKE '\_lockstep\_%' OR t.tgfoid IN (
             SELECT p.oid FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM ns)))
    ORDER BY 1`);
  // chr(1) marks where a function's body starts; the body becomes the hash of its normalized text.
  return rows
    .map((r) => {
      const at = r.line.indexOf('\u0001');
      if (at < 0) return r.line;
      const body = r.line.slice(at + 1);
      return r.line.slice(0, at) + (format === 1 ? createHash('md5').update(body).digest('hex') : sqlHash(body).slice(0, 32));
    })
    .sort();
}

/** Lines present on one side only, phrased for an operator. */
export function diffDescriptions(expected: readonly string[], actual: readonly string[]): string[] {
  const want = new Set(expected);
  const have = new Set(actual);
  return [
    ...expected.filter((l) => !have.has(l)).map((l) => `missing or changed: ${l}`),
    ...actual.filter((l) => !want.has(l)).map((l) => `unexpected: ${l}`),
  ];
}
