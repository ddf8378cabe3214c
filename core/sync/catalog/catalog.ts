/**
 * The registered-table catalog and the layout's state, as a request handler sees them: one read
 * (`sync.layout_state()`) per container, repeated every `catalogRefreshSeconds`, so the hot path
 * pays no round trip for it. Request handlers never bootstrap; they check that the layout is in
 * this build's range (core/layout/version.ts) and has not drifted, and otherwise answer
 * `503 service_unavailable` with the reason and the operator's next step.
 */
import { sql, type Queryable } from '../../db/index.js';
import { SyncError } from '../../errors.js';
import { LAYOUT_VERSION, MIN_SERVED_LAYOUT, servable, type LayoutUnavailableReason } from '../../layout/version.js';
import { wireCategory, type WireCategory } from '../../protocol/wire-types.js';
import { compareColumns, type CatalogColumn } from './compat.js';
import { FIXED_KEY_LAYOUT, FIXED_KEY_TRIGGER, ROOT_TRIGGERS, SCOPE_COLUMN } from './names.js';

export type KeyKind = 'uuid' | 'text';

export interface CatalogTable {
  readonly tableId: number;
  readonly schema: string;
  readonly table: string;
  readonly keyColumn: string;
  readonly keyKind: KeyKind;
  readonly columns: readonly (CatalogColumn & { readonly category: WireCategory })[];
  readonly columnByName: ReadonlyMap<string, CatalogColumn & { readonly category: WireCategory }>;
  /**
   * What clients check their local tables against beyond the columns (layout 12 on; undefined
   * before): the columns an insert may omit (a default, identity or generated column), and the
   * tables this table's foreign keys reference.
   */
  readonly defaulted: ReadonlySet<string> | undefined;
  readonly references: readonly { readonly schema: string; readonly table: string }[] | undefined;
}

export interface Catalog {
  readonly tables: readonly CatalogTable[];
  readonly schemaVersion: number;
  readonly layoutVersion: number;
  readonly minSafeVersion: number;
  /** Schema changes served as the catalog describes them until the next bootstrap records them. */
  readonly pending: readonly string[];
  byName(schema: string, table: string): CatalogTable | undefined;
}

/** What `sync.layout_state()` answers. */
export interface LayoutState {
  readonly meta: Readonly<Record<string, string>>;
  readonly tables: readonly {
    readonly table_id: number;
    readonly schema: string;
    readonly table: string;
    readonly key_column: string;
    readonly key_kind: KeyKind;
    readonly columns: readonly CatalogColumn[];
    readonly live: {
      /** `has_default` from layout 12 on. */
      readonly columns: readonly { name: string; type: string; not_null: boolean; has_default?: boolean }[];
      /** From layout 12 on. */
      readonly foreign_keys?: readonly { schema: string; table: string }[];
      readonly triggers: Readonly<Record<string, string>>;
      readonly unguarded: readonly string[];
    } | null;
  }[];
}

export interface LayoutEvaluation {
  readonly unavailable: { readonly reason: LayoutUnavailableReason; readonly detail: string } | null;
  readonly pending: readonly string[];
  readonly layoutVersion: number;
  readonly minSafeVersion: number;
  readonly schemaVersion: number;
}

/**
 * Tells whether this build can serve the layout. Drift that breaks serving: a registered table,
 * column or the hidden scope column gone, a column retyped beyond a widening, a reserved trigger
 * dropped or disabled (writes would go uncaptured). Everything else only waits for bootstrap.
 */
/** The layout range of a build: this one unless a test stands in for another. */
export interface BuildRange {
  readonly version: number;
  readonly minServed: number;
}

export const THIS_BUILD: BuildRange = Object.freeze({ version: LAYOUT_VERSION, minServed: MIN_SERVED_LAYOUT });

