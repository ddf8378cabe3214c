/**
 * Layout version 17: snapshots stored as pre-rendered chunks, shared between sessions (issue 27
 * item 1).
 * - `sync.snapshot_data`: one rendered snapshot of a user at one bundle_seq (and one rendering, its
 *   render key), which sessions point to (`snapshot_sessions.data_id`); a second device at the same
 *   ceiling shares it instead of rendering again.
 * - `sync.snapshot_chunks`: its rows as runs of up to 500, the rows' page texts one per line, with
 *   the run's size on the wire: a page joins a few chunks instead of reading, sizing and joining
 *   thousands of rows. Unlogged scratch like the tables it replaces, and stored without
 *   compression (written once, read whole, gone within minutes).
 *
 * Sessions created before (data_id NULL, rows in snapshot_session_rows) are still paged and
 * cleaned up the old way. An older build calls the same functions with the same signatures, so
 * it keeps serving: min_safe_version stays 16.
 */
import { type Migration } from './migration.js';
import { maintenanceStepSql } from '../../sync/maintenance/maintenance.sql.js';
import { snapshotCreateSql, snapshotDeleteSql, snapshotPageSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0017: Migration = {
  version: 17,
  minSafeVersion: 16,
  description: 'snapshots stored as pre-rendered chunks of rows, shared by the sessions of one user at one ceiling',
  statements: [
    `CREATE UNLOGGED TABLE sync.snapshot_data (
       data_id uuid PRIMARY KEY,
       user_pk bigint NOT NULL,
       snapshot_bundle_seq bigint NOT NULL,
       render_key text NOT NULL,
       row_count integer NOT NULL,
       byte_count bigint NOT NULL,
       created_at timestamptz NOT NULL,
       expires_at timestamptz NOT NULL
     )`,
    // A create looks for a data set of the user at its ceiling; maintenance for expired ones.
    `CREATE INDEX snapshot_data_user_idx ON sync.snapshot_data (user_pk, snapshot_bundle_seq)`,
    `CREATE INDEX snapshot_data_expires_idx ON sync.snapshot_data (expires_at)`,
    `CREATE UNLOGGED TABLE sync.snapshot_chunks (
       data_id uuid NOT NULL,
       first_ordinal integer NOT NULL,
       row_count integer NOT NULL,
       wire_bytes bigint NOT NULL,
       body text NOT NULL,
       PRIMARY KEY (data_id, first_ordinal)
     )`,
    `ALTER TABLE sync.snapshot_chunks ALTER COLUMN body SET STORAGE EXTERNAL`,
    `ALTER TABLE sync.snapshot_sessions ADD COLUMN data_id uuid`,
    // The delete of a session finds the other sessions of its data set.
    `CREATE INDEX snapshot_sessions_data_idx ON sync.snapshot_sessions (data_id)`,
  ],
  functions: [snapshotCreateSql, snapshotPageSql, snapshotDeleteSql, maintenanceStepSql],
  afterFunctions: [
    `CREATE TRIGGER _lockstep_guard_managed BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON sync.snapshot_data
       FOR EACH STATEMENT EXECUTE FUNCTION sync.guard_managed()`,
    `CREATE TRIGGER _lockstep_guard_managed BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON sync.snapshot_chunks
       FOR EACH STATEMENT EXECUTE FUNCTION sync.guard_managed()`,
  ],
};
