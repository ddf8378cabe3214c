/**
 * Bootstrap: a one-off (CLI, the bootstrap function on every deploy), never a side effect of a
 * request. It installs or upgrades the `sync` layout and registers the declared tables.
 *
 *   validate envelope, read the layout and the catalog (READ ONLY, no locks, no business rows)
 *     │  violations ──▶ UnsupportedSchemaError, nothing touched
 *     │  layout newer than this build ──▶ nothing to do (or LayoutIncompatibleError)
 *     ├─ nothing to change ──▶ verify (read only) ──drift──▶ ManagedLayoutMismatchError
 *     └─ otherwise, one transaction under pg_advisory_xact_lock:
 *          verify the managed objects against the stored description (drift fails)
 *          apply migrations (layout_version → this build's LAYOUT_VERSION)
 *          diff the catalog with the declarations ──unsafe──▶ UnsafeSchemaChangeError
 *          write the catalog, create triggers of new tables and partitions,
 *          adopt existing rows (a fresh layout, or a newly registered table),
 *          raise schema_version when what clients see changed, store the description, verify
 *   then, with the citus extension only: distribute the layout, or refuse (core/scale/citus.ts)
 */
import { sql, raw, Isolation, type Db, type Queryable } from '../db/index.js';
import { quoteIdent, quoteLiteral } from '../db/sql.js';
import { type RegisteredTableDecl } from '../config.js';
import {
  LayoutIncompatibleError,
  ManagedLayoutMismatchError,
  UnsafeSchemaChangeError,
  UnsupportedSchemaError,
  UnsupportedServerVersionError,
  type SchemaChange,
} from '../errors.js';
import { defaultLimits } from '../limits.js';
import { LAYOUT_VERSION, servable } from '../layout/version.js';
import { ROW_ARRAYS_LAYOUT } from '../sync/wire-form.js';
import { buildCatalog, adoptionSourceSql, type CatalogEntry } from '../sync/catalog/table-sql.js';
import { triggerSpecs, type TriggerSpec } from '../sync/capture/triggers.js';
import { FIXED_KEY_TRIGGER, ROOT_TRIGGERS } from '../sync/catalog/names.js';
import { introspectTable, type TableInfo } from './introspect.js';
import { validateEnvelope } from './validate-envelope.js';
import { describeLayout, diffDescriptions, type DescriptionFormat } from './describe.js';
import { migrateLayout, readLayoutVersion, type LayoutVersion } from './migrate.js';
import { BOOTSTRAP_LOCK_KEY } from './lock.js';
import { LAYOUT_CHANNEL } from '../sync/notify/channels.js';
import { boundFunctions, DEFAULT_BOUNDS, functionsToBound, installRoleBounds, removeRoleBounds, type RoleBoundsOutcome, type TimeBounds } from './bounds.js';
import { diffCatalog, type StoredEntry } from './evolve.js';
import { type CatalogColumn } from '../sync/catalog/compat.js';
import { distributeOnCitus } from '../scale/citus.js';

export { BOOTSTRAP_LOCK_KEY };

export interface BootstrapOptions {
  readonly tables: readonly RegisteredTableDecl[];
  /** Refuse to raise schema_version beyond this (SYNC_MAX_SCHEMA_VERSION); unlimited when absent. */
  readonly maxSchemaVersion?: number | undefined;
  /** Ids of unsafe changes a deliberate contract step accepts (`drop-column:…`, `drop-table:…`). */
  readonly accept?: readonly string[];
  /** Trusted SQL (the application's own DDL) run first inside the bootstrap transaction. */
  readonly applySql?: string;
  /** Bundles kept per user, for bundles bootstrap commits (adopting a newly registered table). */
  readonly retainedBundlesPerUser?: number;
  /** Tests only: stop the layout at this version instead of this build's. */
  readonly targetLayoutVersion?: number;
  /** Time bounds to install (bounds.ts); the limits' defaults when absent. */
  readonly bounds?: TimeBounds;
  /**
   * Install the role's timeout settings in this database (SYNC_ROLE_TIMEOUTS=on). Default false:
   * they would bind every session of the role, so bootstrap leaves them out and removes those an
   * earlier release installed (bounds.ts).
   */
  readonly roleBounds?: boolean;
}

