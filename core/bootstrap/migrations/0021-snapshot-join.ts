/**
 * Layout version 21: `sync.snapshot_create` reads the user's row versions with one join instead of
 * one probe of row_state's key per row (100k rows: 830 → 585 ms for the whole create). The
 * function plans without nested loops (its own SET clause, undone when it returns), so stale
 * statistics can no longer turn the join into a re-read of the user's row_state per row, which the
 * per-row probe had been there to prevent; and without JIT, which the disabled nested loop's
 * plan cost would otherwise switch on for every create where a server has it. Same signature,
 * same rows and order: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { snapshotCreateSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0021: Migration = {
  version: 21,
  minSafeVersion: 18,
  description: 'snapshot create joins the row versions once instead of probing row_state per row',
  functions: [snapshotCreateSql],
};
