/**
 * Reads the declarations of the registered tables from the PostgreSQL catalogs. Catalog reads
 * only: no business row is ever read here, so bootstrap can validate before it changes anything.
 */
import { sql, type Queryable } from '../db/index.js';
import { type RegisteredTableDecl } from '../config.js';
import { type ColumnInfo } from '../sync/catalog/table-sql.js';

export { type ColumnInfo } from '../sync/catalog/table-sql.js';

export interface UniqueIndexInfo {
  readonly name: string;
  /** `schema.table` that declares it: the registered table, or one of its descendants. */
  readonly relation: string;
  /** Declared on the registered table itself (not on a partition or inheritance child). */
  readonly onRoot: boolean;
  /** A unique index (or constraint), or the index of an exclusion constraint. */
  readonly kind: 'unique' | 'exclusion';
  readonly columns: readonly string[];
  /** Exclusion only: `_sync_scope_id` is one of its columns, compared with `=`. */
  readonly scopeEquality: boolean;
  readonly partial: boolean;
  readonly expression: boolean;
  readonly constraint: string | null;
}

export interface ForeignKeyInfo {
  readonly name: string;
  readonly columns: readonly string[];
  readonly refSchema: string;
  readonly refTable: string;
  readonly refColumns: readonly string[];
  readonly deferrable: boolean;
  readonly deferred: boolean;
  readonly updateAction: string;
  readonly deleteAction: string;
  /** The columns `ON DELETE SET NULL (…)` / `SET DEFAULT (…)` sets; empty when it names none (all). */
  readonly deleteSetColumns: readonly string[];
  readonly matchType: string;
}

export interface RelationInfo {
  readonly oid: number;
  readonly schema: string;
  readonly table: string;
  readonly relkind: string;
  readonly persistence: string;
  readonly columns: readonly ColumnInfo[];
}

export interface TableInfo extends RelationInfo {
  readonly decl: RegisteredTableDecl;
  /** The declared sync key column (`decl.keyColumn`). */
  readonly keyColumn: string;
  readonly descendants: readonly RelationInfo[];
  readonly uniqueIndexes: readonly UniqueIndexInfo[];
  readonly foreignKeys: readonly ForeignKeyInfo[];
}

interface RelRow {
  oid: number;
  schema: string;
  table: string;
  relkind: string;
  persistence: string;
}

async function columnsOf(db: Queryable, oid: number): Promise<ColumnInfo[]> {
  const rows = await db.query<{ name: string; type: string; not_null: boolean; generated: string; identity: string; default_expr: string | null }>(sql`
    SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
           a.attgenerated AS generated, a.attidentity AS identity,
           CASE WHEN a.attidentity <> '' THEN format('nextval(%L::regclass)', pg_get_serial_sequence(a.attrelid::regclass::text, a.attname))
                WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END AS default_expr
      FROM pg_attribute a
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = ${oid} AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY a.attnum`);
  return rows.map((r) => ({
    name: r.name,
    type: r.type,
    notNull: r.not_null,
    generated: r.generated !== '',
    identityAlways: r.identity === 'a',
    defaultExpr: r.default_expr,
  }));
}

async function relation(db: Queryable, row: RelRow): Promise<RelationInfo> {
  return { ...row, columns: await columnsOf(db, row.oid) };
}

const actionNames: Record<string, string> = { a: 'NO ACTION', r: 'RESTRICT', c: 'CASCADE', n: 'SET NULL', d: 'SET DEFAULT' };
const matchNames: Record<string, string> = { s: 'SIMPLE', f: 'FULL', p: 'PARTIAL' };