export interface BootstrapResult {
  /** The `sync` schema was created by this run. */
  readonly created: boolean;
  readonly catalog: readonly CatalogEntry[];
  readonly adoptedRows: number;
  /** Layout version before and after this run. */
  readonly layoutFrom: number;
  readonly layoutTo: number;
  readonly schemaVersion: number;
  /** The schema changes this run applied. */
  readonly applied: readonly SchemaChange[];
  /** True when nothing was written (a read-only verification). */
  readonly unchanged: boolean;
  /** What became of the role's timeout settings (bounds.ts). */
  readonly roleBounds: RoleBoundsOutcome;
}

const CATALOG_SQL_FIELDS = [
  ['capture_new_sql', 'captureNewSql'], ['capture_old_sql', 'captureOldSql'], ['capture_keychange_sql', 'captureKeychangeSql'],
  ['upsert_sql', 'upsertSql'], ['delete_sql', 'deleteSql'], ['snapshot_sql', 'snapshotSql'], ['lookup_sql', 'lookupSql'],
  ['hash_rows_sql', 'hashRowsSql'], ['request_rows_sql', 'requestRowsSql'], ['row_json_prefix', 'rowJsonPrefix'],
  ['snapshot_v1_sql', 'snapshotV1Sql'], ['snapshot_array_sql', 'snapshotArraySql'], ['row_array_header', 'rowArrayHeader'],
] as const;

type StoredRow = StoredEntry & {
  readonly applyOrder: number;
  /** Each generated text (null where the table needs none; undefined where the layout has no such column yet). */
  readonly sql: Readonly<Record<string, string | null | undefined>>;
  readonly jsonColumns: readonly string[] | null;
};

/** Refuses a server outside PostgreSQL 16.x and 17.x, given its `server_version_num`. */
export function assertSupportedServerVersion(serverVersionNum: number): void {
  if (serverVersionNum < 160000 || serverVersionNum >= 180000) throw new UnsupportedServerVersionError(serverVersionNum);
}

async function checkServerVersion(db: Queryable): Promise<void> {
  const [row] = await db.query<{ v: number }>(sql`SELECT current_setting('server_version_num')::int AS v`);
  assertSupportedServerVersion(row?.v ?? 0);
}

async function introspectAll(db: Queryable, tables: readonly RegisteredTableDecl[]): Promise<TableInfo[]> {
  const infos: (TableInfo | null)[] = [];
  for (const decl of tables) infos.push(await introspectTable(db, decl));
  const violations = validateEnvelope(tables, infos);
  if (violations.length) throw new UnsupportedSchemaError(violations);
  return infos as TableInfo[];
}

function relationOids(infos: readonly TableInfo[]): number[] {
  return infos.flatMap((i) => [i.oid, ...i.descendants.map((d) => d.oid)]);
}

async function readStoredCatalog(db: Queryable): Promise<StoredRow[]> {
  const [has] = await db.query<{ retired: boolean }>(sql`
    SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'sync.table_catalog'::regclass AND attname = 'retired') AS retired`);
  const rows = await db.query<Record<string, unknown>>(sql`
    SELECT *, ${raw(has?.retired ? 'retired' : 'false')} AS is_retired FROM sync.table_catalog ORDER BY table_id`);
  return rows.map((r) => ({
    tableId: Number(r['table_id']),
    schema: String(r['schema_name']),
    table: String(r['table_name']),
    keyColumn: String(r['key_column']),
    keyKind: String(r['key_kind']),
    applyOrder: Number(r['apply_order']),
    columns: r['columns'] as StoredEntry['columns'],
    retired: r['is_retired'] === true,
    // undefined: the layout has no such column yet.
    sql: Object.fromEntries(CATALOG_SQL_FIELDS.map(([column]) => [column, r[column] === undefined ? undefined : r[column] === null ? null : String(r[column])])),
    jsonColumns: (r['json_columns'] as string[] | null | undefined) ?? null,
  }));
}

