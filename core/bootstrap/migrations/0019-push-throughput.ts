/**
 * Layout version 19: a cheaper 10k-row push (issue 27 item 2), same results byte for byte.
 * - `sync.finalize_bundle` hashes the bundle's rows from a subquery that is never flattened (a
 *   bundle of one table had its canonical row text computed once per aggregate that read it, four
 *   times), and aggregates protocol 2's text only when a table of the bundle has a json column.
 * - `sync.push_chunk` converts a protocol 1 payload to the stored json form only for tables with a
 *   json column (the conversion is a per-row SQL function call that is never inlined).
 *
 * New bodies under the same signatures and meaning: an older build keeps serving, so
 * min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { finalizeBundleSql } from '../../sync/push/commit.sql.js';
import { pushChunkSql } from '../../sync/push/push-session.sql.js';

export const migration0019: Migration = {
  version: 19,
  minSafeVersion: 18,
  description: 'push throughput: the bundle hash computed once per row, protocol 1 payloads converted only where a json column needs it',
  functions: [finalizeBundleSql, pushChunkSql],
};
