/**
 * What a request handler reads once per container (and again every `catalogRefreshSeconds`):
 * the layout's version range, the registered-table catalog, and the live declarations of those
 * tables, from which it tells drift (a registered column dropped, a trigger gone) from changes
 * that only wait for the next bootstrap (a column added). Catalog reads only, no business rows.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * Live columns (with whether an insert that omits one still gets a value: a default, an identity
 * or a generated column), the tables its foreign keys reference, and the reserved triggers of one
 * registered table, or null when it does not exist.
 */
export const tableLiveSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.table_live(p_schema text, p_table text) RETURNS jsonb LANGUAGE sql STABLE AS $fn$
  WITH rel AS (
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = p_schema AND c.relname = p_table AND c.relkind IN ('r', 'p')
  ), descendants AS (
    WITH RECURSIVE d(oid) AS (
      SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = (SELECT oid FROM rel)
      UNION SELECT i.inhrelid FROM pg_inherits i JOIN d ON i.inhparent = d.oid)
    SELECT oid FROM d
  )
  SELECT jsonb_build_object(
    'columns', coalesce((SELECT jsonb_agg(jsonb_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod),
        'not_null', a.attnotnull, 'has_default', a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '') ORDER BY a.attnum)
      FROM pg_attribute a WHERE a.attrelid = rel.oid AND a.attnum > 0 AND NOT a.attisdropped), '[]'::jsonb),
    'foreign_keys', coalesce((SELECT jsonb_agg(jsonb_build_object('schema', tn.nspname, 'table', tc.relname) ORDER BY k.conname)
      FROM pg_constraint k JOIN pg_class tc ON tc.oid = k.confrelid JOIN pg_namespace tn ON tn.oid = tc.relnamespace
     WHERE k.conrelid = rel.oid AND k.contype = 'f'), '[]'::jsonb),
    'triggers', coalesce((SELECT jsonb_object_agg(t.tgname, t.tgenabled::text)
      FROM pg_trigger t WHERE t.tgrelid = rel.oid AND t.tgname LIKE '\_lockstep\_%'), '{}'::jsonb),
    'unguarded', coalesce((SELECT jsonb_agg(n.nspname || '.' || c.relname ORDER BY 1)
      FROM descendants d JOIN pg_class c ON c.oid = d.oid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = d.oid AND t.tgname = '_lockstep_guard' AND t.tgenabled = 'O')), '[]'::jsonb))
  FROM rel
$fn$
`);

/**
 * Layout meta, every catalog entry (tables unregistered by an accepted contract step excluded) and
 * each registered table's live declaration, in one call.
 */
export const layoutStateSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.layout_state() RETURNS jsonb LANGUAGE sql STABLE AS $fn$
  SELECT jsonb_build_object(
    'meta', (SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) FROM sync.meta
              WHERE key IN ('ready', 'layout_version', 'min_safe_version', 'schema_version')),
    'tables', coalesce((SELECT jsonb_agg(jsonb_build_object('table_id', c.table_id, 'schema', c.schema_name,
        'table', c.table_name, 'key_column', c.key_column, 'key_kind', c.key_kind, 'columns', c.columns,
        'live', sync.table_live(c.schema_name, c.table_name)) ORDER BY c.table_id)
      FROM sync.table_catalog c WHERE NOT c.retired), '[]'::jsonb))
$fn$
`);
