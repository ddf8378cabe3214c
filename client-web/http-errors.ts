/** Classifying server answers by their stable error code. */
import { type ServerErrorCode, type TransportErrorCode } from './errors.js';
import { SyncHttpError } from './transport.js';

/** The server error codes that mean this device's source identity must be recovered (rule 5). */
export const SOURCE_REFUSALS = ['source_retired', 'source_sequence_out_of_order', 'source_sequence_changed', 'push_request_mismatch'] as const satisfies readonly ServerErrorCode[];
export type SourceRefusal = (typeof SOURCE_REFUSALS)[number];

/** The server error codes that mean the scope's initialization must be negotiated again (connect). */
export const SCOPE_REFUSALS = ['scope_uninitialized', 'initialization_expired', 'initialization_stale'] as const satisfies readonly ServerErrorCode[];

/** Whether `error` is a server (or transport) answer with one of `codes`. */
export function isCode(error: unknown, ...codes: readonly (ServerErrorCode | TransportErrorCode)[]): error is SyncHttpError {
  return error instanceof SyncHttpError && codes.includes(error.code);
}

/** The source-replacement reason a refusal maps to (`push_request_mismatch` is a changed sequence). */
export function replacementReason(code: SourceRefusal): 'source_retired' | 'source_sequence_out_of_order' | 'source_sequence_changed' {
  return code === 'push_request_mismatch' ? 'source_sequence_changed' : code;
}
