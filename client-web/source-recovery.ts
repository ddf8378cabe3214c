/**
 * Source refusals (docs/protocol.md §10.5): the server no longer accepts this device's source id.
 * The refusal is recorded durably (so `rebuild()` knows to rotate, even after a restart) and
 * raised as `source_recovery_required`; recovery stays the application's explicit call (rule 6).
 */
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { isCode, replacementReason, SOURCE_REFUSALS, type SourceRefusal } from './http-errors.js';
import { type SyncHttpError } from './transport.js';

export async function sourceRefused(ctx: ClientContext, error: SyncHttpError): Promise<never> {
  const reason = replacementReason(error.code as SourceRefusal);
  await ctx.db.run('UPDATE _sync_source_state SET rotation_reason = coalesce(rotation_reason, ?) WHERE id = 1', [reason]);
  throw new ClientError(
    ClientErrorCode.sourceRecoveryRequired,
    `the server refused this device's source (${error.code}): call rebuild() to rotate to a new source; local changes are kept`,
    { serverCode: error.code, body: error.body },
    { cause: error },
  );
}

/** Runs `fn`, turning a source refusal into `source_recovery_required`. */
export async function guardSource<T>(ctx: ClientContext, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (isCode(error, ...SOURCE_REFUSALS)) return sourceRefused(ctx, error);
    throw error;
  }
}
