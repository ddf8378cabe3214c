/** The wire protocol: zod schemas and types shared by the server edge and the clients. */
export { Op, SyncKey, Payload, PushedRow, CommittedRow, SnapshotRow } from './rows.js';
export { ConnectRequest, ConnectResponse, Resolution } from './connect.js';
export {
  PushSessionCreateRequest,
  PushSessionCreateResponse,
  PushSessionStaging,
  PushSessionAlreadyCommitted,
  BundleSummary,
  ChunkRequest,
  parseChunkRequest,
  ChunkResponse,
  CommitResponse,
} from './push-session.js';
export {
  PulledBundle,
  PullResponse,
  CommittedBundlePage,
  SourceReplacementReason,
  SnapshotCreateRequest,
  SnapshotSession,
  SnapshotCreated,
  SnapshotPage,
  SnapshotRowArray,
  SnapshotTable,
  RowForm,
  ROW_FORMS,
  WatchResponse,
} from './read-path.js';
export { ColumnSpec, TableSpec, CapabilitiesResponse, Conflict, ErrorBody } from './meta.js';
export { MIN_PROTOCOL_VERSION, PROTOCOL_HEADER, PROTOCOL_VERSION, SOURCE_ID_HEADER, SOURCE_ID_PATTERN, type ProtocolVersion } from './version.js';
export { wireCategory, type WireCategory } from './wire-types.js';
export { jsonStringBytes, serializedBytes, serializedBytesWithBody, serializedOver, utf8Bytes } from './wire-bytes.js';
export { ChangedMessage, PingMessage, WS_PATH, WS_PROTOCOL_PARAM, WS_SOURCE_PARAM, WS_TOKEN_PARAM } from './notify.js';
export { USER_ID_MAX_CHARS, isStorableUserId, userIdProblem } from './user-id.js';
