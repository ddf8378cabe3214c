/**
 * Layout version 26: a snapshot may hold its rows as arrays, `[table_id, row_version, values…]`,
 * under one header per table that names the values (docs/protocol.md §5.6), for a client that asks
 * for them: a page is about half the bytes of the same rows as objects, which repeat the schema,
 * table, key and every column name on each row, and the client parses and maps it in a fraction
 * of the time. The catalog keeps each table's array SQL and header (bootstrap renders them); a
 * data set of arrays keeps the header it was rendered with, so its pages still name its values
 * after a deploy changed the catalog. Objects stay the default, and their pages are the same
 * text: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { snapshotCreateSql, snapshotPageSql, snapshotRenderSql, snapshotRowSelectSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0026: Migration = {
  version: 26,
  minSafeVersion: 18,
  description: 'snapshot rows as arrays under a header per table, for a client that asks for them',
  statements: [
    `ALTER TABLE sync.table_catalog ADD COLUMN snapshot_array_sql text, ADD COLUMN row_array_header text`,
    `ALTER TABLE sync.snapshot_data ADD COLUMN row_tables text`,
  ],
  functions: [snapshotRowSelectSql, snapshotRenderSql, snapshotCreateSql, snapshotPageSql],
};
