/**
 * The one registry of error codes (docs/protocol.md §7). Every code a client can see is here with its
 * HTTP status and remedy; `SyncError` carries a code from the core to the edge, and the edge is
 * the only place that turns it into an HTTP answer.
 *
 * Three failure channels, never mixed: `assert` (a bug, 500), `SyncError` (a condition a client
 * or operator can cause), and result objects for outcomes (a conflict is a result of commit).
 */
export const errorRegistry = {
  invalid_request: { status: 400, remedy: 'Fix the request; `details` says what is wrong.' },
  authentication_failed: { status: 401, remedy: 'Send a valid bearer token.' },
  forbidden: { status: 403, remedy: 'This route is for operators: sign the request with IAM credentials allowed to call it (locally: the operator token).' },
  user_not_found: { status: 404, remedy: 'The server has never seen this user connect; check the user id.' },
  route_not_found: { status: 404, remedy: 'Check the method and path against the API reference.' },
  request_headers_too_large: { status: 431, remedy: 'Send smaller headers (a shorter bearer token, fewer cookies).' },
  payload_too_large: { status: 413, remedy: 'Send smaller chunks or split the bundle.' },
  push_session_not_found: { status: 404, remedy: 'Create a new push session.' },
  snapshot_session_not_found: { status: 404, remedy: 'Create a new snapshot session.' },
  committed_bundle_not_found: { status: 404, remedy: 'The bundle does not exist for this user.' },
  push_session_expired: { status: 410, remedy: 'Create a new push session and upload again.' },
  snapshot_session_expired: { status: 410, remedy: 'Create a new snapshot session.' },
  initialization_expired: { status: 410, remedy: 'Connect again to obtain a new initialization lease.' },
  push_chunk_out_of_order: { status: 409, remedy: 'Resume at next_expected_row_ordinal.' },
  push_incomplete: { status: 409, remedy: 'Upload the remaining rows before committing.' },
  push_request_mismatch: { status: 409, remedy: 'The source bundle id was committed with other rows; rebuild and rotate the source.' },
  push_conflict: { status: 409, remedy: 'Resolve the conflicts against the server rows and push again.' },
  push_rejected: { status: 422, remedy: 'The bundle breaks a business constraint; fix or drop the offending rows.' },
  history_pruned: { status: 409, remedy: 'Rebuild from a snapshot session.' },
  source_sequence_out_of_order: { status: 409, remedy: 'Rebuild and rotate the source.' },
  source_sequence_changed: { status: 409, remedy: 'Rebuild and rotate the source.' },
  source_replacement_invalid: { status: 409, remedy: 'Check previous_source_id and new_source_id.' },
  source_retired: { status: 409, remedy: 'Switch to replaced_by_source_id.' },
  scope_uninitialized: { status: 409, remedy: 'Call POST /sync/connect first.' },
  scope_initializing: { status: 409, remedy: 'Another device is initializing this scope; retry later.' },
  initialization_stale: { status: 409, remedy: 'Connect again; the initialization was superseded.' },
  rate_limited: { status: 429, remedy: 'Retry after the Retry-After interval.' },
  commit_outcome_unknown: { status: 503, remedy: 'Retry from push-session create with the same source bundle id and request hash.' },
  service_unavailable: { status: 503, remedy: 'Retry later.' },
  internal_error: { status: 500, remedy: 'A bug; report it.' },
} as const satisfies Record<string, { status: number; remedy: string }>;

export type ErrorCode = keyof typeof errorRegistry;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorRegistry, value);
}

/** A typed, client-visible failure. `extra` fields are merged into the JSON error body. */
export class SyncError extends Error {
  readonly code: ErrorCode;
  readonly extra: Readonly<Record<string, unknown>>;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, extra: Record<string, unknown> = {}, retryAfterSeconds?: number) {
    super(message);
    this.name = 'SyncError';
    this.code = code;
    this.extra = extra;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  get status(): number {
    return errorRegistry[this.code].status;
  }

  toBody(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.extra };
  }
}

/** A bug: something the code promised itself. Reported as 500 internal_error and logged. */
export class AssertionFailed extends Error {
  override readonly name = 'AssertionFailed';
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionFailed(message);
}

