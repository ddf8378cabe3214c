/** Classifying server answers by their stable error code. */
import { SyncHttpError } from './transport.js';

/** The server error codes that mean this device's source identity must be recovered (rule 5). */
export const SOURCE_REFUSALS = ['source_retired', 'source_sequence_out_of_order', 'source_sequence_changed', 'push_request_mismatch'] as const;
export type SourceRefusal = (typeof SOURCE_REFUSALS)[number];

/** Whether `error` is a server answer with one of `codes`. */
export function isCode(error: unknown, ...codes: readonly string[]): error is SyncHttpError {
  return error instanceof SyncHttpError && codes.includes(error.code);
}

/** The source-replacement reason a refusal maps to (`push_request_mismatch` is a changed sequence). */
export function replacementReason(code: SourceRefusal): 'source_retired' | 'source_sequence_out_of_order' | 'source_sequence_changed' {
  return code === 'push_request_mismatch' ? 'source_sequence_changed' : code;
}
