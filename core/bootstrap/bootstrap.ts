/**
 * Bootstrap: a one-off (CLI or a Lambda invoke), never a side effect of a request.
 *
 *   validate envelope (read only) ──violations──▶ UnsupportedSchemaError, nothing touched
 *        │
 *        ├─ `sync` exists ──▶ verify (READ ONLY transaction, no locks, no business rows)
 *        │                      └─ drift ──▶ ManagedLayoutMismatchError
 *        └─ fresh ──▶ one transaction under pg_advisory_xact_lock:
 *                     lock registered tables, create layout, install triggers, adopt rows,
 *                     verify, mark ready
 */
import { createHash } from 'node:crypto';
import { sql, raw, Isolation, type Db, type Queryable } from '../db/index.js';
import { type RegisteredTableDecl } from '../config.js';
import { ManagedLayoutMismatchError, UnsupportedSchemaError, UnsupportedServerVersionError } from '../errors.js';
import { introspectTable, type TableInfo } from './introspect.js';
import { validateEnvelope } from './validate-envelope.js';
import { buildCatalog, triggerSpecs, adoptionSourceSql, type CatalogEntry } from './table-sql.js';
import { LAYOUT_TABLES_SQL, LAYOUT_VERSION } from './layout-tables.js';
import { LAYOUT_FUNCTIONS_SQL } from './layout-functions.js';
import { describeLayout, diffDescriptions } from './describe.js';

const BOOTSTRAP_LOCK_KEY = 7020140421;
export const SCHEMA_VERSION = 1;

/** Identifies the code that creates the layout: two builds with different DDL never mix. */
export const LAYOUT_CODE_HASH = createHash('sha256').update(LAYOUT_TABLES_SQL).update(LAYOUT_FUNCTIONS_SQL).digest('hex');

export interface BootstrapOptions {
  readonly tables: readonly RegisteredTableDecl[];
  readonly maxSchemaVersion: number;
}

export interface BootstrapResult {
  readonly created: boolean;
  readonly catalog: readonly CatalogEntry[];
  readonly adoptedRows: number;
}

async function checkServerVersion(db: Queryable): Promise<void> {
  const [row] = await db.query<{ v: number }>(sql`SELECT current_setting('server_version_num')::int AS v`);
  const v = row?.v ?? 0;
  if (v < 160000 || v >= 180000) throw new UnsupportedServerVersionError(v);
}

async function introspectAll(db: Queryable, tables: readonly RegisteredTableDecl[]): Promise<TableInfo[]> {
  const infos: (TableInfo | null)[] = [];
  for (const decl of tables) infos.push(await introspectTable(db, decl));
  const violations = validateEnvelope(tables, infos);
  if (violations.length) throw new UnsupportedSchemaError(violations);
  return infos as TableInfo[];
}

async function syncSchemaExists(db: Queryable): Promise<boolean> {
  const [row] = await db.query<{ exists: boolean }>(sql`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'sync') AS exists`);
  return row?.exists ?? false;
}

function relationOids(infos: readonly TableInfo[]): number[] {
  return infos.flatMap((i) => [i.oid, ...i.descendants.map((d) => d.oid)]);
}

const catalogFields = [
  ['schema_name', 'schema'], ['table_name', 'table'], ['key_column', 'keyColumn'], ['key_kind', 'keyKind'],
  ['apply_order', 'applyOrder'], ['columns', 'columns'], ['capture_new_sql', 'captureNewSql'],
  ['capture_old_sql', 'captureOldSql'], ['capture_keychange_sql', 'captureKeychangeSql'], ['upsert_sql', 'upsertSql'],
  ['delete_sql', 'deleteSql'], ['snapshot_sql', 'snapshotSql'], ['lookup_sql', 'lookupSql'],
  ['hash_rows_sql', 'hashRowsSql'], ['request_rows_sql', 'requestRowsSql'], ['row_json_prefix', 'rowJsonPrefix'],
] as const;

