/**
 * Layout version 2: the layout is versioned, and registered tables can evolve.
 * - `sync.meta` keeps `layout_version` and `min_safe_version` instead of a hash of the install SQL
 *   (which any edit, even of a comment, changed); its layout description hashes normalized
 *   function text.
 * - `sync.layout_state()` gives request handlers the version range, the catalog and the live
 *   declarations of the registered tables in one cached read.
 * - `table_catalog.retired` marks a table unregistered by an accepted contract step: its
 *   history still renders (clients skip tables they do not manage), nothing new is accepted for
 *   it, and snapshots leave it out.
 *
 * The first release checked for its own hash and version 1 exactly, so it cannot serve this
 * layout: min_safe_version is 2.
 */
import { type Migration } from './migration.js';
import { layoutStateSql, tableLiveSql } from '../../sync/catalog/catalog.sql.js';
import { snapshotCreateSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0002: Migration = {
  version: 2,
  minSafeVersion: 2,
  description: 'versioned layout: min_safe_version, no install-SQL hash, sync.layout_state(), retired catalog entries',
  statements: [
    `DELETE FROM sync.meta WHERE key = 'layout_code_hash'`,
    `ALTER TABLE sync.table_catalog ADD COLUMN retired boolean NOT NULL DEFAULT false`,
  ],
  functions: [tableLiveSql, layoutStateSql, snapshotCreateSql],
};
