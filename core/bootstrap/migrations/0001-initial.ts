/**
 * Layout version 1: the first release's `sync` schema, as it created it. Tables, indexes and
 * sequences are this migration's own DDL and never change; the functions are the current
 * definitions of the ones it created (later migrations re-create any that changed since, see
 * function-hashes.json).
 *
 * Round-trip design: every hot endpoint is one statement calling one managed function, so the
 * tables are shaped for set-based work inside PostgreSQL:
 * - the large tables use compact ids (`user_pk`, `table_id`, `key_bytes`, `op_code`);
 * - `bundle_rows.row_version` is not stored: it is the bundle's `bundle_seq`;
 * - `capture_rows` is UNLOGGED scratch space filled by statement-level capture triggers and
 *   emptied by the same transaction, so it never holds committed rows.
 */
import { type Migration } from './migration.js';
import { errSql, rfc3339Sql, keyBytesSql, keyTextSql, opNameSql, rowBytesSql } from '../../sync/shared.sql.js';
import { ensureUserSql, checkSourceSql, checkPushScopeSql, checkReadScopeSql } from '../../sync/scope.sql.js';
import { utf16beSql, jcsNumberSql, jcsSql } from '../../sync/canonical/jcs.sql.js';
import { guardSql, guardTruncateSql, captureSql } from '../../sync/capture/capture.sql.js';
import { connectSql } from '../../sync/connect/connect.sql.js';
import { pushCreateSql, pushChunkSql, pushDeleteSql, pushRequestHashSql } from '../../sync/push/push-session.sql.js';
import { bundleAnswerSql, finalizeBundleSql, pushCommitSql } from '../../sync/push/commit.sql.js';
import { serverBundleBeginSql, serverBundleFinishSql } from '../../sync/push/server-write.sql.js';
import { committedRowTextSql, bundleHeadTextSql, pullSql, committedRowsSql } from '../../sync/read/read.sql.js';
import { snapshotRowTextSql, rotateSourceSql, snapshotCreateSql, snapshotPageSql, snapshotDeleteSql } from '../../sync/snapshot/snapshot.sql.js';
import { maintenanceStepSql } from '../../sync/maintenance/maintenance.sql.js';

