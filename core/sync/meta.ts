/** Capabilities, health and status. None of them scans business tables or whole metadata tables. */
import { sql, raw as sqlRaw, type Queryable } from '../db/index.js';
import { limitsToWire, type Limits } from '../limits.js';
import { COUNTERS } from '../bootstrap/layout-tables.js';
import { PROTOCOL_VERSION, type CapabilitiesResponse } from '../protocol/index.js';
import { type Catalog } from './catalog.js';

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
});

export function capabilities(catalog: Catalog, limits: Limits, appName: string): CapabilitiesResponse {
  return {
    protocol_version: PROTOCOL_VERSION,
    schema_version: catalog.schemaVersion,
    app_name: appName,
    registered_tables: catalog.tables.map((t) => `${t.schema}.${t.table}`),
    registered_table_specs: catalog.tables.map((t) => ({
      schema: t.schema,
      table: t.table,
      sync_key: { column: t.keyColumn, kind: t.keyKind },
      columns: t.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable })),
    })),
    features: { ...FEATURES },
    bundle_limits: limitsToWire(limits),
  };
}

export type Health = { status: 'healthy'; layout_version: string; checked_at: string } | { status: 'unhealthy'; reason: string };

/** Readiness: the database answers and the layout is marked ready. One round trip. */
export async function health(db: Queryable): Promise<Health> {
  try {
    const [row] = await db.query<{ ready: string | null; version: string | null }>(sql`
      SELECT (SELECT value FROM sync.meta WHERE key = 'ready') AS ready,
             (SELECT value FROM sync.meta WHERE key = 'layout_version') AS version`);
    if (row?.ready !== 'true') return { status: 'unhealthy', reason: 'the sync layout is not marked ready; run bootstrap' };
    return { status: 'healthy', layout_version: row.version ?? '', checked_at: new Date().toISOString() };
  } catch (error) {
    const code = (error as { code?: string }).code;
    const reason = code === '42P01' || code === '3F000' ? 'the sync layout does not exist; run bootstrap' : 'the database is unreachable';
    return { status: 'unhealthy', reason };
  }
}

/** Lifecycle and operability from counters and small tables: one round trip. */
export async function status(db: Queryable, catalog: Catalog, limits: Limits): Promise<Record<string, unknown>> {
  const counterSql = COUNTERS.map(
    (c) => `SELECT '${c}' AS name, CASE WHEN is_called THEN last_value ELSE 0 END AS value FROM sync.counter_${c}`,
  ).join(' UNION ALL ');
  const [row] = await db.query<{ counters: Record<string, number>; meta: Record<string, string>; sessions: Record<string, number> }>(sql`
    SELECT (SELECT jsonb_object_agg(name, value) FROM (${sqlRaw(counterSql)}) c) AS counters,
           (SELECT jsonb_object_agg(key, value) FROM sync.meta WHERE key <> 'layout_description') AS meta,
           jsonb_build_object(
             'users', (SELECT last_value FROM sync.user_pk_seq)) AS sessions`);
  const counters = row?.counters ?? {};
  return {
    lifecycle: { ready: row?.meta['ready'] === 'true', layout_version: row?.meta['layout_version'], schema_version: catalog.schemaVersion, bootstrapped_at: row?.meta['created_at'] },
    registered_tables: catalog.tables.map((t) => `${t.schema}.${t.table}`),
    features: { ...FEATURES },
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