async function readMeta(db: Queryable): Promise<Map<string, string>> {
  const rows = await db.query<{ key: string; value: string }>(sql`SELECT key, value FROM sync.meta`);
  return new Map(rows.map((r) => [r.key, r.value]));
}

/** The first release stored its description with raw md5 bodies; later ones with normalized hashes. */
function descriptionFormat(meta: ReadonlyMap<string, string>): DescriptionFormat {
  return meta.get('layout_description_format') === '2' ? 2 : 1;
}

/** Managed objects equal the stored description; drift fails (it is never repaired silently). */
async function verifyManaged(tx: Queryable): Promise<void> {
  // Never a `.catch` around a failing read here: inside a transaction the failure aborts it, and
  // the next statement would report 25P02. readLayoutVersion checked the bookkeeping's shape.
  if (!(await readLayoutVersion(tx))) throw new ManagedLayoutMismatchError(['the schema sync is missing']);
  const meta = await readMeta(tx);
  const problems: string[] = [];
  if (meta.get('ready') !== 'true') problems.push('the layout is not marked ready (sync.meta ready)');
  const stored = meta.get('layout_description');
  if (stored === undefined) problems.push('sync.meta has no layout_description');
  else problems.push(...diffDescriptions(JSON.parse(stored) as string[], await describeLayout(tx, descriptionFormat(meta))));
  if (problems.length) throw new ManagedLayoutMismatchError(problems);
}

/** Ids the database already uses, so bundles and row state keep pointing at the right table. */
function tableIds(stored: readonly StoredRow[]): Map<string, number> {
  return new Map(stored.map((s) => [`${s.schema}.${s.table}`, s.tableId]));
}

function sameColumns(a: readonly CatalogColumn[], b: readonly CatalogColumn[]): boolean {
  return a.length === b.length && a.every((c, i) => c.name === b[i]?.name && c.type === b[i]?.type && c.nullable === b[i]?.nullable);
}

function sameEntry(stored: StoredRow | undefined, entry: CatalogEntry): boolean {
  if (!stored || stored.retired) return false;
  return (
    stored.keyColumn === entry.keyColumn && stored.keyKind === entry.keyKind && stored.applyOrder === entry.applyOrder &&
    sameColumns(stored.columns, entry.columns) && JSON.stringify(stored.jsonColumns) === JSON.stringify(entry.jsonColumns) &&
    CATALOG_SQL_FIELDS.every(([column, field]) => stored.sql[column] === undefined || stored.sql[column] === entry[field])
  );
}

/** The reserved triggers every registered table and partition should have, minus those present. */
async function missingTriggers(db: Queryable, infos: readonly TableInfo[], catalog: readonly CatalogEntry[]): Promise<TriggerSpec[]> {
  const specs = infos.flatMap((info, i) => triggerSpecs(info, catalog[i] as CatalogEntry));
  const present = await db.query<{ relation: string; name: string }>(sql`
    SELECT '"' || replace(n.nspname, '"', '""') || '"."' || replace(c.relname, '"', '""') || '"' AS relation, t.tgname AS name
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE t.tgrelid = ANY (${relationOids(infos)}::oid[]) AND t.tgname LIKE '\_lockstep\_%'`);
  const have = new Set(present.map((p) => `${p.relation} ${p.name}`));
  return specs.filter((s) => !have.has(`${s.relation} ${s.name}`));
}

interface Plan {
  readonly layout: LayoutVersion | null;
  readonly infos: readonly TableInfo[];
  readonly stored: readonly StoredRow[];
  readonly catalog: readonly CatalogEntry[];
  readonly changes: readonly SchemaChange[];
  readonly triggers: readonly TriggerSpec[];
  /** Request functions whose lock bound is missing or another one. */
  readonly unbounded: readonly string[];
}