export function evaluateLayout(state: LayoutState, build: BuildRange = THIS_BUILD): LayoutEvaluation {
  const layoutVersion = Number(state.meta['layout_version'] ?? 0);
  const minSafeVersion = Number(state.meta['min_safe_version'] ?? layoutVersion);
  const schemaVersion = Number(state.meta['schema_version'] ?? 1);
  const base = { layoutVersion, minSafeVersion, schemaVersion };
  if (state.meta['ready'] !== 'true') {
    return { ...base, pending: [], unavailable: { reason: 'layout_upgrade_required', detail: 'the sync layout is not marked ready: run bootstrap' } };
  }
  const range = servable({ version: layoutVersion, minSafeVersion }, build);
  if (!range.ok) return { ...base, pending: [], unavailable: { reason: range.reason, detail: range.detail } };
  const drift: string[] = [];
  const pending: string[] = [];
  for (const t of state.tables) {
    const name = `${t.schema}.${t.table}`;
    if (!t.live) {
      drift.push(`registered table ${name} no longer exists`);
      continue;
    }
    const live = t.live.columns.filter((c) => c.name !== SCOPE_COLUMN).map((c) => ({ name: c.name, type: c.type, notNull: c.not_null }));
    if (!t.live.columns.some((c) => c.name === SCOPE_COLUMN)) drift.push(`${name} has no ${SCOPE_COLUMN} column`);
    const diff = compareColumns(t.columns, live);
    for (const c of diff.dropped) drift.push(`column ${name}.${c} no longer exists (dropped or renamed)`);
    for (const c of diff.retyped) drift.push(`column ${name}.${c.name} changed type from ${c.from} to ${c.to}`);
    for (const c of diff.widened) pending.push(`column ${name}.${c.name} widened from ${c.from} to ${c.to}`);
    for (const c of diff.added) pending.push(`column ${name}.${c.name} (${c.type}) is not synced yet`);
    for (const c of diff.nullability) pending.push(`column ${name}.${c.name} is now ${c.nullable ? 'nullable' : 'NOT NULL'}`);
    // A layout before 14 is served without the fixed-key trigger (bootstrap adds it when it migrates).
    for (const trigger of layoutVersion >= FIXED_KEY_LAYOUT ? [...ROOT_TRIGGERS, FIXED_KEY_TRIGGER] : ROOT_TRIGGERS) {
      const enabled = t.live.triggers[trigger];
      if (enabled === undefined) drift.push(`trigger ${trigger} on ${name} is missing`);
      else if (enabled !== 'O') drift.push(`trigger ${trigger} on ${name} is disabled`);
    }
    for (const d of t.live.unguarded) pending.push(`${d} (a descendant of ${name}) has no guard trigger yet`);
  }
  const unavailable = drift.length
    ? { reason: 'layout_drift' as const, detail: `the registered tables drifted from the sync catalog: ${drift.join('; ')}. Restore them, or run bootstrap to see what it accepts` }
    : null;
  return { ...base, unavailable, pending };
}

/** PostgreSQL error codes meaning "there is no layout": undefined table, schema or function. */
const MISSING_LAYOUT = new Set(['42P01', '3F000', '42883']);

/** Reads the layout state; a database without a (versioned) layout is one that needs bootstrap. */
export async function readLayoutState(db: Queryable): Promise<LayoutState> {
  try {
    const [row] = await db.query<{ state: LayoutState }>(sql`SELECT sync.layout_state() AS state`);
    return row?.state ?? { meta: {}, tables: [] };
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code && MISSING_LAYOUT.has(code)) return { meta: {}, tables: [] };
    throw error;
  }
}

/** Loads the catalog, or throws `503 service_unavailable` naming why this build cannot serve. */
export async function loadCatalog(db: Queryable, build: BuildRange = THIS_BUILD): Promise<Catalog> {
  const state = await readLayoutState(db);
  const evaluation = evaluateLayout(state, build);
  if (evaluation.unavailable) {
    throw new SyncError('service_unavailable', evaluation.unavailable.detail, { reason: evaluation.unavailable.reason, detail: evaluation.unavailable.detail });
  }
  const tables = state.tables.map((r): CatalogTable => {
    const columns = r.columns.map((c) => ({ ...c, category: wireCategory(c.type) }));
    return {
      tableId: r.table_id,
      schema: r.schema,
      table: r.table,
      keyColumn: r.key_column,
      keyKind: r.key_kind,
      columns,
      columnByName: new Map(columns.map((c) => [c.name, c])),
      defaulted: r.live?.columns.some((c) => c.has_default !== undefined) ? new Set(r.live.columns.filter((c) => c.has_default).map((c) => c.name)) : undefined,
      references: r.live?.foreign_keys,
    };
  });
  const index = new Map(tables.map((t) => [`${t.schema}.${t.table}`, t]));
  return {
    tables,
    schemaVersion: evaluation.schemaVersion,
    layoutVersion: evaluation.layoutVersion,
    minSafeVersion: evaluation.minSafeVersion,
    pending: evaluation.pending,
    byName: (schema, table) => index.get(`${schema}.${table}`),
  };
}
