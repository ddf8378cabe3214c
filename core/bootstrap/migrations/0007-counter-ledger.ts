/**
 * Layout version 7: counters that count what committed (issue 15, item 4).
 * - `sync.counter_deltas`, an insert-only ledger written by the transaction it counts (a commit
 *   that dies after its bundle was finalized leaves nothing), and `sync.counter_totals`, into
 *   which maintenance folds it. `bundles_committed`, `bundles_pruned` and
 *   `commit_outcome_unknown` live there; the other counters stay sequences (they count events
 *   whose transactions roll back by nature).
 * - The totals start from what the database holds: every bundle ever committed is the sum of the
 *   users' latest bundle_seq, the pruned ones those no longer in the log.
 *
 * Only additions (finalize still advances the old sequence, which older builds' status reads):
 * min_safe_version stays 6.
 */
import { type Migration } from './migration.js';
import { countSql } from '../../sync/meta/counters.sql.js';
import { finalizeBundleSql } from '../../sync/push/commit.sql.js';
import { maintenanceStepSql } from '../../sync/maintenance/maintenance.sql.js';

export const migration0007: Migration = {
  version: 7,
  minSafeVersion: 6,
  description: 'counter ledger: bundles_committed, bundles_pruned and commit_outcome_unknown counted by the transactions that commit them',
  statements: [
    `CREATE TABLE sync.counter_totals (
      name text PRIMARY KEY,
      value bigint NOT NULL
    )`,
    // No key: rows are only ever inserted, summed and folded away by maintenance.
    `CREATE TABLE sync.counter_deltas (
      name text NOT NULL,
      delta bigint NOT NULL
    )`,
    `INSERT INTO sync.counter_totals (name, value)
     SELECT 'bundles_committed', coalesce(sum(latest_bundle_seq), 0) FROM sync.user_state
     UNION ALL
     SELECT 'bundles_pruned', coalesce(sum(latest_bundle_seq), 0) - (SELECT count(*) FROM sync.bundle_log) FROM sync.user_state
     UNION ALL
     SELECT 'commit_outcome_unknown', CASE WHEN is_called THEN last_value ELSE 0 END FROM sync.counter_commit_outcome_unknown`,
  ],
  functions: [countSql, finalizeBundleSql, maintenanceStepSql],
};