async function plan(tx: Queryable, opts: BootstrapOptions): Promise<Plan> {
  const infos = await introspectAll(tx, opts.tables);
  const layout = await readLayoutVersion(tx);
  const stored = layout ? await readStoredCatalog(tx) : [];
  const catalog = buildCatalog(infos, tableIds(stored));
  const changes = layout ? diffCatalog(stored, catalog, infos) : [];
  const triggers = layout ? await missingTriggers(tx, infos, catalog) : [];
  const unbounded = layout ? await functionsToBound(tx, opts.bounds ?? DEFAULT_BOUNDS) : [];
  return { layout, infos, stored, catalog, changes, triggers, unbounded };
}

function needsWrite(p: Plan, target: number): boolean {
  if (!p.layout || p.layout.version < target) return true;
  if (p.changes.length > 0 || p.triggers.length > 0 || p.unbounded.length > 0) return true;
  const byName = new Map(p.stored.map((s) => [`${s.schema}.${s.table}`, s]));
  return p.catalog.some((e) => !sameEntry(byName.get(`${e.schema}.${e.table}`), e));
}

function refuseUnsafe(changes: readonly SchemaChange[], accept: readonly string[]): void {
  const refused = changes.filter((c) => !c.safe && !(c.acceptable && accept.includes(c.id)));
  if (refused.length) throw new UnsafeSchemaChangeError(refused);
}

async function writeCatalog(tx: Queryable, catalog: readonly CatalogEntry[], retire: readonly StoredRow[], target: number): Promise<void> {
  // A layout stopped before 26 (tests of upgrades) has no columns for rows as arrays.
  const arrays = target >= ROW_ARRAYS_LAYOUT;
  for (const e of catalog) {
    await tx.query(sql`
      INSERT INTO sync.table_catalog (table_id, schema_name, table_name, key_column, key_kind, apply_order, columns,
        capture_new_sql, capture_old_sql, capture_keychange_sql, upsert_sql, delete_sql, snapshot_sql, lookup_sql,
        hash_rows_sql, request_rows_sql, row_json_prefix, json_columns, snapshot_v1_sql, ${raw(arrays ? 'snapshot_array_sql, row_array_header, ' : '')}retired)
      VALUES (${e.tableId}, ${e.schema}, ${e.table}, ${e.keyColumn}, ${e.keyKind}, ${e.applyOrder}, ${JSON.stringify(e.columns)}::jsonb,
        ${e.captureNewSql}, ${e.captureOldSql}, ${e.captureKeychangeSql}, ${e.upsertSql}, ${e.deleteSql}, ${e.snapshotSql}, ${e.lookupSql},
        ${e.hashRowsSql}, ${e.requestRowsSql}, ${e.rowJsonPrefix}, ${e.jsonColumns}::text[], ${e.snapshotV1Sql},
        ${arrays ? sql`${e.snapshotArraySql}, ${e.rowArrayHeader}, ` : sql``}false)
      ON CONFLICT (table_id) DO UPDATE SET schema_name = EXCLUDED.schema_name, table_name = EXCLUDED.table_name,
        key_column = EXCLUDED.key_column, key_kind = EXCLUDED.key_kind, apply_order = EXCLUDED.apply_order, columns = EXCLUDED.columns,
        capture_new_sql = EXCLUDED.capture_new_sql, capture_old_sql = EXCLUDED.capture_old_sql,
        capture_keychange_sql = EXCLUDED.capture_keychange_sql, upsert_sql = EXCLUDED.upsert_sql, delete_sql = EXCLUDED.delete_sql,
        snapshot_sql = EXCLUDED.snapshot_sql, lookup_sql = EXCLUDED.lookup_sql, hash_rows_sql = EXCLUDED.hash_rows_sql,
        request_rows_sql = EXCLUDED.request_rows_sql, row_json_prefix = EXCLUDED.row_json_prefix, json_columns = EXCLUDED.json_columns,
        snapshot_v1_sql = EXCLUDED.snapshot_v1_sql,
        ${raw(arrays ? 'snapshot_array_sql = EXCLUDED.snapshot_array_sql, row_array_header = EXCLUDED.row_array_header, ' : '')}retired = false`);
  }
  for (const r of retire) {
    await tx.query(sql`UPDATE sync.table_catalog SET retired = true WHERE table_id = ${r.tableId}`);
    // A table that still exists becomes an ordinary table again.
    const relations = await tx.query<{ relation: string }>(sql`
      WITH RECURSIVE rel(oid) AS (
        SELECT to_regclass(${`${quoteIdent(r.schema)}.${quoteIdent(r.table)}`})::oid
        UNION SELECT i.inhrelid FROM pg_inherits i JOIN rel ON i.inhparent = rel.oid)
      SELECT oid::regclass::text AS relation FROM rel WHERE oid IS NOT NULL`);
    // The root comes first: dropping its fixed-key trigger drops the clones on its partitions.
    const drops = relations.flatMap(({ relation }) => [...ROOT_TRIGGERS, FIXED_KEY_TRIGGER].map((name) => `DROP TRIGGER IF EXISTS ${name} ON ${relation}`));
    if (drops.length) await tx.simple(drops.join(';\n'));
  }
}

