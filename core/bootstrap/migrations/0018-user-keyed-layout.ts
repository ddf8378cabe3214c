/**
 * Layout version 18: every per-user `sync` table keyed by the user's scope itself, ready to be
 * distributed on Citus by it (issue 28 §2; docs/scale-out.md, "What the layout must change").
 * - `user_id text NOT NULL` (the verified `sub`, as the registered tables' `_sync_scope_id`) leads
 *   the primary key and every unique index of every per-user table; existing rows take it from
 *   `user_state` through `user_pk` (the session rows and chunks through their session or data
 *   set), then `user_pk` and its global sequence `sync.user_pk_seq` go.
 * - No global sequence on the request path: capture numbers a bundle's rows after the bundle's
 *   last captured row (the end of the `(user_id, xact, capture_id)` index range) instead of by
 *   `sync.capture_seq`; the counters a request counts
 *   (`history_pruned`, `push_conflicts`, `push_rejected`, `bundles_committed`) are rows of the
 *   per-user ledger (`counter_deltas.user_id`), their sequences folded into `counter_totals` and
 *   dropped. Only `counter_rejected_direct_writes` stays a sequence: the refusal it counts rolls
 *   back.
 * - The bundle context is found by (user, transaction): its `scope` column becomes `user_id`, and
 *   the guard and capture locate it through `lockstep.bundle_user`, a transaction-local setting
 *   its opener makes (a locator only: the row it must find is what only managed functions write).
 * - Helpers take `p_user text` instead of `p_user_pk bigint`; `ws_disconnect`,
 *   `server_bundle_finish` and `count` take the user; every statement on a session table names
 *   the user.
 *
 * Every managed function changes and the older builds call helpers and columns that are gone, so
 * min_safe_version is 18, and this build serves layout 18 only (MIN_SERVED_LAYOUT).
 */
import { type Migration } from './migration.js';
import { checkBundleFinishedSql, captureSql, guardSql } from '../../sync/capture/capture.sql.js';
import { connectSql } from '../../sync/connect/connect.sql.js';
import { maintenanceStepSql, retireIdleSourcesSql } from '../../sync/maintenance/maintenance.sql.js';
import { countSql } from '../../sync/meta/counters.sql.js';
import { notifyCommitSql, wsConnectSql, wsDisconnectSql, wsTargetsSql } from '../../sync/notify/notify.sql.js';
import {
  bundleAnswerSql, finalizeBundleSql, firstFailingRowSql, firstUnstorableRowSql, pushCommitSql, tryUnstorableSql, unstorableColumnSql,
  unstorableProbeSql,
} from '../../sync/push/commit.sql.js';
import { pushChunkSql, pushCreateSql, pushDeleteSql, pushRequestHashSql } from '../../sync/push/push-session.sql.js';
import { serverBundleBeginSql, serverBundleFinishSql } from '../../sync/push/server-write.sql.js';
import { rateLimitedSql } from '../../sync/quota/quota.sql.js';
import { committedRowsSql, pullSql } from '../../sync/read/read.sql.js';
import { checkPushScopeSql, checkReadScopeSql, checkSourceSql, ensureUserSql } from '../../sync/scope.sql.js';
import { rotateSourceSql, snapshotCreateSql, snapshotDeleteSql, snapshotPageSql } from '../../sync/snapshot/snapshot.sql.js';
import { noteOutcomeSql, userStatusSql } from '../../sync/status/user-status.sql.js';

/** Tables that name their user by user_pk today. */
const BY_USER_PK = [
  'scope_state', 'source_state', 'row_state', 'bundle_log', 'bundle_rows', 'push_sessions', 'snapshot_sessions', 'snapshot_data',
  'user_quota', 'user_outcomes', 'ws_connections',
];

