/**
 * Every HTTP operation of the API as the OpenAPI document (openapi.ts) describes it: method,
 * path, authentication, parameters, the body and answers by their zod wire schemas, and the error
 * codes each may answer. `test/openapi.test.ts` checks this table against the handlers' route
 * table (functions/*.ts): each route documented once, no path that no handler serves.
 * docs/protocol.md says the same in prose.
 */
import * as z from 'zod/mini';
import './zod.js';
import { type ErrorCode } from '../errors.js';
import { ConnectRequest, ConnectResponse } from './connect.js';
import { CapabilitiesResponse, ErrorBody } from './meta.js';
import { ChunkRequest, ChunkResponse, CommitResponse, PushSessionCreateRequest, PushSessionCreateResponse } from './push-session.js';
import { CommittedBundlePage, PullResponse, ROW_FORMS, SnapshotCreateRequest, SnapshotCreated, SnapshotPage, WatchResponse } from './read-path.js';

const int = z.int().check(z.gte(0));

/** `GET /syncx/health`; the answer with 503 has the same shape, `status: "unhealthy"`. */
export const HealthResponse = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('healthy'),
    layout_version: int,
    min_safe_version: int,
    schema_version: int,
    pending_schema_changes: z.array(z.string()),
    checked_at: z.string(),
  }),
  z.object({ status: z.literal('unhealthy'), reason: z.enum(['layout_upgrade_required', 'layout_drift', 'database_unreachable', 'insufficient_privilege']), detail: z.string() }),
]);

/** `GET /syncx/status`: the operator's view; new fields may appear. */
export const StatusResponse = z.looseObject({
  lifecycle: z.looseObject({ ready: z.boolean(), layout_version: int, min_safe_version: int, schema_version: int, pending_schema_changes: z.array(z.string()) }),
  registered_tables: z.array(z.string()),
  features: z.record(z.string(), z.boolean()),
  bundle_visibility: z.record(z.string(), z.number()),
  retained_floor: z.record(z.string(), z.unknown()),
  error_counters: z.record(z.string(), z.number()),
});

/** `GET /syncx/operator/users/{user_id}`: one user's status (protocol §5.8); new fields may appear. */
export const UserStatusResponse = z.looseObject({
  user_id: z.string(),
  latest_bundle_seq: int,
  retained_floor: int,
  pruned_through: int,
  source_count: int,
  sources: z.array(z.looseObject({ source_id: z.string(), status: z.string(), last_bundle_seq: z.nullable(int), bundles_since_last_push: z.nullable(int) })),
  open_push_sessions: int,
  open_snapshot_sessions: int,
  staged_bytes: int,
  last_conflict: z.nullable(z.looseObject({ source_id: z.string(), at: z.string() })),
  last_rejection: z.nullable(z.looseObject({ source_id: z.string(), at: z.string() })),
});

/** The document itself: an object, described no further here. */
export const OpenApiResponse = z.record(z.string(), z.unknown());

export interface QueryParameter {
  readonly name: string;
  readonly description: string;
  /** Lower bound of an integer (queryInt's `min`). */
  readonly minimum?: number;
  /** The values of a string parameter, instead of an integer. */
  readonly values?: readonly string[];
}

export interface Operation {
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly path: string;
  /** The user's bearer token (true), none (false), or IAM-signed operator credentials. */
  readonly auth: boolean | 'operator';
  readonly operationId: string;
  readonly summary: string;
  /** Path parameters: integers (`bundle_seq`), UUIDs (`push_id`, `snapshot_id`) or strings (`user_id`). */
  readonly pathParameters?: Readonly<Record<string, 'integer' | 'uuid' | 'string'>>;
  readonly query?: readonly QueryParameter[];
  /** The JSON body, by name (a component of the document); `optional`: the body may be absent. */
  readonly body?: { readonly name: string; readonly schema: z.ZodMiniType; readonly optional?: boolean };
  /** The success answer: status and named schema, or none (204). */
  readonly ok: { readonly status: 200 | 204; readonly name?: string; readonly schema?: z.ZodMiniType };
  /** Answers that are not error bodies although their status is not 2xx (health's 503). */
  readonly other?: Readonly<Record<number, { readonly description: string; readonly name: string; readonly schema: z.ZodMiniType }>>;
  /** Codes this operation may answer beyond the ones every route may (COMMON_ERRORS). */
  readonly errors: readonly ErrorCode[];
}

