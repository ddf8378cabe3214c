/**
 * The client's one error vocabulary (style.md #2). Three kinds of code, each a closed union:
 *
 * - `ServerErrorCode`: what the server answers, imported from the server's own registry
 *   (core/errors.ts), so a code the server does not have cannot be written here.
 * - `TransportErrorCode`: failures on the way to the server (no answer, an answer that is not
 *   the protocol, a caller's abort).
 * - `ClientErrorCode`: failures the client raises itself.
 *
 * `SyncErrorCode` is their union; `errorCodeOf(error)` reads it from anything thrown. Server and
 * transport failures arrive as `SyncHttpError` (client-web/transport.ts), the client's own as
 * `ClientError`. Outcomes the application must handle (a blocked detach, `retry_later`, a
 * rejected bundle) are results, not errors.
 */
import { errorRegistry, type ErrorCode } from '../core/errors.js';

/** Every error code the server can answer (core/errors.ts is the registry). */
export type ServerErrorCode = ErrorCode;

/** Whether `value` is one of the server's codes. */
export function isServerErrorCode(value: unknown): value is ServerErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorRegistry, value);
}

/** Failures between the client and the server. */
export const TransportErrorCode = {
  /** The request did not get an answer (offline, DNS, connection refused or reset). */
  networkError: 'network_error',
  /** The answer was not what the protocol allows (malformed JSON, an unknown error code, a schema mismatch). */
  invalidResponse: 'invalid_response',
  /** The caller aborted the request (an AbortSignal). */
  aborted: 'aborted',
} as const;
export type TransportErrorCode = (typeof TransportErrorCode)[keyof typeof TransportErrorCode];

export const ClientErrorCode = {
  /** A local table does not match the server's registered table spec (or is missing). */
  localSchemaMismatch: 'local_schema_mismatch',
  /**
   * The app declares a table or column the server does not publish yet (a new app version before
   * the deploy that adds it has bootstrapped): nothing syncs until it does; retried, never fatal.
   * `details.problems` names what is missing.
   */
  serverSchemaBehind: 'server_schema_behind',
  /** The call needs an attached user. */
  notAttached: 'not_attached',
  /** The database is attached to another user; detach first. */
  attachedToOtherUser: 'attached_to_other_user',
  /** A frozen outbound bundle exists: pull and rebuild fail closed until it is pushed or discarded. */
  outboxPending: 'outbox_pending',
  /** A local row cannot be encoded for the wire (wrong type for its column, a non-canonical UUID key). */
  invalidLocalRow: 'invalid_local_row',
  /** The server answered something the protocol does not allow (e.g. a bundle hash mismatch). */
  protocolViolation: 'protocol_violation',
  /** A sync could not converge within its bounded number of rounds (pushes, rebuilds). */
  pushNotConverging: 'push_not_converging',
  /**
   * The server refused this device's source identity (`source_retired`, `source_sequence_*`,
   * `push_request_mismatch`). Recovery is explicit (protocol §10.6): call `rebuild()`, which
   * rotates to a new source and keeps every local change.
   */
  sourceRecoveryRequired: 'source_recovery_required',
  /** `watch()` was called with watch mode `off`. */
  watchDisabled: 'watch_disabled',
  /** A quarantined row with that id does not exist. */
  quarantineNotFound: 'quarantine_not_found',
  /**
   * A quarantined row cannot be re-queued as it is: a row it refers to (foreign key) is gone, deleted
   * on another device meanwhile. `details.missing` names each; re-queue it with a fix that points
   * elsewhere, or drop it.
   */
  quarantineParentMissing: 'quarantine_parent_missing',
  /** The client was closed. */
  closed: 'client_closed',
} as const;
export type ClientErrorCode = (typeof ClientErrorCode)[keyof typeof ClientErrorCode];

/** Every code a failure of the client can carry. */
export type SyncErrorCode = ServerErrorCode | TransportErrorCode | ClientErrorCode;

/** A failure raised by the client, with a stable `code` and optional structured details. */
export class ClientError extends Error {
  override readonly name = 'ClientError';
  constructor(
    readonly code: ClientErrorCode,
    message: string,
    readonly details?: unknown,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Codes of failures that waiting and trying again can cure (a sync loop backs off and retries
 * them); every other failure needs something to change first (the app, the data, the user).
 */
const RETRIABLE: ReadonlySet<SyncErrorCode> = new Set<SyncErrorCode>([
  'network_error',
  'invalid_response',
  'service_unavailable',
  'rate_limited',
  'commit_outcome_unknown',
  'internal_error',
  'push_session_expired',
  'push_session_not_found',
  'snapshot_session_expired',
  'snapshot_session_not_found',
  'scope_initializing',
  'push_not_converging',
  'server_schema_behind',
]);

/** Whether a failure with this code may go away by itself. */
export function isRetriableCode(code: SyncErrorCode): boolean {
  return RETRIABLE.has(code);
}

const ALL_CLIENT_CODES: ReadonlySet<string> = new Set(Object.values(ClientErrorCode));
const ALL_TRANSPORT_CODES: ReadonlySet<string> = new Set(Object.values(TransportErrorCode));

/** Whether `value` is a code of the client's vocabulary. */
export function isSyncErrorCode(value: unknown): value is SyncErrorCode {
  return typeof value === 'string' && (isServerErrorCode(value) || ALL_CLIENT_CODES.has(value) || ALL_TRANSPORT_CODES.has(value));
}

/** The code of a client, server or transport failure; null for anything else (a bug, a SQLite error). */
export function errorCodeOf(error: unknown): SyncErrorCode | null {
  const code = (error as { code?: unknown } | null)?.code;
  return isSyncErrorCode(code) ? code : null;
}