const TABLES = `CREATE SCHEMA sync;
CREATE TABLE sync.meta (
  key text PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE sync.table_catalog (
  table_id smallint PRIMARY KEY,
  schema_name text NOT NULL,
  table_name text NOT NULL,
  key_column text NOT NULL,
  key_kind text NOT NULL,
  apply_order integer NOT NULL,
  columns jsonb NOT NULL,
  capture_new_sql text NOT NULL,
  capture_old_sql text NOT NULL,
  capture_keychange_sql text NOT NULL,
  upsert_sql text NOT NULL,
  delete_sql text NOT NULL,
  snapshot_sql text NOT NULL,
  lookup_sql text NOT NULL,
  hash_rows_sql text NOT NULL,
  request_rows_sql text NOT NULL,
  row_json_prefix text NOT NULL,
  CONSTRAINT table_catalog_name_key UNIQUE (schema_name, table_name)
);

CREATE SEQUENCE sync.user_pk_seq AS bigint;

-- One row per user stream. Its row lock serialises the user's commits, so bundle_seq is
-- allocated inside the commit transaction and stays gapless (lessons: serialise per user).
CREATE TABLE sync.user_state (
  user_pk bigint PRIMARY KEY,
  user_id text NOT NULL,
  latest_bundle_seq bigint NOT NULL,
  retained_floor bigint NOT NULL,
  pruned_through bigint NOT NULL,
  created_at timestamptz NOT NULL,
  CONSTRAINT user_state_user_id_key UNIQUE (user_id)
);
-- Maintenance finds users with pruning work without scanning every user.
CREATE INDEX user_state_prune_idx ON sync.user_state (user_pk) WHERE pruned_through < retained_floor;

CREATE TABLE sync.scope_state (
  user_pk bigint PRIMARY KEY REFERENCES sync.user_state (user_pk),
  status text NOT NULL,
  initialization_id uuid,
  lease_source_id text,
  lease_expires_at timestamptz,
  updated_at timestamptz NOT NULL
);

CREATE TABLE sync.source_state (
  user_pk bigint NOT NULL REFERENCES sync.user_state (user_pk),
  source_id text NOT NULL,
  status text NOT NULL,
  last_source_bundle_id bigint NOT NULL,
  replaced_by_source_id text,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (user_pk, source_id)
);

-- Live rows and tombstones: a later INSERT of a deleted key must carry the tombstone's version.
CREATE TABLE sync.row_state (
  user_pk bigint NOT NULL,
  table_id smallint NOT NULL,
  key_bytes bytea NOT NULL,
  row_version bigint NOT NULL,
  deleted boolean NOT NULL,
  PRIMARY KEY (user_pk, table_id, key_bytes)
);

CREATE TABLE sync.bundle_log (
  user_pk bigint NOT NULL,
  bundle_seq bigint NOT NULL,
  source_id text NOT NULL,
  source_bundle_id bigint NOT NULL,
  row_count integer NOT NULL,
  byte_count bigint NOT NULL,
  bundle_hash text NOT NULL,
  request_hash text,
  committed_at timestamptz NOT NULL,
  PRIMARY KEY (user_pk, bundle_seq),
  CONSTRAINT bundle_log_source_key UNIQUE (user_pk, source_id, source_bundle_id)
);

CREATE TABLE sync.bundle_rows (
  user_pk bigint NOT NULL,
  bundle_seq bigint NOT NULL,
  row_ordinal integer NOT NULL,
  table_id smallint NOT NULL,
  key_bytes bytea NOT NULL,
  op_code smallint NOT NULL,
  payload jsonb,
  PRIMARY KEY (user_pk, bundle_seq, row_ordinal)
);

CREATE TABLE sync.push_sessions (
  push_id uuid PRIMARY KEY,
  user_pk bigint NOT NULL,
  source_id text NOT NULL,
  source_bundle_id bigint NOT NULL,
  planned_row_count integer NOT NULL,
  next_row_ordinal integer NOT NULL,
  status text NOT NULL,
  request_hash text,
  initialization_id uuid,
  byte_count bigint NOT NULL,
  last_chunk_start integer,
  last_chunk_digest text,
  bundle_seq bigint,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX push_sessions_expires_idx ON sync.push_sessions (expires_at);

CREATE TABLE sync.push_session_rows (
  push_id uuid NOT NULL,
  row_ordinal integer NOT NULL,
  table_id smallint NOT NULL,
  key_bytes bytea NOT NULL,
  op_code smallint NOT NULL,
  base_row_version bigint NOT NULL,
  payload jsonb,
  PRIMARY KEY (push_id, row_ordinal)
);
-- A bundle names each key once; the client coalesces its dirty set per key.
CREATE UNIQUE INDEX push_session_rows_key_idx ON sync.push_session_rows (push_id, table_id, key_bytes);

CREATE TABLE sync.snapshot_sessions (
  snapshot_id uuid PRIMARY KEY,
  user_pk bigint NOT NULL,
  source_id text NOT NULL,
  snapshot_bundle_seq bigint NOT NULL,
  row_count integer NOT NULL,
  byte_count bigint NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX snapshot_sessions_expires_idx ON sync.snapshot_sessions (expires_at);

CREATE TABLE sync.snapshot_session_rows (
  snapshot_id uuid NOT NULL,
  row_ordinal integer NOT NULL,
  table_id smallint NOT NULL,
  key_bytes bytea NOT NULL,
  row_version bigint NOT NULL,
  payload jsonb NOT NULL,
  PRIMARY KEY (snapshot_id, row_ordinal)
);

CREATE SEQUENCE sync.capture_seq AS bigint;

-- No primary key: rows live for one transaction and are only ever read by xact.
CREATE UNLOGGED TABLE sync.capture_rows (
  capture_id bigint NOT NULL,
  xact bigint NOT NULL,
  table_id smallint NOT NULL,
  key_bytes bytea NOT NULL,
  deleted boolean NOT NULL,
  payload jsonb
);
CREATE INDEX capture_rows_xact_idx ON sync.capture_rows (xact);

CREATE SEQUENCE sync.counter_rejected_direct_writes AS bigint;
CREATE SEQUENCE sync.counter_history_pruned AS bigint;
CREATE SEQUENCE sync.counter_push_conflicts AS bigint;
CREATE SEQUENCE sync.counter_push_rejected AS bigint;
CREATE SEQUENCE sync.counter_commit_outcome_unknown AS bigint;
CREATE SEQUENCE sync.counter_bundles_committed AS bigint;
CREATE SEQUENCE sync.counter_bundles_pruned AS bigint;
`;

export const migration0001: Migration = {
  version: 1,
  minSafeVersion: 1,
  description: 'the first release: users, sources, row state, bundles, push and snapshot sessions, capture, counters',
  statements: [TABLES],
  functions: [
    errSql,
    rfc3339Sql,
    keyBytesSql,
    keyTextSql,
    opNameSql,
    rowBytesSql,
    ensureUserSql,
    checkSourceSql,
    checkPushScopeSql,
    checkReadScopeSql,
    utf16beSql,
    jcsNumberSql,
    jcsSql,
    guardSql,
    guardTruncateSql,
    captureSql,
    connectSql,
    pushCreateSql,
    pushChunkSql,
    pushDeleteSql,
    pushRequestHashSql,
    bundleAnswerSql,
    finalizeBundleSql,
    pushCommitSql,
    serverBundleBeginSql,
    serverBundleFinishSql,
    committedRowTextSql,
    bundleHeadTextSql,
    pullSql,
    committedRowsSql,
    snapshotRowTextSql,
    rotateSourceSql,
    snapshotCreateSql,
    snapshotPageSql,
    snapshotDeleteSql,
    maintenanceStepSql,
  ],
};
