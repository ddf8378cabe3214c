/** Capabilities, health and status. None of them scans business tables or whole metadata tables. */
import { sql, raw as sqlRaw, type Queryable } from '../../db/index.js';
import { limitsToWire, type Limits } from '../../limits.js';
import { COUNTERS, LEDGER_COUNTERS, type PendingCounters } from './counters.js';
import { MIN_PROTOCOL_VERSION, type CapabilitiesResponse } from '../../protocol/index.js';
import { ROW_ARRAYS_LAYOUT, servedProtocol } from '../wire-form.js';
import { evaluateLayout, readLayoutState, type Catalog, type LayoutState } from '../catalog/catalog.js';
import { type LayoutUnavailableReason } from '../../layout/version.js';

export const FEATURES = Object.freeze({
  staged_push_sessions: true,
  request_hash: true,
  committed_bundle_replay: true,
  snapshot_sessions: true,
  source_rotation: true,
  watch_long_poll: true,
  server_originated_writes: true,
  rows_omitted_paging: true,
  multi_conflict_answers: true,
  /**
   * Every answer fits max_response_bytes: partial lists carry their count, row values that do not
   * fit are left out and marked (`server_row_omitted`), long texts shortened (protocol §6).
   */
  budgeted_answers: true,
  /**
   * A push-session create may carry the whole bundle (`rows`): staged and committed in that one
   * request, answered as commit answers (protocol §5.2).
   */
  single_request_push: true,
  /** A snapshot create may answer the session's first page too (`first_page_rows`, protocol §5.6). */
  snapshot_first_page: true,
});

export function capabilities(catalog: Catalog, limits: Limits, appName: string): CapabilitiesResponse {
  return {
    // Protocol 2 needs layout 16's functions: a database bootstrap has not upgraded yet serves 1.
    protocol_version: servedProtocol(catalog.layoutVersion),
    min_protocol_version: MIN_PROTOCOL_VERSION,
    schema_version: catalog.schemaVersion,
    app_name: appName,
    registered_tables: catalog.tables.map((t) => `${t.schema}.${t.table}`),
    registered_table_specs: catalog.tables.map((t) => ({
      schema: t.schema,
      table: t.table,
      sync_key: { column: t.keyColumn, kind: t.keyKind },
      columns: t.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable, ...(t.defaulted ? { has_default: t.defaulted.has(c.name) } : {}) })),
      ...(t.references ? { foreign_keys: t.references.map((r) => ({ references: { schema: r.schema, table: r.table } })) } : {}),
    })),
    // Rows as arrays need layout 26's functions and protocol 2's values.
    features: { ...FEATURES, snapshot_row_arrays: catalog.layoutVersion >= ROW_ARRAYS_LAYOUT },
    bundle_limits: limitsToWire(limits),
  };
}

export type Health =
  | { status: 'healthy'; layout_version: number; min_safe_version: number; schema_version: number; pending_schema_changes: readonly string[]; checked_at: string }
  | { status: 'unhealthy'; reason: LayoutUnavailableReason | 'database_unreachable' | 'insufficient_privilege'; detail: string };

/**
 * Readiness: the database answers, the layout is in this build's range and has not drifted. One
 * round trip, catalog reads only. Changes waiting for bootstrap (a column added) are reported,
 * not unhealthy: they are served as the catalog describes them.
 */
export async function health(db: Queryable): Promise<Health> {
  let state: LayoutState;
  try {
    state = await readLayoutState(db);
  } catch (error) {
    // The database answered, but the serving role may not read the sync schema: a configuration
    // to fix, not an outage to wait out.
    if ((error as { code?: unknown } | null)?.code === '42501') {
      return { status: 'unhealthy', reason: 'insufficient_privilege',
        detail: `the serving role lacks privileges on the sync schema (${(error as Error).message}): connect as the role that owns it, which bootstrap used` };
    }
    return { status: 'unhealthy', reason: 'database_unreachable', detail: 'the database is unreachable or refused the query' };
  }
  const e = evaluateLayout(state);
  if (e.unavailable) return { status: 'unhealthy', reason: e.unavailable.reason, detail: e.unavailable.detail };
  return {
    status: 'healthy',
    layout_version: e.layoutVersion,
    min_safe_version: e.minSafeVersion,
    schema_version: e.schemaVersion,
    pending_schema_changes: e.pending,
    checked_at: new Date().toISOString(),
  };
}