/**
 * Adopts existing business rows at a fresh bootstrap: each scope becomes an initialized user
 * whose history starts with one adoption bundle (seq 1) that is already below the retained
 * floor, so clients hydrate those rows from a snapshot. Row versions are 1.
 */
async function adoptFresh(tx: Queryable, infos: readonly TableInfo[], catalog: readonly CatalogEntry[]): Promise<number> {
  const source = adoptionSourceSql(infos, catalog);
  await tx.query(sql`
    INSERT INTO sync.user_state (user_id, latest_bundle_seq, retained_floor, pruned_through, created_at)
    SELECT s.scope, 1, 1, 1, now() FROM (SELECT DISTINCT scope FROM (${raw(source)}) a) s ORDER BY s.scope`);
  await tx.query(sql`
    INSERT INTO sync.scope_state (user_id, status, updated_at) SELECT user_id, 'initialized', now() FROM sync.user_state`);
  const rows = await tx.query<{ user_id: string; n: string }>(sql`
    WITH src AS (SELECT * FROM (${raw(source)}) a),
    numbered AS (
      SELECT src.*, (row_number() OVER (PARTITION BY scope ORDER BY apply_order, table_id, key_bytes))::int - 1 AS ordinal FROM src),
    rs AS (
      INSERT INTO sync.row_state (user_id, table_id, key_bytes, row_version, deleted)
      SELECT n.scope, n.table_id, n.key_bytes, 1, false FROM numbered n
      RETURNING 1)
    INSERT INTO sync.bundle_log (user_id, bundle_seq, source_id, source_bundle_id, row_count, byte_count, bundle_hash, request_hash, committed_at)
    SELECT n.scope, 1, 'lockstep:adoption', 1, count(*), sum(sync.row_bytes(n.payload, n.key_bytes)),
      encode(sha256(convert_to('[' || string_agg(n.canon_head || n.ordinal || n.canon_tail,
        ',' ORDER BY n.ordinal) || ']', 'UTF8')), 'hex'), NULL, now()
    FROM numbered n
    GROUP BY n.scope
    RETURNING user_id, row_count::text AS n`);
  // Each user's adoption bundle is a committed bundle (status: bundles_committed), in that user's ledger.
  if (rows.length > 0) await tx.query(sql`SELECT sync.count(u, 'bundles_committed', 1) FROM unnest(${rows.map((r) => r.user_id)}::text[]) u`);
  return rows.reduce((sum, r) => sum + Number(r.n), 0);
}

/**
 * Adopts the rows of tables registered after the first bootstrap: for every scope that has rows
 * in them, one committed bundle of source `lockstep:adoption` inserts them into that user's
 * stream, so attached devices receive them by pull like any other change.
 */
