/**
 * Layout version 22, two read-path statements that did work their answer never needed:
 * - `sync.snapshot_create` sorts the user's rows by one bytea key that holds (apply_order,
 *   table_id, key_bytes) instead of by the three columns: a sort by three keys compares the two
 *   constant ones first for every pair and deforms the row for each, a quarter of the create
 *   (100k rows: 565 → 485 ms). The key keeps the same order, so the data set's rows, ordinals and
 *   chunks are the same bytes.
 * - `sync.pull` takes a row stored in the asked form as its stored text, without joining the
 *   table catalog for every row (10k rows in 100 bundles: 33 → 27 ms); only rows rendered in
 *   another form read their table's entry. The page is the same text.
 * Same signatures, same answers: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { pullSql } from '../../sync/read/read.sql.js';
import { snapshotCreateSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0022: Migration = {
  version: 22,
  minSafeVersion: 18,
  description: 'snapshot create sorts by one key holding (apply_order, table_id, key_bytes); pull joins the table catalog only for rows it renders',
  functions: [snapshotCreateSql, pullSql],
};
