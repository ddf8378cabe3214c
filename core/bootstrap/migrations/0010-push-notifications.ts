/**
 * Layout version 10: push notifications (issue 17 item 5, protocol §5.5).
 * - `sync.ws_connections`: the API Gateway WebSocket connection ids of each user, registered at
 *   `$connect`, removed at `$disconnect` or when API Gateway answers 410 Gone, and expired after
 *   API Gateway's own two-hour connection limit (a `$disconnect` that never came);
 * - a trigger on `sync.bundle_log` signals every commit on channel `lockstep_commit`, which one
 *   LISTEN connection per long-running process fans out to its waiting long polls and sockets.
 *
 * The new table carries the managed-table guard like every other table of the layout (0009).
 *
 * Only adds: the previous build serves this layout unchanged (min_safe_version stays 9).
 */
import { type Migration } from './migration.js';
import { notifyCommitSql, wsConnectSql, wsDisconnectSql, wsTargetsSql } from '../../sync/notify/notify.sql.js';

export const migration0010: Migration = {
  version: 10,
  minSafeVersion: 9,
  description: 'push notifications: WebSocket connections per user, commit signal on channel lockstep_commit',
  statements: [
    `CREATE TABLE sync.ws_connections (
       connection_id text PRIMARY KEY,
       user_pk bigint NOT NULL REFERENCES sync.user_state (user_pk),
       source_id text NOT NULL,
       connected_at timestamptz NOT NULL,
       expires_at timestamptz NOT NULL
     )`,
    // Notify reads a user's connections; $connect prunes that user's expired ones.
    `CREATE INDEX ws_connections_user_idx ON sync.ws_connections (user_pk, expires_at)`,
    // Maintenance deletes expired connections of every user without a scan.
    `CREATE INDEX ws_connections_expires_idx ON sync.ws_connections (expires_at)`,
  ],
  functions: [wsConnectSql, wsDisconnectSql, wsTargetsSql, notifyCommitSql],
  afterFunctions: [
    `CREATE TRIGGER _lockstep_guard_managed BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON sync.ws_connections
       FOR EACH STATEMENT EXECUTE FUNCTION sync.guard_managed()`,
    `CREATE TRIGGER _lockstep_notify_commit AFTER INSERT ON sync.bundle_log FOR EACH ROW EXECUTE FUNCTION sync.notify_commit()`,
  ],
};