export const migration0018: Migration = {
  version: 18,
  minSafeVersion: 18,
  description: 'per-user tables keyed by user_id (the scope, as text) for Citus; no global sequence on the request path; per-user counter ledger',
  dropFunctions: [
    'sync.ensure_user(text)',
    'sync.check_source(bigint, text, boolean)',
    'sync.check_push_scope(bigint, text, uuid)',
    'sync.check_read_scope(bigint)',
    'sync.rate_limited(bigint, text, text, bigint, integer)',
    'sync.rotate_source(bigint, text, text, text, text)',
    'sync.bundle_answer(bigint, bigint)',
    'sync.finalize_bundle(bigint, bigint, text, bigint, text, integer, bigint)',
    'sync.unstorable_probe(text, uuid, smallint)',
    'sync.try_unstorable(text, uuid, bigint, text, text, integer, integer, text)',
    'sync.push_request_hash(uuid)',
    'sync.server_bundle_finish(integer, bigint)',
    'sync.ws_disconnect(text[])',
    'sync.count(text, bigint)',
  ],
  statements: [
    // Scratch of one transaction: empty between transactions.
    `TRUNCATE sync.capture_rows`,
    // The user's id beside user_pk, then the rows that reach their user through a parent.
    ...BY_USER_PK.flatMap((t) => [
      `ALTER TABLE sync.${t} ADD COLUMN user_id text`,
      `UPDATE sync.${t} t SET user_id = u.user_id FROM sync.user_state u WHERE u.user_pk = t.user_pk`,
    ]),
    `ALTER TABLE sync.push_session_rows ADD COLUMN user_id text`,
    `UPDATE sync.push_session_rows r SET user_id = s.user_id FROM sync.push_sessions s WHERE s.push_id = r.push_id`,
    `ALTER TABLE sync.snapshot_session_rows ADD COLUMN user_id text`,
    `UPDATE sync.snapshot_session_rows r SET user_id = s.user_id FROM sync.snapshot_sessions s WHERE s.snapshot_id = r.snapshot_id`,
    `ALTER TABLE sync.snapshot_chunks ADD COLUMN user_id text`,
    `UPDATE sync.snapshot_chunks c SET user_id = d.user_id FROM sync.snapshot_data d WHERE d.data_id = c.data_id`,
    // Rows of no session (none are expected: maintenance removes rows before their session).
    `DELETE FROM sync.push_session_rows WHERE user_id IS NULL`,
    `DELETE FROM sync.snapshot_session_rows WHERE user_id IS NULL`,
    `DELETE FROM sync.snapshot_chunks WHERE user_id IS NULL`,
    // user_pk goes, with the keys and indexes on it (children first: their foreign keys name it).
    ...BY_USER_PK.map((t) => `ALTER TABLE sync.${t} DROP COLUMN user_pk, ALTER COLUMN user_id SET NOT NULL`),
    `ALTER TABLE sync.push_session_rows DROP CONSTRAINT push_session_rows_pkey, ALTER COLUMN user_id SET NOT NULL`,
    `DROP INDEX sync.push_session_rows_key_idx`,
    `ALTER TABLE sync.snapshot_session_rows DROP CONSTRAINT snapshot_session_rows_pkey, ALTER COLUMN user_id SET NOT NULL`,
    `ALTER TABLE sync.snapshot_chunks DROP CONSTRAINT snapshot_chunks_pkey, ALTER COLUMN user_id SET NOT NULL`,
    `ALTER TABLE sync.push_sessions DROP CONSTRAINT push_sessions_pkey`,
    `ALTER TABLE sync.snapshot_sessions DROP CONSTRAINT snapshot_sessions_pkey`,
    `DROP INDEX sync.snapshot_sessions_data_idx`,
    `ALTER TABLE sync.snapshot_data DROP CONSTRAINT snapshot_data_pkey`,
    `ALTER TABLE sync.ws_connections DROP CONSTRAINT ws_connections_pkey`,
    `ALTER TABLE sync.user_state DROP COLUMN user_pk, DROP CONSTRAINT user_state_user_id_key, ADD PRIMARY KEY (user_id)`,
    `DROP SEQUENCE sync.user_pk_seq`,
    // Maintenance finds users with pruning work without scanning every user.
    `CREATE INDEX user_state_prune_idx ON sync.user_state (user_id) WHERE pruned_through < retained_floor`,
    // Every key leads with the user.
    `ALTER TABLE sync.scope_state ADD PRIMARY KEY (user_id), ADD FOREIGN KEY (user_id) REFERENCES sync.user_state (user_id)`,
    `ALTER TABLE sync.source_state ADD PRIMARY KEY (user_id, source_id), ADD FOREIGN KEY (user_id) REFERENCES sync.user_state (user_id)`,
    `ALTER TABLE sync.row_state ADD PRIMARY KEY (user_id, table_id, key_bytes)`,
    `ALTER TABLE sync.bundle_log ADD PRIMARY KEY (user_id, bundle_seq),
       ADD CONSTRAINT bundle_log_source_key UNIQUE (user_id, source_id, source_bundle_id)`,
    `ALTER TABLE sync.bundle_rows ADD PRIMARY KEY (user_id, bundle_seq, row_ordinal)`,
    `ALTER TABLE sync.push_sessions ADD PRIMARY KEY (user_id, push_id)`,
    `CREATE INDEX push_sessions_user_idx ON sync.push_sessions (user_id, expires_at)`,
    `ALTER TABLE sync.push_session_rows ADD PRIMARY KEY (user_id, push_id, row_ordinal)`,
    // A bundle names each key once; the client coalesces its dirty set per key.
    `CREATE UNIQUE INDEX push_session_rows_key_idx ON sync.push_session_rows (user_id, push_id, table_id, key_bytes)`,
    `ALTER TABLE sync.snapshot_sessions ADD PRIMARY KEY (user_id, snapshot_id)`,
    `CREATE INDEX snapshot_sessions_user_idx ON sync.snapshot_sessions (user_id, expires_at)`,
    // The delete of a session finds the other sessions of its data set.
    `CREATE INDEX snapshot_sessions_data_idx ON sync.snapshot_sessions (user_id, data_id)`,
    `ALTER TABLE sync.snapshot_session_rows ADD PRIMARY KEY (user_id, snapshot_id, row_ordinal)`,
    `ALTER TABLE sync.snapshot_data ADD PRIMARY KEY (user_id, data_id)`,
    `CREATE INDEX snapshot_data_user_idx ON sync.snapshot_data (user_id, snapshot_bundle_seq)`,
    `ALTER TABLE sync.snapshot_chunks ADD PRIMARY KEY (user_id, data_id, first_ordinal)`,
    `ALTER TABLE sync.user_quota ADD PRIMARY KEY (user_id)`,
    `ALTER TABLE sync.user_outcomes ADD PRIMARY KEY (user_id)`,
    `ALTER TABLE sync.ws_connections ADD PRIMARY KEY (user_id, connection_id), ADD FOREIGN KEY (user_id) REFERENCES sync.user_state (user_id)`,
    // Notify reads a user's connections; $connect prunes that user's expired ones.
    `CREATE INDEX ws_connections_user_idx ON sync.ws_connections (user_id, expires_at)`,
    // $disconnect and a ping name a connection, not its user (functions/ws.ts).
    `CREATE INDEX ws_connections_connection_idx ON sync.ws_connections (connection_id)`,
    // The bundle context: its scope is the user, found with the transaction.
    `ALTER TABLE sync.bundle_context DROP CONSTRAINT bundle_context_pkey, DROP COLUMN user_pk`,
    `ALTER TABLE sync.bundle_context RENAME COLUMN scope TO user_id`,
    `ALTER TABLE sync.bundle_context ADD PRIMARY KEY (user_id, xact)`,
    `ALTER TABLE sync.capture_rows ADD COLUMN user_id text NOT NULL`,
    `DROP INDEX sync.capture_rows_xact_idx`,
    // A bundle's captured rows, and their last number (capture numbers the next after it).
    `CREATE INDEX capture_rows_xact_idx ON sync.capture_rows (user_id, xact, capture_id)`,
    `DROP SEQUENCE sync.capture_seq`,
    // The per-user ledger: rows before it, and a runtime's pending counts, are no one user's ('').
    `ALTER TABLE sync.counter_deltas ADD COLUMN user_id text NOT NULL DEFAULT ''`,
    `ALTER TABLE sync.counter_deltas ALTER COLUMN user_id DROP DEFAULT`,
    // The counters a request counted in sequences, folded into the ledger's totals.
    `INSERT INTO sync.counter_totals AS t (name, value)
     SELECT 'history_pruned', CASE WHEN is_called THEN last_value ELSE 0 END FROM sync.counter_history_pruned
     UNION ALL SELECT 'push_conflicts', CASE WHEN is_called THEN last_value ELSE 0 END FROM sync.counter_push_conflicts
     UNION ALL SELECT 'push_rejected', CASE WHEN is_called THEN last_value ELSE 0 END FROM sync.counter_push_rejected
     ON CONFLICT (name) DO UPDATE SET value = t.value + EXCLUDED.value`,
    // counter_bundles_committed was kept for builds before layout 7, the other two since then unused.
    `DROP SEQUENCE sync.counter_history_pruned, sync.counter_push_conflicts, sync.counter_push_rejected, sync.counter_bundles_committed,
       sync.counter_bundles_pruned, sync.counter_commit_outcome_unknown`,
  ],
  functions: [
    ensureUserSql, checkSourceSql, checkPushScopeSql, checkReadScopeSql, rateLimitedSql, connectSql, countSql,
    bundleAnswerSql, finalizeBundleSql, pushCommitSql, unstorableProbeSql, tryUnstorableSql, firstUnstorableRowSql, unstorableColumnSql,
    firstFailingRowSql, pushCreateSql, pushChunkSql, pushDeleteSql, pushRequestHashSql, serverBundleBeginSql, serverBundleFinishSql,
    pullSql, committedRowsSql, rotateSourceSql, snapshotCreateSql, snapshotPageSql, snapshotDeleteSql,
    wsConnectSql, wsDisconnectSql, wsTargetsSql, notifyCommitSql, noteOutcomeSql, userStatusSql,
    maintenanceStepSql, retireIdleSourcesSql, guardSql, checkBundleFinishedSql, captureSql,
  ],
};
