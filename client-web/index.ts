/**
 * The Lockstep web client. Open a SQLite database with an adapter (`client-web/sqlite/opfs.js` in
 * a browser worker, `client-web/sqlite/node.js` under Node), create the application's tables, then
 * `openClient({ baseUrl, getToken, db, tables })` and `client.start()`.
 */
export { openClient, newSourceId } from './client.js';
export type {
  AttachResult,
  ClientConfig,
  ConflictInput,
  ConflictRecord,
  ConflictResolution,
  MergeProposal,
  ConflictResolver,
  DetachResult,
  LiveQuery,
  LiveQueryResult,
  LocalRow,
  LoopEnvironment,
  PendingStatus,
  Progress,
  PullResult,
  PushResult,
  QuarantinedRow,
  RebuildResult,
  Rejection,
  StartOptions,
  SyncClient,
  SyncPhase,
  SyncResult,
  SyncStatus,
  TableConfig,
  Violation,
  WatchResult,
} from './api.js';
export {
  ClientError,
  ClientErrorCode,
  TransportErrorCode,
  errorCodeOf,
  isRetriableCode,
  type ServerErrorCode,
  type SyncErrorCode,
} from './errors.js';
export { SyncHttpError, type RetryPolicy, type TokenProvider } from './transport.js';
export type { LocalRowRefusal } from './local-writes.js';
export { longPollWakeSource, type WakeSource, type WakeSourceContext, type WakeSourceFactory } from './wake.js';
export type { CommitListener, SqlRow, SqlValue, SqliteDb, SqliteStatements } from './sqlite/port.js';
export { LiveQueries, rowContentKey, type LiveSource } from './live-query.js';
export type { WebSocketFactory, WebSocketHandler, WebSocketLike } from './watch-socket.js';
