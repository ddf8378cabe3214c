/** GET /sync/committed-bundles/{bundle_seq}/rows: a committed bundle's rows, page by page. */
import { sql } from '../../db/index.js';
import { readPage, pageSize, pageBudgetBytes, type Actor, type RawJson, type SyncContext } from '../context.js';
import { formArgument } from '../wire-form.js';

/** One page of a committed bundle's authoritative rows, for replay after a push. */
export async function committedBundleRows(ctx: SyncContext, actor: Actor, bundleSeq: number, afterRowOrdinal: number, maxRows: number | undefined): Promise<RawJson> {
  const limit = pageSize(maxRows, ctx.limits.defaultRowsPerPage, ctx.limits.maxRowsPerPage);
  return readPage(ctx, 'committed_rows', sql`${actor.userId}, ${bundleSeq}, ${afterRowOrdinal}, ${limit}, ${pageBudgetBytes(ctx.limits)}${formArgument(ctx, actor)}`);
}
