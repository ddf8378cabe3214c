/**
 * The Lockstep web client. Open a SQLite database with an adapter (`client-web/sqlite/opfs.js` in
 * a browser worker, `client-web/sqlite/node.js` under Node), create the application's tables, then
 * `openClient({ baseUrl, getToken, db, tables })`.
 */
export { openClient, newSourceId } from './client.js';
export type {
  AttachResult,
  ClientConfig,
  ConflictInput,
  ConflictResolution,
  ConflictResolver,
  DetachResult,
  LocalRow,
  PendingStatus,
  Progress,
  PullResult,
  PushResult,
  RebuildResult,
  SyncClient,
  SyncResult,
  TableConfig,
  WatchResult,
} from './api.js';
export { ClientError, ClientErrorCode } from './errors.js';
export { SyncHttpError, type RetryPolicy } from './transport.js';
export type { SqlRow, SqlValue, SqliteDb, SqliteStatements } from './sqlite/port.js';
