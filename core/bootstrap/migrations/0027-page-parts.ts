/**
 * Layout version 27: the page readers answer a page's body as its parts in order
 * (sync.pull_parts, sync.committed_rows_parts, sync.snapshot_page_parts), which the edge passes on
 * as parts (compressed one by one; joined only for an answer that goes uncompressed).
 * One text of a whole page made PostgreSQL copy it at every step on its way out, each copy a
 * megabyte or more of freshly faulted memory. The old names stay, as the parts joined in SQL, for
 * the builds before this one: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { committedRowsPartsSql, committedRowsSql, pullPartsSql, pullSql } from '../../sync/read/read.sql.js';
import { snapshotPagePartsSql, snapshotPageSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0027: Migration = {
  version: 27,
  minSafeVersion: 18,
  description: 'page bodies answered in parts, joined by the edge',
  functions: [pullPartsSql, pullSql, committedRowsPartsSql, committedRowsSql, snapshotPagePartsSql, snapshotPageSql],
};
