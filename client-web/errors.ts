/**
 * Every failure the client raises itself, with a stable code (style.md #2). Failures the server
 * answers arrive as `SyncHttpError` (client-web/transport.ts) carrying the server's code. Outcomes
 * the application must handle (a blocked detach, `retry_later`, a rejected bundle) are results.
 */
export const ClientErrorCode = {
  /** A local table does not match the server's registered table spec (or is missing). */
  localSchemaMismatch: 'local_schema_mismatch',
  /** The call needs an attached user. */
  notAttached: 'not_attached',
  /** The database is attached to another user; detach first. */
  attachedToOtherUser: 'attached_to_other_user',
  /** A frozen outbound bundle exists: pull and rebuild fail closed until it is pushed or discarded. */
  outboxPending: 'outbox_pending',
  /** A local row cannot be encoded for the wire (wrong type for its column, bad UUID key). */
  invalidLocalRow: 'invalid_local_row',
  /** The server answered something the protocol does not allow (e.g. a bundle hash mismatch). */
  protocolViolation: 'protocol_violation',
  /** The push could not converge within its bounded number of rounds. */
  pushNotConverging: 'push_not_converging',
  /**
   * The server refused this device's source identity (`source_retired`, `source_sequence_*`,
   * `push_request_mismatch`). Recovery is explicit (docs/protocol.md §10.6): call `rebuild()`, which
   * rotates to a new source and keeps every local change.
   */
  sourceRecoveryRequired: 'source_recovery_required',
  /** `watch()` was called with watch mode `off`. */
  watchDisabled: 'watch_disabled',
  /** The client was closed. */
  closed: 'client_closed',
} as const;
export type ClientErrorCode = (typeof ClientErrorCode)[keyof typeof ClientErrorCode];

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
