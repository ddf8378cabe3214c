/**
 * Layout version 11: operator status per user (issue 17 item 7). `sync.user_outcomes` keeps each
 * user's last conflict and last rejection (written by sync.note_outcome after such an answer),
 * and sync.user_status reads one user's stream, sources, sessions and outcomes by index probes.
 * The new table carries the managed-table guard like every other table of the layout.
 *
 * Only additions, which an older build never calls: min_safe_version stays 10.
 */
import { type Migration } from './migration.js';
import { noteOutcomeSql, userStatusSql, USER_OUTCOMES_DDL } from '../../sync/status/user-status.sql.js';

export const migration0011: Migration = {
  version: 11,
  minSafeVersion: 10,
  description: 'operator status per user: last conflict and rejection kept per user, one user\'s status read by index probes',
  statements: [USER_OUTCOMES_DDL],
  functions: [noteOutcomeSql, userStatusSql],
  afterFunctions: [
    `CREATE TRIGGER _lockstep_guard_managed BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON sync.user_outcomes
       FOR EACH STATEMENT EXECUTE FUNCTION sync.guard_managed()`,
  ],
};
