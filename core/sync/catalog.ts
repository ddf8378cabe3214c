/**
 * The registered-table catalog and layout readiness, as a request handler sees them. Loaded once
 * per container (one round trip) and cached: request handlers only check that a coherent, ready
 * layout exists; they never bootstrap.
 */
import { sql, type Queryable } from '../db/index.js';
import { SyncError } from '../errors.js';
import { LAYOUT_CODE_HASH } from '../bootstrap/bootstrap.js';
import { LAYOUT_VERSION } from '../bootstrap/layout-tables.js';
import { wireCategory, type CatalogColumn, type KeyKind, type WireCategory } from '../bootstrap/table-sql.js';

export interface CatalogTable {
  readonly tableId: number;
  readonly schema: string;
  readonly table: string;
  readonly keyColumn: string;
  readonly keyKind: KeyKind;
  readonly columns: readonly (CatalogColumn & { readonly category: WireCategory })[];
  readonly columnByName: ReadonlyMap<string, CatalogColumn & { readonly category: WireCategory }>;
}

export interface Catalog {
  readonly tables: readonly CatalogTable[];
  readonly schemaVersion: number;
  byName(schema: string, table: string): CatalogTable | undefined;
}

interface CatalogRow {
  table_id: number;
  schema_name: string;
  table_name: string;
  key_column: string;
  key_kind: KeyKind;
  columns: CatalogColumn[];
  meta: Record<string, string>;
}

/** PostgreSQL error codes meaning "the layout is not there": undefined table / schema. */
const MISSING_LAYOUT = new Set(['42P01', '3F000', '42883']);

export async function loadCatalog(db: Queryable): Promise<Catalog> {
  let rows: CatalogRow[];
  try {
    rows = await db.query<CatalogRow>(sql`
      SELECT c.table_id, c.schema_name, c.table_name, c.key_column, c.key_kind, c.columns,
             (SELECT jsonb_object_agg(key, value) FROM sync.meta WHERE key IN ('ready', 'layout_version', 'layout_code_hash', 'schema_version')) AS meta
        FROM sync.table_catalog c ORDER BY c.table_id`);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code && MISSING_LAYOUT.has(code)) throw new SyncError('service_unavailable', 'the sync layout is not bootstrapped; run bootstrap first');
    throw error;
  }
  const meta = rows[0]?.meta ?? {};
  if (meta['ready'] !== 'true' || meta['layout_version'] !== String(LAYOUT_VERSION) || meta['layout_code_hash'] !== LAYOUT_CODE_HASH) {
    throw new SyncError('service_unavailable', 'the sync layout is not ready or was created by a different build; run bootstrap');
  }
  const tables = rows.map((r): CatalogTable => {
    const columns = r.columns.map((c) => ({ ...c, category: wireCategory(c.type) }));
    return {
      tableId: r.table_id,
      schema: r.schema_name,
      table: r.table_name,
      keyColumn: r.key_column,
      keyKind: r.key_kind,
      columns,
      columnByName: new Map(columns.map((c) => [c.name, c])),
    };
  });
  const index = new Map(tables.map((t) => [`${t.schema}.${t.table}`, t]));
  return {
    tables,
    schemaVersion: Number(meta['schema_version'] ?? 1),
    byName: (schema, table) => index.get(`${schema}.${table}`),
  };
}
