/**
 * The layout as the Citus generator sees it (./distribution.ts): the `sync` tables, the registered
 * tables in apply order, with their columns (type and collation), unique indexes and foreign
 * keys, and the managed functions with their argument names. Read from the catalogs in one
 * statement; reads no business row.
 */
import { raw, sql, type Queryable } from '../db/index.js';
import { type FunctionFacts, type LayoutFacts, type TableFacts } from './distribution.js';

/** Facts of the tables whose oids the subquery `oids` yields, as a JSON array. */
const TABLES_JSON = `
  SELECT coalesce(json_agg(json_build_object(
    'schema', n.nspname,
    'table', c.relname,
    'columns', (SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod),
                  'collation', CASE WHEN a.attcollation = 0 THEN NULL WHEN a.attcollation = 100 THEN 'default' ELSE co.collname END)
                  ORDER BY a.attnum)
                FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation
               WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
    'unique', coalesce((SELECT json_agg(json_build_object('name', ic.relname, 'primary', i.indisprimary,
                  'columns', (SELECT json_agg(coalesce(a.attname, '(expression)') ORDER BY k.ord)
                                FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
                                LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
                               WHERE k.ord <= i.indnkeyatts))
                  ORDER BY ic.relname)
                FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
               WHERE i.indrelid = c.oid AND i.indisunique), '[]'::json),
    'foreignKeys', coalesce((SELECT json_agg(json_build_object('name', f.conname,
                  'columns', (SELECT json_agg(a.attname ORDER BY k.ord) FROM unnest(f.conkey) WITH ORDINALITY k(attnum, ord)
                                JOIN pg_attribute a ON a.attrelid = f.conrelid AND a.attnum = k.attnum),
                  'references', rn.nspname || '.' || rc.relname,
                  'referencedColumns', (SELECT json_agg(a.attname ORDER BY k.ord) FROM unnest(f.confkey) WITH ORDINALITY k(attnum, ord)
                                JOIN pg_attribute a ON a.attrelid = f.confrelid AND a.attnum = k.attnum))
                  ORDER BY f.conname)
                FROM pg_constraint f JOIN pg_class rc ON rc.oid = f.confrelid JOIN pg_namespace rn ON rn.oid = rc.relnamespace
               WHERE f.conrelid = c.oid AND f.contype = 'f'), '[]'::json)
  ) ORDER BY o.ord), '[]'::json)
  FROM oids o JOIN pg_class c ON c.oid = o.oid JOIN pg_namespace n ON n.oid = c.relnamespace`;

/** Reads the facts of the current database (after bootstrap: the catalog names the registered tables). */
export async function readLayoutFacts(db: Queryable): Promise<LayoutFacts> {
  const [row] = await db.query<{ sync_tables: TableFacts[]; registered: TableFacts[]; functions: FunctionFacts[] }>(sql`
    SELECT
      (WITH oids AS (SELECT c.oid, row_number() OVER (ORDER BY c.relname) AS ord FROM pg_class c
                      WHERE c.relnamespace = 'sync'::regnamespace AND c.relkind IN ('r', 'p'))
       ${raw(TABLES_JSON)}) AS sync_tables,
      (WITH oids AS (SELECT to_regclass(format('%I.%I', t.schema_name, t.table_name)) AS oid,
                            row_number() OVER (ORDER BY t.apply_order, t.table_id) AS ord
                       FROM sync.table_catalog t WHERE NOT t.retired)
       ${raw(TABLES_JSON)}) AS registered,
      (SELECT coalesce(json_agg(json_build_object(
          'name', 'sync.' || p.proname,
          'signature', p.oid::regprocedure::text,
          'argumentNames', (SELECT coalesce(json_agg(coalesce(p.proargnames[k.ord], '') ORDER BY k.ord), '[]'::json)
                              FROM generate_subscripts(coalesce(p.proallargtypes, p.proargtypes::oid[]), 1) WITH ORDINALITY k(i, ord)
                             WHERE p.proargmodes IS NULL OR p.proargmodes[k.ord] IN ('i', 'b', 'v')),
          'argumentTypes', (SELECT coalesce(json_agg(format_type(t, NULL) ORDER BY k.ord), '[]'::json)
                              FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY k(t, ord)))
          ORDER BY p.oid::regprocedure::text), '[]'::json)
         FROM pg_proc p WHERE p.pronamespace = 'sync'::regnamespace) AS functions`);
  if (!row) throw new Error('no layout facts');
  return { syncTables: row.sync_tables, registeredTables: row.registered, functions: row.functions };
}
