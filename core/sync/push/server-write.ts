/**
 * Server-originated writes: the application's own backend writes business rows for a user, and
 * they reach every client as one committed bundle of the given source. Inside `fn` the bundle
 * context is open, so the capture triggers record every change (cascades included) and the
 * guards let the writes through; rows must carry `_sync_scope_id = userId`.
 */
import { sql, type Db, type Queryable } from '../../db/index.js';
import { type BundleSummary } from '../../protocol/index.js';
import { type CommitNotifier } from '../notify/connections.js';
import { KeyChangeRefusedError, SyncError } from '../../errors.js';
import { defaultLimits } from '../../limits.js';
import { rowWireBytesMax, KEY_CHANGE_SQLSTATE, ROW_TOO_LARGE_SQLSTATE } from '../context.js';
import { summaryInProtocol } from '../wire-form.js';

export interface ServerWriteOptions {
  readonly userId: string;
  /** The server's own source id, e.g. "server:billing". It gets its own bundle sequence. */
  readonly sourceId: string;
  readonly retainedBundlesPerUser: number;
  /**
   * Tells the user's WebSocket connections once the bundle committed (AWS: the management API
   * notifier). A long-running server's commit feed hears server writes without it.
   */
  readonly notifier?: CommitNotifier | undefined;
  /** The largest committed row in escaped wire bytes (rowWireBytesMax of the limits); default: that of the default limits. */
  readonly rowWireBytesMax?: number;
}

export interface ServerWriteResult<T> {
  readonly result: T;
  /** The committed bundle, or null when `fn` changed no registered row. */
  readonly bundle: BundleSummary | null;
}

/**
 * Runs `fn` inside a server bundle of `options.userId` and commits what it changed as one bundle.
 * An UPDATE that changes a sync key or `_sync_scope_id` throws KeyChangeRefusedError (nothing is
 * committed); a row no response could carry throws `payload_too_large`.
 */
export async function serverWrite<T>(db: Db, options: ServerWriteOptions, fn: (tx: Queryable, scopeId: string) => Promise<T>): Promise<ServerWriteResult<T>> {
  const written = await db.runTx(async (tx) => {
    await tx.query(sql`SELECT sync.server_bundle_begin(${options.userId}, ${options.sourceId})`);
    const result = await fn(tx, options.userId);
    try {
      const [row] = await tx.query<{ answer: BundleSummary | null }>(sql`
        SELECT sync.server_bundle_finish(${options.userId}, ${options.retainedBundlesPerUser}, ${options.rowWireBytesMax ?? rowWireBytesMax(defaultLimits)}) AS answer`);
      // The application's backend sees the summary protocol 1 clients see (bundle_hash over that form).
      return { result, bundle: row?.answer ? summaryInProtocol(row.answer, 1) : null };
    } catch (error) {
      // A row no response could carry would leave every device of the user unable to pull past it.
      if ((error as { code?: unknown }).code === ROW_TOO_LARGE_SQLSTATE) throw new SyncError('payload_too_large', (error as Error).message);
      throw error;
    }
  }).catch((error: unknown) => {
    const e = error as { code?: unknown; message?: unknown; table?: unknown; schema?: unknown; column?: unknown };
    if (e.code === KEY_CHANGE_SQLSTATE) {
      const table = typeof e.schema === 'string' && typeof e.table === 'string' ? `${e.schema}.${e.table}` : null;
      throw new KeyChangeRefusedError(String(e.message), table, typeof e.column === 'string' ? e.column : null);
    }
    throw error;
  });
  // After the commit, never inside it: a device told too early would pull before the bundle exists.
  if (written.bundle && options.notifier) await options.notifier.committed(db, options.userId).catch(() => undefined);
  return written;
}