/** Describes one declared table, or returns null when it does not exist. */
export async function introspectTable(db: Queryable, decl: RegisteredTableDecl): Promise<TableInfo | null> {
  const [root] = await db.query<RelRow>(sql`
    SELECT c.oid::int AS oid, n.nspname AS schema, c.relname AS table, c.relkind::text AS relkind,
           c.relpersistence::text AS persistence
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = ${decl.schema} AND c.relname = ${decl.table}`);
  if (!root) return null;

  const descendantRows = await db.query<RelRow>(sql`
    WITH RECURSIVE d(oid) AS (
      SELECT inhrelid FROM pg_inherits WHERE inhparent = ${root.oid}
      UNION SELECT i.inhrelid FROM pg_inherits i JOIN d ON i.inhparent = d.oid)
    SELECT c.oid::int AS oid, n.nspname AS schema, c.relname AS table, c.relkind::text AS relkind,
           c.relpersistence::text AS persistence
      FROM d JOIN pg_class c ON c.oid = d.oid JOIN pg_namespace n ON n.oid = c.relnamespace
     ORDER BY n.nspname, c.relname`);

  // Every uniqueness of the table and of its descendants, wherever declared: unique indexes and
  // constraints, and the indexes behind exclusion constraints. A partition's copy of an index of
  // its parent (attached to it in pg_inherits) is the parent's, reported once, on the parent.
  const relations = [root.oid, ...descendantRows.map((r) => r.oid)];
  const uniqueRows = await db.query<{
    name: string; relation: string; on_root: boolean; exclusion: boolean; columns: string[] | null; scope_equality: boolean;
    partial: boolean; expression: boolean; constraint: string | null;
  }>(sql`
    SELECT ic.relname AS name, n.nspname || '.' || rc.relname AS relation, i.indrelid = ${root.oid} AS on_root,
           i.indisexclusion AS exclusion,
           (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts) AS columns,
           coalesce((SELECT bool_or(a.attname = '_sync_scope_id' AND o.oprname = '=')
              FROM unnest(con.conkey, con.conexclop) AS x(attnum, op)
              JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = x.attnum
              JOIN pg_operator o ON o.oid = x.op), false) AS scope_equality,
           i.indpred IS NOT NULL AS partial,
           (i.indexprs IS NOT NULL OR 0 = ANY (i.indkey::int2[])) AS expression,
           con.conname AS constraint
      FROM pg_index i
      JOIN pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_class rc ON rc.oid = i.indrelid JOIN pg_namespace n ON n.oid = rc.relnamespace
      LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
     WHERE i.indrelid = ANY (${relations}::oid[]) AND (i.indisunique OR i.indisexclusion)
       AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid)
     ORDER BY 2, 1`);

  const fkRows = await db.query<{
    name: string; columns: string[]; ref_schema: string; ref_table: string; ref_columns: string[];
    deferrable: boolean; deferred: boolean; upd: string; del: string; match: string; del_set_columns: string[];
  }>(sql`
    SELECT con.conname AS name,
           (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(con.conkey) WITH ORDINALITY k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum) AS columns,
           rn.nspname AS ref_schema, rc.relname AS ref_table,
           (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(con.confkey) WITH ORDINALITY k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum) AS ref_columns,
           con.condeferrable AS deferrable, con.condeferred AS deferred,
           con.confupdtype::text AS upd, con.confdeltype::text AS del, con.confmatchtype::text AS match,
           coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(con.confdelsetcols) WITH ORDINALITY k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum), '{}') AS del_set_columns
      FROM pg_constraint con
      JOIN pg_class rc ON rc.oid = con.confrelid JOIN pg_namespace rn ON rn.oid = rc.relnamespace
     WHERE con.conrelid = ${root.oid} AND con.contype = 'f' AND con.conparentid = 0
     ORDER BY con.conname`);

  return {
    ...(await relation(db, root)),
    decl,
    keyColumn: decl.keyColumn,
    descendants: await Promise.all(descendantRows.map((r) => relation(db, r))),
    uniqueIndexes: uniqueRows.map((u) => ({
      name: u.name,
      relation: u.relation,
      onRoot: u.on_root,
      kind: u.exclusion ? ('exclusion' as const) : ('unique' as const),
      columns: u.columns ?? [],
      scopeEquality: u.scope_equality,
      partial: u.partial,
      expression: u.expression,
      constraint: u.constraint,
    })),
    foreignKeys: fkRows.map((f) => ({
      name: f.name,
      columns: f.columns,
      refSchema: f.ref_schema,
      refTable: f.ref_table,
      refColumns: f.ref_columns,
      deferrable: f.deferrable,
      deferred: f.deferred,
      updateAction: actionNames[f.upd] ?? f.upd,
      deleteAction: actionNames[f.del] ?? f.del,
      deleteSetColumns: f.del_set_columns,
      matchType: matchNames[f.match] ?? f.match,
    })),
  };
}
