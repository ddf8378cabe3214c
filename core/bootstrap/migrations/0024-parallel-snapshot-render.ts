/**
 * Layout version 24: a snapshot's rows are rendered by `sync.snapshot_render`, a query that only
 * reads, so PostgreSQL may run it in parallel: workers scan, join row versions, render and sort
 * their share, the leader merges and cuts the chunks (100k rows on two cores: the create 640–690
 * → 510–555 ms); from SNAPSHOT_PARALLEL_ROWS rows of a user, whatever the statistics say.
 * `sync.snapshot_create` stores what it returns in the same statement, so the snapshot is still
 * read at one instant. The functions the row SQL calls to render values are declared PARALLEL
 * SAFE (an unsafe one would keep the whole render serial). Chunks, pages and answers are the same
 * text: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { rfc3339Sql } from '../../sync/shared.sql.js';
import {
  isoYearSql, wireTimestampSql, wireDateSql, wireShapeSql, wireTimestamptzArraySql, wireTimestampArraySql, wireDateArraySql, wireByteaArraySql,
} from '../../sync/catalog/wire-values.sql.js';
import { snapshotCreateSql, snapshotRenderSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0024: Migration = {
  version: 24,
  minSafeVersion: 18,
  description: 'snapshot rows rendered by a read-only query that may run in parallel; value renderers PARALLEL SAFE',
  functions: [
    rfc3339Sql, isoYearSql, wireTimestampSql, wireDateSql, wireShapeSql, wireTimestamptzArraySql, wireTimestampArraySql, wireDateArraySql,
    wireByteaArraySql, snapshotRenderSql, snapshotCreateSql,
  ],
};