/**
 * The layout whose `sync.status_facts` reads with the lock bound of a request; on layouts 18 and 19
 * status reads with the plain SELECT below (bounded only by the query timeout).
 */
const STATUS_READ_LAYOUT = 20;

/** Lifecycle and operability from counters and small tables: one round trip. */
export async function status(db: Queryable, catalog: Catalog, limits: Limits): Promise<Record<string, unknown>> {
  const ledger = new Set<string>(LEDGER_COUNTERS);
  // Ledger counters: the folded totals plus the rows maintenance has not folded yet (at most one
  // maintenance interval of commits); the others are sequences.
  const counterSql = [
    ...COUNTERS.filter((c) => !ledger.has(c)).map(
      (c) => `SELECT '${c}' AS name, CASE WHEN is_called THEN last_value ELSE 0 END AS value FROM sync.counter_${c}`,
    ),
    `SELECT name, value FROM sync.counter_totals`,
    `SELECT name, sum(delta) FROM sync.counter_deltas GROUP BY name`,
  ].join(' UNION ALL ');
  // users_registered_max_pk keeps its name (an operator's dashboards read it); since layout 18 there
  // is no user_pk sequence to read, so it is the number of users, counted (the operator's endpoint only).
  const [row] = await db.query<{ counters: Record<string, number>; meta: Record<string, string>; sessions: Record<string, number> }>(catalog.layoutVersion >= STATUS_READ_LAYOUT
    ? sql`SELECT counters, meta, sessions FROM sync.status_facts()`
    : sql`
    SELECT (SELECT jsonb_object_agg(name, value) FROM (SELECT name, sum(value)::bigint AS value FROM (${sqlRaw(counterSql)}) c GROUP BY name) c) AS counters,
           (SELECT jsonb_object_agg(key, value) FROM sync.meta WHERE key IN ('ready', 'created_at')) AS meta,
           jsonb_build_object(
             'users', (SELECT count(*) FROM sync.user_state)) AS sessions`);
  const counters = row?.counters ?? {};
  return {
    lifecycle: {
      ready: row?.meta['ready'] === 'true',
      layout_version: catalog.layoutVersion,
      min_safe_version: catalog.minSafeVersion,
      schema_version: catalog.schemaVersion,
      pending_schema_changes: catalog.pending,
      bootstrapped_at: row?.meta['created_at'],
    },
    registered_tables: catalog.tables.map((t) => `${t.schema}.${t.table}`),
    // Rows as arrays need layout 26's functions and protocol 2's values.
    features: { ...FEATURES, snapshot_row_arrays: catalog.layoutVersion >= ROW_ARRAYS_LAYOUT },
    bundle_visibility: { bundles_committed: counters['bundles_committed'] ?? 0, users_registered_max_pk: row?.sessions['users'] ?? 0 },
    retained_floor: { retained_bundles_per_user: limits.retainedBundlesPerUser, rule: 'a checkpoint below a user retained_floor answers history_pruned' },
    error_counters: {
      rejected_direct_writes: counters['rejected_direct_writes'] ?? 0,
      history_pruned: counters['history_pruned'] ?? 0,
      push_conflicts: counters['push_conflicts'] ?? 0,
      push_rejected: counters['push_rejected'] ?? 0,
      commit_outcome_unknown: counters['commit_outcome_unknown'] ?? 0,
    },
  };
}

/**
 * Records what a runtime counted while the database was unreachable; one statement, only when
 * something is pending. A failure keeps the counts for the next request.
 */
export async function flushPendingCounters(db: Queryable, pending: PendingCounters): Promise<void> {
  if (pending.empty) return;
  const entries = pending.take();
  try {
    // Counts of no one user's request: the ledger's rows of the empty user id.
    await db.query(sql`SELECT sync.count('', c.key, c.value::bigint) FROM jsonb_each_text(${JSON.stringify(Object.fromEntries(entries))}::jsonb) c`);
  } catch {
    pending.restore(entries);
  }
}