async function adoptNewTables(tx: Queryable, entries: readonly CatalogEntry[], retained: number): Promise<number> {
  if (entries.length === 0) return 0;
  const union = entries.map((e) => `SELECT DISTINCT _sync_scope_id AS scope FROM ${quoteIdent(e.schema)}.${quoteIdent(e.table)}`).join(' UNION ');
  const scopes = await tx.query<{ scope: string }>(sql`SELECT scope FROM (${raw(union)}) s ORDER BY scope`);
  let adopted = 0;
  for (const { scope } of scopes) {
    await tx.query(sql`SELECT sync.server_bundle_begin(${scope}, 'lockstep:adoption')`);
    // Numbered in capture order: each table's rows after the previous table's.
    let captured = 0;
    for (const e of entries) {
      const [inserted] = await tx.query<{ n: string }>(sql`
        WITH ins AS (
          INSERT INTO sync.capture_rows (user_id, capture_id, xact, table_id, key_bytes, deleted, payload)
          SELECT ${scope}, ${captured} + row_number() OVER (ORDER BY s.key_bytes), txid_current(), s.table_id, s.key_bytes, false, s.payload_text::jsonb
            FROM (${raw(e.snapshotSql.replaceAll('$1', quoteLiteral(scope)))}) s
          RETURNING 1)
        SELECT count(*)::text AS n FROM ins`);
      captured += Number(inserted?.n ?? 0);
    }
    const [row] = await tx.query<{ answer: { row_count: number } | null }>(sql`SELECT sync.server_bundle_finish(${scope}, ${retained}) AS answer`);
    adopted += row?.answer?.row_count ?? 0;
  }
  return adopted;
}

async function storeDescription(tx: Queryable): Promise<void> {
  const description = await describeLayout(tx, 2);
  await tx.query(sql`
    INSERT INTO sync.meta (key, value) VALUES ('layout_description', ${JSON.stringify(description)}), ('layout_description_format', '2')
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`);
}

interface WriteOutcome {
  readonly created: boolean;
  readonly catalog: readonly CatalogEntry[];
  readonly adopted: number;
  readonly from: number;
  readonly to: number;
  readonly schemaVersion: number;
  readonly applied: readonly SchemaChange[];
}

