/**
 * Layout version 5: reads concatenate rows rendered once, and budgets count the bytes a response
 * really costs (issue 15 item 2, issue 18).
 * - Commit stores each committed row's pull text and its size on the wire (escaped, as Lambda
 *   counts a body inside its function result) in `bundle_rows`, the bundle's total in
 *   `bundle_log.wire_bytes`; snapshot create stores each row's page text and size instead of its
 *   payload. Pull, committed-rows and snapshot pages join stored text under a budget of those
 *   bytes, so no page exceeds it (one row or bundle always goes; a bundle too large goes without
 *   its rows). Rows stored before this layout are rendered and measured on read, as before.
 * - A committed row larger than any response could carry fails the commit (SQLSTATE LS413, the
 *   edge's 413 payload_too_large): push_commit, server_bundle_finish and finalize_bundle take that
 *   bound as a new last argument with a default, so the previous build's calls still resolve.
 *
 * The previous build serves this layout (min_safe_version 4): every function it calls keeps its
 * arguments (the new one defaults) and its answers.
 */
import { type Migration } from './migration.js';
import { wireBytesSql } from '../../sync/shared.sql.js';
import { finalizeBundleSql, pushCommitSql } from '../../sync/push/commit.sql.js';
import { serverBundleFinishSql } from '../../sync/push/server-write.sql.js';
import { pullSql, committedRowsSql } from '../../sync/read/read.sql.js';
import { snapshotCreateSql, snapshotPageSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0005: Migration = {
  version: 5,
  minSafeVersion: 4,
  description: 'rows rendered once (bundle_rows.row_text, snapshot_session_rows.row_text) with their escaped wire size; pages budgeted in those bytes; rows no response could carry refused at commit',
  dropFunctions: [
    'sync.finalize_bundle(bigint, bigint, text, bigint, text, integer)',
    'sync.push_commit(text, text, uuid, integer, integer)',
    'sync.server_bundle_finish(integer)',
  ],
  statements: [
    `ALTER TABLE sync.bundle_rows ADD COLUMN row_text text, ADD COLUMN wire_bytes integer`,
    `ALTER TABLE sync.bundle_log ADD COLUMN wire_bytes bigint`,
    `ALTER TABLE sync.snapshot_session_rows ADD COLUMN row_text text, ADD COLUMN wire_bytes integer, ALTER COLUMN payload DROP NOT NULL`,
  ],
  functions: [wireBytesSql, finalizeBundleSql, pushCommitSql, serverBundleFinishSql, pullSql, committedRowsSql, snapshotCreateSql, snapshotPageSql],
};
