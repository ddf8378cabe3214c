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
  readonly columns: readonly string[];
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

  const uniqueRows = await db.query<{ name: string; columns: string[] | null; partial: boolean; expression: boolean; constraint: string | null }>(sql`
    SELECT ic.relname AS name,
           (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts) AS columns,
           i.indpred IS NOT NULL AS partial,
           (i.indexprs IS NOT NULL OR 0 = ANY (i.indkey::int2[])) AS expression,
           con.conname AS constraint
      FROM pg_index i
      JOIN pg_class ic ON ic.oid = i.indexrelid
      LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
     WHERE i.indrelid = ${root.oid} AND i.indisunique
     ORDER BY ic.relname`);

  const fkRows = await db.query<{
    name: string; columns: string[]; ref_schema: string; ref_table: string; ref_columns: string[];
    deferrable: boolean; deferred: boolean; upd: string; del: string; match: string;
  }>(sql`
    SELECT con.conname AS name,
           (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(con.conkey) WITH ORDINALITY k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum) AS columns,
           rn.nspname AS ref_schema, rc.relname AS ref_table,
           (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(con.confkey) WITH ORDINALITY k(attnum, ord)
              JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum) AS ref_columns,
           con.condeferrable AS deferrable, con.condeferred AS deferred,
           con.confupdtype::text AS upd, con.confdeltype::text AS del, con.confmatchtype::text AS match
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
      columns: u.columns ?? [],
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
      matchType: matchNames[f.match] ?? f.match,
    })),
  };
}
