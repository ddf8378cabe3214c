/**
 * Layout version 6: a committed answer only for rows that were applied (issue 15, item 3).
 * - Commit stores the request hash of the staged rows with every bundle, computed when the client
 *   sent none, and a second session of the same (source, source_bundle_id) is compared by the hash
 *   of its own staged rows: other rows answer push_request_mismatch instead of "committed".
 * - Push-session create without a request_hash for a committed tuple no longer answers
 *   already_committed (it cannot know whether the rows are the same): it stages them, and commit
 *   compares.
 *
 * Same signatures; answers only change where the old ones acknowledged rows that were never
 * applied, so the previous build serves this layout (min_safe_version 5).
 */
import { type Migration } from './migration.js';
import { pushCreateSql } from '../../sync/push/push-session.sql.js';
import { pushCommitSql } from '../../sync/push/commit.sql.js';

export const migration0006: Migration = {
  version: 6,
  minSafeVersion: 5,
  description: 'push rows compared by their request hash: no committed answer for rows of another session, with or without request_hash',
  functions: [pushCreateSql, pushCommitSql],
};
