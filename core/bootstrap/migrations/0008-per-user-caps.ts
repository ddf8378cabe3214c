/**
 * Layout version 8: per-user caps (issue 15, item 7; protocol §8). `sync.user_quota` keeps each
 * user's open push sessions, open snapshot sessions and staged bytes, maintained by the
 * functions that open and close sessions (create, commit, delete, maintenance), so a cap is one
 * row read and written, never a count over a session table; over a cap the answer is 429
 * rate_limited with Retry-After (the user's oldest open session's expiry, found through the new
 * (user_pk, expires_at) indexes). The counters start from the sessions the database holds.
 *
 * push_create, push_chunk and snapshot_create take the caps as new last arguments with the
 * contract's defaults, so a previous build's calls still resolve: min_safe_version stays 7.
 */
import { type Migration } from './migration.js';
import { rateLimitedSql } from '../../sync/quota/quota.sql.js';
import { pushChunkSql, pushCreateSql, pushDeleteSql } from '../../sync/push/push-session.sql.js';
import { pushCommitSql } from '../../sync/push/commit.sql.js';
import { snapshotCreateSql, snapshotDeleteSql } from '../../sync/snapshot/snapshot.sql.js';
import { maintenanceStepSql } from '../../sync/maintenance/maintenance.sql.js';

export const migration0008: Migration = {
  version: 8,
  minSafeVersion: 7,
  description: 'per-user caps: open push and snapshot sessions and staged bytes counted per user, 429 rate_limited over a cap',
  dropFunctions: [
    'sync.push_create(text, text, bigint, integer, uuid, text, integer)',
    'sync.push_chunk(text, text, uuid, integer, jsonb, bigint, text, bigint)',
    'sync.snapshot_create(text, text, text, text, text, integer)',
  ],
  statements: [
    `CREATE TABLE sync.user_quota (
      user_pk bigint PRIMARY KEY,
      open_push_sessions integer NOT NULL,
      open_snapshot_sessions integer NOT NULL,
      staged_bytes bigint NOT NULL
    )`,
    // Retry-After finds a user's oldest open session without reading anyone else's.
    `CREATE INDEX push_sessions_user_idx ON sync.push_sessions (user_pk, expires_at)`,
    `CREATE INDEX snapshot_sessions_user_idx ON sync.snapshot_sessions (user_pk, expires_at)`,
    `INSERT INTO sync.user_quota (user_pk, open_push_sessions, open_snapshot_sessions, staged_bytes)
     SELECT user_pk, sum(push)::integer, sum(snap)::integer, sum(bytes)::bigint FROM (
       SELECT user_pk, 1 AS push, 0 AS snap, byte_count AS bytes FROM sync.push_sessions WHERE status = 'staging'
       UNION ALL SELECT user_pk, 0, 1, 0 FROM sync.snapshot_sessions) s
     GROUP BY user_pk`,
  ],
  functions: [rateLimitedSql, pushCreateSql, pushChunkSql, pushDeleteSql, pushCommitSql, snapshotCreateSql, snapshotDeleteSql, maintenanceStepSql],
};