/**
 * A server write (the server write API, not HTTP) that would change a registered row's sync key or
 * `_sync_scope_id`, which never change (docs/protocol.md §11, rule 9): delete the row and insert
 * the new one instead. Nothing was committed.
 */
export class KeyChangeRefusedError extends Error {
  readonly code = 'sync_key_immutable';
  constructor(message: string, readonly table: string | null, readonly column: string | null) {
    super(message);
    this.name = 'KeyChangeRefusedError';
  }
}

/** Bootstrap-time failures (not HTTP): the schema is outside the supported envelope. */
export class UnsupportedSchemaError extends Error {
  readonly code = 'unsupported_schema';
  constructor(readonly violations: readonly SchemaViolation[]) {
    super(
      `unsupported schema: ${violations.length} violation(s)\n` +
        violations.map((v) => `  - [rule ${v.rule}] ${v.table}${v.object ? ` (${v.object})` : ''}: ${v.message}`).join('\n'),
    );
    this.name = 'UnsupportedSchemaError';
  }
}

export interface SchemaViolation {
  /** Rule number of the registered-table requirements (docs/protocol.md §11), or a named envelope rule. */
  readonly rule: string;
  readonly table: string;
  readonly object?: string;
  readonly message: string;
}

/** Bootstrap-time failure: the managed `sync` layout drifted from what this version creates. */
export class ManagedLayoutMismatchError extends Error {
  readonly code = 'managed_layout_mismatch';
  constructor(readonly differences: readonly string[]) {
    super(`managed sync layout mismatch:\n${differences.map((d) => `  - ${d}`).join('\n')}`);
    this.name = 'ManagedLayoutMismatchError';
  }
}

/**
 * Bootstrap-time failure: the database has the Citus extension, and the layout is not ready to be
 * distributed (docs/scale-out.md); nothing was distributed.
 */
export class CitusLayoutNotReadyError extends Error {
  readonly code = 'citus_layout_not_ready';
  constructor(readonly blockers: readonly { readonly id: string; readonly message: string }[]) {
    super(`the citus extension is installed, but the sync layout is not ready to be distributed (docs/scale-out.md); nothing was distributed:\n${blockers.map((b) => `  - ${b.message}`).join('\n')}`);
    this.name = 'CitusLayoutNotReadyError';
  }
}

/** One change between a registered table's catalog entry and its declaration now. */
export interface SchemaChange {
  /** Stable id, e.g. `drop-column:app.items.note`; `--accept <id>` accepts a contract step. */
  readonly id: string;
  readonly message: string;
  /** Additive: applied by bootstrap without asking. */
  readonly safe: boolean;
  /** Unsafe but a deliberate contract step may accept it by id. */
  readonly acceptable: boolean;
  /** How to make the change safely (expand/contract), for unsafe ones. */
  readonly recipe?: string;
}

/** Bootstrap-time failure: schema changes that would break clients or lose data, none applied. */
export class UnsafeSchemaChangeError extends Error {
  readonly code = 'unsafe_schema_change';
  constructor(readonly changes: readonly SchemaChange[]) {
    super(
      `unsafe schema change: ${changes.length} change(s) refused, nothing applied\n` +
        changes
          .map((c) => `  - ${c.message} [${c.id}]${c.acceptable ? ' (a deliberate contract step may accept it: --accept ' + c.id + ')' : ''}` +
            (c.recipe ? `\n      how: ${c.recipe}` : ''))
          .join('\n'),
    );
    this.name = 'UnsafeSchemaChangeError';
  }
}

/**
 * Bootstrap-time failure: this build cannot work on the database's layout (it is newer than this
 * build and rules it out, or the registered tables changed beyond what SYNC_MAX_SCHEMA_VERSION
 * allows).
 */
export class LayoutIncompatibleError extends Error {
  readonly code = 'layout_incompatible';
  constructor(message: string) {
    super(message);
    this.name = 'LayoutIncompatibleError';
  }
}

/** Bootstrap-time failure: the PostgreSQL server version is outside 16.x/17.x. */
export class UnsupportedServerVersionError extends Error {
  readonly code = 'unsupported_server_version';
  constructor(readonly serverVersionNum: number) {
    super(`unsupported PostgreSQL server version ${serverVersionNum}: Lockstep supports 16.x and 17.x`);
    this.name = 'UnsupportedServerVersionError';
  }
}