/** Verifies a marked layout. Read only: it reads catalogs and `sync` metadata, nothing else. */
async function verifyLayout(tx: Queryable, infos: readonly TableInfo[], catalog: readonly CatalogEntry[], maxSchemaVersion: number): Promise<void> {
  const problems: string[] = [];
  const metaRows = await tx.query<{ key: string; value: string }>(sql`SELECT key, value FROM sync.meta`).catch(() => {
    problems.push('table sync.meta is missing or unreadable');
    return [];
  });
  const meta = new Map(metaRows.map((r) => [r.key, r.value]));
  if (meta.get('ready') !== 'true') problems.push('the layout is not marked ready (sync.meta ready)');
  if (meta.get('layout_version') !== String(LAYOUT_VERSION)) {
    problems.push(`layout_version is ${meta.get('layout_version') ?? 'absent'}, this build expects ${LAYOUT_VERSION} (mixed server versions are unsupported)`);
  }
  if (meta.has('layout_code_hash') && meta.get('layout_code_hash') !== LAYOUT_CODE_HASH) {
    problems.push('the layout was created by a different Lockstep build (layout_code_hash differs)');
  }
  const schemaVersion = Number(meta.get('schema_version') ?? NaN);
  if (!(schemaVersion <= maxSchemaVersion)) {
    problems.push(`schema_version ${meta.get('schema_version')} exceeds SYNC_MAX_SCHEMA_VERSION ${maxSchemaVersion}`);
  }
  const stored = meta.get('layout_description');
  if (stored !== undefined) {
    problems.push(...diffDescriptions(JSON.parse(stored) as string[], await describeLayout(tx, relationOids(infos))));
  } else problems.push('sync.meta has no layout_description');

  if (!problems.some((p) => p.includes('sync.table_catalog'))) {
    const rows = await tx.query<Record<string, unknown>>(sql`SELECT * FROM sync.table_catalog ORDER BY table_id`);
    const byId = new Map(rows.map((r) => [Number(r['table_id']), r]));
    for (const entry of catalog) {
      const row = byId.get(entry.tableId);
      const name = `${entry.schema}.${entry.table}`;
      if (!row) {
        problems.push(`registered table ${name} (table_id ${entry.tableId}) is not in sync.table_catalog: the registered table set changed since bootstrap`);
        continue;
      }
      for (const [column, field] of catalogFields) {
        const want = entry[field];
        const have = row[column];
        const same = typeof want === 'object' ? JSON.stringify(have) === JSON.stringify(want) : String(have) === String(want);
        if (!same) problems.push(`sync.table_catalog.${column} of ${name} differs from its declaration (the table or SYNC_TABLES changed since bootstrap)`);
      }
      byId.delete(entry.tableId);
    }
    for (const row of byId.values()) {
      problems.push(`sync.table_catalog lists ${String(row['schema_name'])}.${String(row['table_name'])}, which SYNC_TABLES no longer registers`);
    }
  }
  if (problems.length) throw new ManagedLayoutMismatchError(problems);
}

async function insertCatalog(tx: Queryable, catalog: readonly CatalogEntry[]): Promise<void> {
  for (const e of catalog) {
    await tx.query(sql`
      INSERT INTO sync.table_catalog (table_id, schema_name, table_name, key_column, key_kind, apply_order, columns,
        capture_new_sql, capture_old_sql, capture_keychange_sql, upsert_sql, delete_sql, snapshot_sql, lookup_sql,
        hash_rows_sql, request_rows_sql, row_json_prefix)
      VALUES (${e.tableId}, ${e.schema}, ${e.table}, ${e.keyColumn}, ${e.keyKind}, ${e.applyOrder}, ${JSON.stringify(e.columns)}::jsonb,
        ${e.captureNewSql}, ${e.captureOldSql}, ${e.captureKeychangeSql}, ${e.upsertSql}, ${e.deleteSql}, ${e.snapshotSql}, ${e.lookupSql},
        ${e.hashRowsSql}, ${e.requestRowsSql}, ${e.rowJsonPrefix})`);
  }
}

/**
 * Adopts existing business rows: each scope becomes an initialized user whose history starts
 * with one adoption bundle (seq 1) that is already below the retained floor, so clients hydrate
 * those rows from a snapshot. Row versions are 1.
 */
