/**
 * Layout version 14: isolation, second pass (issue 26).
 * - The guards rest on identity: only a role with the privileges of the `sync` schema's owner
 *   opens a bundle context, writes a registered table or a `sync` table. The call stack
 *   (PG_CONTEXT, which includes statement text) is kept only as a check on the owner's own SQL,
 *   so a DML role can no longer forge a managed function's frame in a comment.
 * - A sync key and `_sync_scope_id` never change: a row trigger on every registered table
 *   (`_lockstep_fixed_key`, calling sync.refuse_key_change; bootstrap installs it on every table
 *   that lacks it, as it does every reserved trigger) refuses such an UPDATE before the row is
 *   written (SQLSTATE 23LS1), and capture refuses one too, so every ON UPDATE action of the
 *   rule 9 (docs/protocol.md §11) is accepted: none can fire.
 * - A rejected push session is closed with its answer (`push_sessions.rejection`, written by
 *   sync.note_outcome): a repeated commit answers it again from sync.push_commit without applying
 *   the bundle or searching for the row, and the session stops counting against the caps.
 * - A user's sources are capped (`max_sources_per_user`, a SET clause of sync.check_source that
 *   bootstrap installs), activity is noted (`source_state.last_active_at`), and maintenance
 *   retires sources idle for long (sync.retire_idle_sources).
 *
 * New bodies of functions with unchanged signatures; an older build calls them the same way:
 * min_safe_version stays 13.
 */
import { type Migration } from './migration.js';
import { pushCommitSql } from '../../sync/push/commit.sql.js';
import { noteOutcomeSql } from '../../sync/status/user-status.sql.js';
import { checkSourceSql } from '../../sync/scope.sql.js';
import { retireIdleSourcesSql } from '../../sync/maintenance/maintenance.sql.js';
import { captureSql, guardBundleContextSql, guardManagedSql, guardSql, refuseKeyChangeSql } from '../../sync/capture/capture.sql.js';

export const migration0014: Migration = {
  version: 14,
  minSafeVersion: 13,
  description: 'isolation: guards rest on the owner role; sync keys and scopes never change',
  statements: [
    // The answer a rejected session gives again (status 'rejected'); NULL for every other session.
    'ALTER TABLE sync.push_sessions ADD COLUMN rejection jsonb',
    // When a source last acted (noted at most daily by sync.check_source); NULL: since created_at.
    'ALTER TABLE sync.source_state ADD COLUMN last_active_at timestamptz',
    // Maintenance finds idle sources oldest first without reading retired ones.
    `CREATE INDEX source_state_idle ON sync.source_state ((coalesce(last_active_at, created_at))) WHERE status <> 'retired'`,
  ],
  functions: [guardSql, guardBundleContextSql, guardManagedSql, captureSql, refuseKeyChangeSql, pushCommitSql, noteOutcomeSql,
    checkSourceSql, retireIdleSourcesSql],
};