/** What any /sync/* route may answer: a bad request, no credential, overload, an outage, a bug. */
export const COMMON_SYNC_ERRORS: readonly ErrorCode[] = ['invalid_request', 'authentication_failed', 'service_unavailable', 'internal_error'];
/** What the unauthenticated /syncx/* routes may answer. */
export const COMMON_META_ERRORS: readonly ErrorCode[] = ['service_unavailable', 'internal_error'];

const afterRowOrdinal: QueryParameter = { name: 'after_row_ordinal', description: 'Rows already read (default 0).', minimum: 0 };
const maxRows: QueryParameter = { name: 'max_rows', description: 'Rows per page (default and maximum: the bundle limits).', minimum: 1 };

export const OPERATIONS: readonly Operation[] = [
  {
    method: 'POST', path: '/sync/connect', auth: true, operationId: 'connect',
    summary: 'Resolve the first connect of this device for its user: push local rows, hydrate, or wait.',
    body: { name: 'ConnectRequest', schema: ConnectRequest },
    ok: { status: 200, name: 'ConnectResponse', schema: ConnectResponse },
    errors: [],
  },
  {
    method: 'POST', path: '/sync/push-sessions', auth: true, operationId: 'createPushSession',
    summary: 'Open a staging session for one bundle (or answer the bundle already committed for this source bundle id).',
    body: { name: 'PushSessionCreateRequest', schema: PushSessionCreateRequest },
    ok: { status: 200, name: 'PushSessionCreateResponse', schema: PushSessionCreateResponse },
    errors: ['payload_too_large', 'push_request_mismatch', 'source_sequence_out_of_order', 'source_sequence_changed', 'source_retired',
      'scope_uninitialized', 'scope_initializing', 'initialization_stale', 'initialization_expired', 'rate_limited'],
  },
  {
    method: 'POST', path: '/sync/push-sessions/{push_id}/chunks', auth: true, operationId: 'uploadChunk',
    summary: 'Upload the next contiguous rows of a staging session.',
    pathParameters: { push_id: 'uuid' },
    body: { name: 'ChunkRequest', schema: ChunkRequest },
    ok: { status: 200, name: 'ChunkResponse', schema: ChunkResponse },
    errors: ['payload_too_large', 'push_session_not_found', 'push_session_expired', 'push_chunk_out_of_order', 'rate_limited'],
  },
  {
    method: 'POST', path: '/sync/push-sessions/{push_id}/commit', auth: true, operationId: 'commitPush',
    summary: 'Commit the fully staged session as one bundle, atomically.',
    pathParameters: { push_id: 'uuid' },
    ok: { status: 200, name: 'CommitResponse', schema: CommitResponse },
    errors: ['push_session_not_found', 'push_session_expired', 'push_incomplete', 'push_conflict', 'push_rejected', 'source_sequence_out_of_order',
      'source_sequence_changed', 'source_retired', 'scope_uninitialized', 'scope_initializing', 'initialization_stale', 'initialization_expired',
      'payload_too_large', 'commit_outcome_unknown'],
  },
  {
    method: 'DELETE', path: '/sync/push-sessions/{push_id}', auth: true, operationId: 'deletePushSession',
    summary: 'Drop an uncommitted session (best effort; an unknown one is no error).',
    pathParameters: { push_id: 'uuid' },
    ok: { status: 204 },
    errors: [],
  },
  {
    method: 'GET', path: '/sync/committed-bundles/{bundle_seq}/rows', auth: true, operationId: 'committedBundleRows',
    summary: 'Read one page of the authoritative rows of a committed bundle (replay after a push, or a pulled bundle with rows_omitted).',
    pathParameters: { bundle_seq: 'integer' },
    query: [afterRowOrdinal, maxRows],
    ok: { status: 200, name: 'CommittedBundlePage', schema: CommittedBundlePage },
    errors: ['committed_bundle_not_found', 'history_pruned'],
  },
  {
    method: 'GET', path: '/sync/pull', auth: true, operationId: 'pull',
    summary: 'Read complete committed bundles after a checkpoint, up to the ceiling frozen by the first page.',
    query: [
      { name: 'after_bundle_seq', description: 'The checkpoint: the last bundle applied (default 0).', minimum: 0 },
      { name: 'max_bundles', description: 'Bundles per page (default and maximum: the bundle limits).', minimum: 1 },
      { name: 'target_bundle_seq', description: 'The stable_bundle_seq of the first page, on later pages.', minimum: 0 },
    ],
    ok: { status: 200, name: 'PullResponse', schema: PullResponse },
    errors: ['history_pruned'],
  },
  {
    method: 'GET', path: '/sync/watch', auth: true, operationId: 'watch',
    summary: 'Long poll: answers as soon as the user has bundles past after_bundle_seq, or when the wait ends.',
    query: [
      { name: 'after_bundle_seq', description: 'The checkpoint (default 0).', minimum: 0 },
      { name: 'wait_seconds', description: 'How long to wait at most (default 20, at most watch_max_wait_seconds).', minimum: 0 },
    ],
    ok: { status: 200, name: 'WatchResponse', schema: WatchResponse },
    errors: [],
  },
  {
    method: 'POST', path: '/sync/snapshot-sessions', auth: true, operationId: 'createSnapshot',
    summary: 'Freeze a snapshot of all the user\'s rows, optionally rotating to a new source.',
    body: { name: 'SnapshotCreateRequest', schema: SnapshotCreateRequest, optional: true },
    ok: { status: 200, name: 'SnapshotCreated', schema: SnapshotCreated },
    errors: ['source_replacement_invalid', 'source_retired', 'rate_limited'],
  },
  {
    method: 'GET', path: '/sync/snapshot-sessions/{snapshot_id}', auth: true, operationId: 'snapshotPage',
    summary: 'Read one page of a frozen snapshot.',
    pathParameters: { snapshot_id: 'uuid' },
    query: [afterRowOrdinal, maxRows, {
      name: 'row_form', values: ROW_FORMS,
      description: 'The row form this client reads: `arrays` reads both forms (default `objects`: a session of arrays is then answered snapshot_session_expired).',
    }],
    ok: { status: 200, name: 'SnapshotPage', schema: SnapshotPage },
    errors: ['snapshot_session_not_found', 'snapshot_session_expired'],
  },
  {
    method: 'DELETE', path: '/sync/snapshot-sessions/{snapshot_id}', auth: true, operationId: 'deleteSnapshot',
    summary: 'Drop a snapshot session (best effort).',
    pathParameters: { snapshot_id: 'uuid' },
    ok: { status: 204 },
    errors: [],
  },
  {
    method: 'GET', path: '/sync/capabilities', auth: true, operationId: 'capabilities',
    summary: 'Protocol and schema version, registered tables with their column specs, features and every bundle limit.',
    ok: { status: 200, name: 'CapabilitiesResponse', schema: CapabilitiesResponse },
    errors: [],
  },
  {
    method: 'GET', path: '/syncx/health', auth: false, operationId: 'health',
    summary: 'Readiness: 200 healthy, or 503 unhealthy with the reason (layout_upgrade_required, layout_drift, database_unreachable, insufficient_privilege).',
    ok: { status: 200, name: 'HealthResponse', schema: HealthResponse },
    other: { 503: { description: 'Unhealthy: status "unhealthy", with the reason and a detail; Retry-After.', name: 'HealthResponse', schema: HealthResponse } },
    errors: [],
  },
  {
    method: 'GET', path: '/syncx/status', auth: false, operationId: 'status',
    summary: 'Lifecycle, registered tables, features, bundle visibility, retained floor and error counters.',
    ok: { status: 200, name: 'StatusResponse', schema: StatusResponse },
    errors: [],
  },
  {
    method: 'GET', path: '/syncx/operator/users/{user_id}', auth: 'operator', operationId: 'userStatus',
    summary: 'One user\'s status for an operator: stream, retained floor, sources with their last bundle and lag, open sessions, last conflict and rejection.',
    pathParameters: { user_id: 'string' },
    ok: { status: 200, name: 'UserStatusResponse', schema: UserStatusResponse },
    errors: ['forbidden', 'user_not_found'],
  },
  {
    method: 'GET', path: '/syncx/openapi.json', auth: false, operationId: 'openapi',
    summary: 'This API as an OpenAPI 3.1 document.',
    ok: { status: 200, name: 'OpenApiDocument', schema: OpenApiResponse },
    errors: [],
  },
];

/** The error body, named for the document. */
export { ErrorBody };