async function adopt(tx: Queryable, infos: readonly TableInfo[], catalog: readonly CatalogEntry[]): Promise<number> {
  const source = adoptionSourceSql(infos, catalog);
  await tx.query(sql`
    INSERT INTO sync.user_state (user_pk, user_id, latest_bundle_seq, retained_floor, pruned_through, created_at)
    SELECT nextval('sync.user_pk_seq'), s.scope, 1, 1, 1, now() FROM (SELECT DISTINCT scope FROM (${raw(source)}) a) s ORDER BY s.scope`);
  await tx.query(sql`
    INSERT INTO sync.scope_state (user_pk, status, updated_at) SELECT user_pk, 'initialized', now() FROM sync.user_state`);
  const rows = await tx.query<{ n: string }>(sql`
    WITH src AS (SELECT * FROM (${raw(source)}) a),
    numbered AS (
      SELECT src.*, (row_number() OVER (PARTITION BY scope ORDER BY apply_order, table_id, key_bytes))::int - 1 AS ordinal FROM src),
    rs AS (
      INSERT INTO sync.row_state (user_pk, table_id, key_bytes, row_version, deleted)
      SELECT u.user_pk, n.table_id, n.key_bytes, 1, false FROM numbered n JOIN sync.user_state u ON u.user_id = n.scope
      RETURNING 1)
    INSERT INTO sync.bundle_log (user_pk, bundle_seq, source_id, source_bundle_id, row_count, byte_count, bundle_hash, request_hash, committed_at)
    SELECT u.user_pk, 1, 'lockstep:adoption', 1, count(*), sum(sync.row_bytes(n.payload, n.key_bytes)),
      encode(sha256(convert_to('[' || string_agg(n.canon_head || n.ordinal || n.canon_tail,
        ',' ORDER BY n.ordinal) || ']', 'UTF8')), 'hex'), NULL, now()
    FROM numbered n JOIN sync.user_state u ON u.user_id = n.scope
    GROUP BY u.user_pk
    RETURNING row_count::text AS n`);
  return rows.reduce((sum, r) => sum + Number(r.n), 0);
}

async function createLayout(tx: Queryable, opts: BootstrapOptions): Promise<{ catalog: CatalogEntry[]; adopted: number } | null> {
  await tx.query(sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`);
  if (await syncSchemaExists(tx)) return null; // a concurrent bootstrap won; verify instead
  // Writers wait while existing rows are adopted; readers carry on.
  const names = opts.tables.map((t) => `"${t.schema.replaceAll('"', '""')}"."${t.table.replaceAll('"', '""')}"`);
  await tx.simple(`LOCK TABLE ${names.join(', ')} IN SHARE ROW EXCLUSIVE MODE`);
  // Declarations may have changed before the lock was granted: validate again under it.
  const infos = await introspectAll(tx, opts.tables);
  const catalog = buildCatalog(infos);
  await tx.simple(`CREATE SCHEMA sync; ${LAYOUT_TABLES_SQL}`);
  await tx.simple(LAYOUT_FUNCTIONS_SQL);
  await insertCatalog(tx, catalog);
  const adopted = await adopt(tx, infos, catalog);
  const triggers = infos.flatMap((info, i) => triggerSpecs(info, catalog[i] as CatalogEntry));
  await tx.simple(triggers.map((t) => `${t.ddl};`).join('\n'));
  const description = await describeLayout(tx, relationOids(infos));
  await tx.query(sql`
    INSERT INTO sync.meta (key, value) VALUES
      ('layout_version', ${String(LAYOUT_VERSION)}), ('layout_code_hash', ${LAYOUT_CODE_HASH}),
      ('schema_version', ${String(SCHEMA_VERSION)}), ('layout_description', ${JSON.stringify(description)}),
      ('created_at', now()::text), ('ready', 'true')`);
  await verifyLayout(tx, infos, catalog, opts.maxSchemaVersion);
  return { catalog, adopted };
}

/** Runs bootstrap: creates and adopts on a fresh database, otherwise only verifies. */
export async function bootstrap(db: Db, opts: BootstrapOptions): Promise<BootstrapResult> {
  await checkServerVersion(db);
  const { infos, exists } = await db.runTx(
    async (tx) => ({ infos: await introspectAll(tx, opts.tables), exists: await syncSchemaExists(tx) }),
    { readOnly: true, isolation: Isolation.repeatableRead },
  );
  const catalog = buildCatalog(infos);
  if (!exists) {
    const created = await db.runTx((tx) => createLayout(tx, opts), { statementTimeoutMs: 0, lockTimeoutMs: 60_000 });
    if (created) return { created: true, catalog: created.catalog, adoptedRows: created.adopted };
  }
  await db.runTx((tx) => verifyLayout(tx, infos, catalog, opts.maxSchemaVersion), {
    readOnly: true,
    isolation: Isolation.repeatableRead,
  });
  return { created: false, catalog, adoptedRows: 0 };
}