async function write(tx: Queryable, opts: BootstrapOptions, target: number): Promise<WriteOutcome> {
  await tx.query(sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`);
  if (opts.applySql) await tx.simple(opts.applySql);
  // Declarations may have changed before the lock was granted: plan again under it.
  const before = await plan(tx, opts);
  const fresh = before.layout === null;
  // Drift before the upgrade is drift too: migrations must not paper over it.
  if (!fresh) await verifyManaged(tx);
  const names = opts.tables.map((t) => `${quoteIdent(t.schema)}.${quoteIdent(t.table)}`);
  // Writers wait while existing rows are adopted (a fresh layout); otherwise only DDL waits.
  await tx.simple(`LOCK TABLE ${names.join(', ')} IN ${fresh ? 'SHARE ROW EXCLUSIVE' : 'ACCESS SHARE'} MODE`);
  const migrated = await migrateLayout(tx, before.layout?.version ?? 0, target);
  const p = fresh ? await plan(tx, opts) : before;
  refuseUnsafe(p.changes, opts.accept ?? []);
  const retire = p.stored.filter((s) => !s.retired && p.changes.some((c) => c.id === `drop-table:${s.schema}.${s.table}`));
  const newTables = p.catalog.filter((e) => !p.stored.some((s) => s.tableId === e.tableId && !s.retired));
  await writeCatalog(tx, p.catalog, retire, target);
  const triggers = fresh ? p.infos.flatMap((info, i) => triggerSpecs(info, p.catalog[i] as CatalogEntry)) : await missingTriggers(tx, p.infos, p.catalog);
  if (triggers.length) await tx.simple(triggers.map((t) => `${t.ddl};`).join('\n'));
  const adopted = fresh
    ? await adoptFresh(tx, p.infos, p.catalog)
    : await adoptNewTables(tx, newTables, opts.retainedBundlesPerUser ?? defaultLimits.retainedBundlesPerUser);
  const meta = await readMeta(tx);
  let schemaVersion = Number(meta.get('schema_version') ?? 1);
  // Every applied change alters what capabilities' table specs tell clients.
  if (fresh) schemaVersion = 1;
  else if (p.changes.length > 0) schemaVersion += 1;
  if (opts.maxSchemaVersion !== undefined && schemaVersion > opts.maxSchemaVersion) {
    throw new LayoutIncompatibleError(`the schema changes would raise schema_version to ${schemaVersion}, beyond SYNC_MAX_SCHEMA_VERSION ${opts.maxSchemaVersion}; nothing was applied`);
  }
  await tx.query(sql`
    INSERT INTO sync.meta (key, value) VALUES ('schema_version', ${String(schemaVersion)}), ('ready', 'true')
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`);
  if (fresh) await tx.query(sql`INSERT INTO sync.meta (key, value) VALUES ('created_at', now()::text) ON CONFLICT (key) DO NOTHING`);
  // After the migrations, which re-create functions without it: the description records it.
  await boundFunctions(tx, opts.bounds ?? DEFAULT_BOUNDS);
  await storeDescription(tx);
  await verifyManaged(tx);
  // Delivered at commit: a running local server reloads its catalog before its next request.
  await tx.query(sql`SELECT pg_notify(${LAYOUT_CHANNEL}, ${String(schemaVersion)})`);
  return { created: fresh, catalog: p.catalog, adopted, from: migrated.from, to: migrated.to, schemaVersion, applied: p.changes };
}

/**
 * Runs bootstrap: creates or upgrades the layout and registers the declared tables when anything
 * changed; otherwise only verifies, in READ ONLY transactions that read no business row.
 */
export async function bootstrap(db: Db, opts: BootstrapOptions): Promise<BootstrapResult> {
  await checkServerVersion(db);
  const target = opts.targetLayoutVersion ?? LAYOUT_VERSION;
  const readOnly = { readOnly: true, isolation: Isolation.repeatableRead } as const;
  const p = await db.runTx((tx) => plan(tx, opts), readOnly);
  const roleBounds = (): Promise<RoleBoundsOutcome> =>
    opts.roleBounds === true ? installRoleBounds(db, opts.bounds ?? DEFAULT_BOUNDS) : removeRoleBounds(db, opts.bounds ?? DEFAULT_BOUNDS);
  if (p.layout && p.layout.version > target) {
    // A newer build upgraded the layout (a rollback, or an older function's deploy): change nothing.
    const range = servable(p.layout, { version: target, minServed: target });
    if (!range.ok) throw new LayoutIncompatibleError(range.detail);
    const meta = await db.runTx((tx) => readMeta(tx), readOnly);
    return { created: false, catalog: p.catalog, adoptedRows: 0, layoutFrom: p.layout.version, layoutTo: p.layout.version,
      schemaVersion: Number(meta.get('schema_version') ?? 1), applied: [], unchanged: true, roleBounds: 'skipped' };
  }
  if (!opts.applySql && !needsWrite(p, target)) {
    const meta = await db.runTx(async (tx) => {
      await verifyManaged(tx);
      return readMeta(tx);
    }, readOnly);
    const version = p.layout?.version ?? target;
    // With the citus extension, the layout is distributed (or bootstrap refuses); without it, one catalog read.
    await distributeOnCitus(db);
    return { created: false, catalog: p.catalog, adoptedRows: 0, layoutFrom: version, layoutTo: version,
      schemaVersion: Number(meta.get('schema_version') ?? 1), applied: [], unchanged: true, roleBounds: await roleBounds() };
  }
  refuseUnsafe(p.changes, opts.accept ?? []);
  // Bootstrap's own work (adopting large tables) is bounded by nothing but its lock wait.
  const out = await db.runTx((tx) => write(tx, opts, target), { statementTimeoutMs: 0, lockTimeoutMs: 60_000, queryTimeoutMs: 0 });
  await distributeOnCitus(db);
  return { created: out.created, catalog: out.catalog, adoptedRows: out.adopted, layoutFrom: out.from, layoutTo: out.to,
    schemaVersion: out.schemaVersion, applied: out.applied, unchanged: false, roleBounds: await roleBounds() };
}
