/**
 * Layout version 13: a bundle rejected for a value PostgreSQL cannot store (a data exception,
 * 22xxx) names the table whose statement failed, `sync.first_unstorable_row` finds the row and
 * `sync.unstorable_column` its column, so `push_rejected` names them like a constraint violation
 * and a client can quarantine that row alone (issue 16 defect 1: the violation had null table
 * and key).
 *
 * A new body of push_commit whose answer only gains a table name, new functions an older build
 * never calls, and the bundle-context guard letting them open contexts they always roll back:
 * min_safe_version stays 12.
 */
import { type Migration } from './migration.js';
import { guardBundleContextSql } from '../../sync/capture/capture.sql.js';
import { firstUnstorableRowSql, pushCommitSql, tryUnstorableSql, unstorableColumnSql, unstorableProbeSql } from '../../sync/push/commit.sql.js';

export const migration0013: Migration = {
  version: 13,
  minSafeVersion: 12,
  description: 'data exceptions in a commit name their table and row',
  functions: [pushCommitSql, unstorableProbeSql, tryUnstorableSql, firstUnstorableRowSql, unstorableColumnSql, guardBundleContextSql],
};
