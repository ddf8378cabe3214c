/**
 * Scheduled maintenance: expired push and snapshot sessions, and bundles below each user's
 * retained floor, deleted in bounded batches so no statement holds locks for long; sources idle
 * for `sourceIdleRetireSeconds` retired.
 */
import { sql, type Queryable } from '../../db/index.js';
import { type Limits } from '../../limits.js';
import { expireConnections } from '../notify/connections.js';

export interface MaintenanceTotals {
  push_session_rows: number;
  push_sessions: number;
  snapshot_session_rows: number;
  snapshot_sessions: number;
  bundle_rows: number;
  /** WebSocket connections past their expiry (a `$disconnect` that never came). */
  ws_connections: number;
  /** Sources retired for being idle longer than `sourceIdleRetireSeconds`. */
  sources_retired: number;
  steps: number;
  finished: boolean;
}

export async function runMaintenance(db: Queryable, limits: Limits, budgetMs = 50_000): Promise<MaintenanceTotals> {
  const totals: MaintenanceTotals = { push_session_rows: 0, push_sessions: 0, snapshot_session_rows: 0, snapshot_sessions: 0, bundle_rows: 0, ws_connections: 0, sources_retired: 0, steps: 0, finished: false };
  const deadline = Date.now() + budgetMs;
  while (Date.now() < deadline) {
    const [row] = await db.query<{ step: Record<string, number | boolean> }>(sql`SELECT sync.maintenance_step(${limits.maintenanceBatchRows}) AS step`);
    const step = row?.step ?? {};
    totals.steps++;
    for (const key of ['push_session_rows', 'push_sessions', 'snapshot_session_rows', 'snapshot_sessions', 'bundle_rows'] as const) {
      totals[key] += Number(step[key] ?? 0);
    }
    if (!step['more']) {
      totals.finished = true;
      break;
    }
  }
  totals.ws_connections = await expireConnections(db, limits.maintenanceBatchRows).catch((error: unknown) => {
    // A layout before 10 has no connections table yet: nothing to expire.
    if (['42883', '42P01'].includes(String((error as { code?: unknown }).code))) return 0;
    throw error;
  });
  totals.sources_retired = await db.query<{ n: number }>(sql`
    SELECT sync.retire_idle_sources(${limits.sourceIdleRetireSeconds}, ${limits.maintenanceBatchRows}) AS n`).then(
    ([row]) => Number(row?.n ?? 0),
    (error: unknown) => {
      // A layout before 14 has no activity to go by: nothing is retired.
      if (String((error as { code?: unknown }).code) === '42883') return 0;
      throw error;
    });
  return totals;
}
