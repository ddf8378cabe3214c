/** Lambda: scheduled maintenance (expired sessions, pruning below retained floors), bounded in time. */
import { runMaintenance, type MaintenanceTotals } from '../core/sync/index.js';
import { runtimeFromEnv } from './edge/runtime.js';

export async function handler(_event?: unknown, context?: { getRemainingTimeInMillis?: () => number }): Promise<MaintenanceTotals> {
  const runtime = await runtimeFromEnv();
  // Leave a safety margin under the function timeout.
  const budgetMs = Math.max(1000, (context?.getRemainingTimeInMillis?.() ?? 60_000) - 10_000);
  const totals = await runMaintenance(runtime.db.forRequest(), runtime.config.limits, budgetMs);
  runtime.telemetry.log('info', 'maintenance', { ...totals });
  return totals;
}
