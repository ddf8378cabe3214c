/**
 * Layout version 15: a rejected bundle names its row whatever the error was (issue 23, items 5–7).
 *
 * - `sync.push_commit` turns every error the rows can cause into `push_rejected` (an app trigger's
 *   refusal with any SQLSTATE, not only P0001); failures that are not the rows' fault
 *   (`sync.row_fault`) still propagate.
 * - `sync.first_failing_row` (with `sync.try_rows`) finds the first row at which the bundle stops
 *   applying in order, trying halves on top of the rows that passed, every try rolled back, and
 *   answers that row's own violation: a data exception and a unique clash in one table, or a
 *   trigger's refusal, no longer leave the violation without a key.
 * - `sync.finalize_bundle` names the row a response could never carry (LS413) in its DETAIL.
 * - `sync.guard_bundle_context` lets the search open the contexts it always rolls back.
 *
 * Answers only gain names, and the older searches stay for older builds: min_safe_version 14.
 */
import { type Migration } from './migration.js';
import { guardBundleContextSql } from '../../sync/capture/capture.sql.js';
import { finalizeBundleSql, firstFailingRowSql, pushCommitSql, rowFaultSql, tryRowsSql } from '../../sync/push/commit.sql.js';

export const migration0015: Migration = {
  version: 15,
  minSafeVersion: 14,
  description: 'a rejected bundle names its row for every error',
  functions: [rowFaultSql, pushCommitSql, finalizeBundleSql, tryRowsSql, firstFailingRowSql, guardBundleContextSql],
};
