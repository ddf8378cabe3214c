/**
 * Reading one committed bundle's rows page by page (`GET /sync/committed-bundles/{seq}/rows`):
 * the replay of this device's own bundle after a commit, and a pulled bundle too large for one
 * pull response (`rows_omitted`).
 */
import { type BundleSummary } from '../core/protocol/push-session.js';
import { type CommittedRow } from '../core/protocol/rows.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { isCode } from './http-errors.js';
import { abortedError } from './transport.js';
import { CommittedRowsAnswer } from './wire.js';
import { PagesAhead, pagesAfter } from './pages-ahead.js';

/**
 * Fetches every committed row of one bundle, page by page. Up to `pagesAhead` pages are asked for
 * at once (pages-ahead.ts): from the first request when the bundle's row count is known
 * (`rowCount`: a replay after its commit, a pulled bundle that came without its rows), after the
 * first page otherwise; a page cut short by the server's byte budget makes the guesses ahead of
 * it wrong, and they are abandoned. An abort of `signal` abandons every page asked for.
 */
export async function fetchBundleRows(ctx: ClientContext, bundleSeq: number, signal?: AbortSignal, rowCount?: number): Promise<{ head: BundleSummary; rows: CommittedRow[] }> {
  const pageRows = ctx.limits.pageRows;
  const pages = new PagesAhead((after, pageSignal) =>
    ctx.transport.request('GET', `/sync/committed-bundles/${bundleSeq}/rows`, {
      query: { after_row_ordinal: after, max_rows: pageRows },
      schema: CommittedRowsAnswer,
      signal: pageSignal,
    }));
  const abandon = () => pages.abandon();
  signal?.addEventListener('abort', abandon, { once: true });
  const rows: CommittedRow[] = [];
  let after = 0;
  try {
    if (signal?.aborted) throw abortedError();
    if (rowCount !== undefined) pages.keep(pagesAfter(0, true, pageRows, ctx.limits.pagesAhead, rowCount));
    for (;;) {
      const fetched = await pages.take(after);
      if ('error' in fetched) throw fetched.error;
      const { page } = fetched;
      rows.push(...page.rows);
      if (!page.has_more) {
        if (rows.length !== page.row_count) {
          throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundleSeq} announced ${page.row_count} rows but served ${rows.length}`);
        }
        const { bundle_seq, source_id, source_bundle_id, row_count, bundle_hash } = page;
        return { head: { bundle_seq, source_id, source_bundle_id, row_count, bundle_hash }, rows };
      }
      if (page.next_row_ordinal <= after) throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundleSeq} page after ${after} made no progress`);
      const full = page.next_row_ordinal - after === pageRows;
      after = page.next_row_ordinal;
      pages.keep(pagesAfter(after, full, pageRows, ctx.limits.pagesAhead, page.row_count));
    }
  } finally {
    signal?.removeEventListener('abort', abandon);
    pages.abandon();
  }
}

/**
 * The rows of this device's own committed bundle for its replay, or `pruned` when they are gone:
 * the bundle fell below the retained floor before the replay (protocol §10.2); a snapshot has them.
 */
export async function fetchOwnBundle(ctx: ClientContext, bundle: Pick<BundleSummary, 'bundle_seq' | 'source_bundle_id' | 'row_count'>, sourceBundleId: number): Promise<{ readonly kind: 'rows'; readonly rows: CommittedRow[] } | { readonly kind: 'pruned' }> {
  // The row counts may differ: the server captures its cascades and triggers into the same
  // bundle (a list delete brings the deletes of items this device never saw).
  if (bundle.source_bundle_id !== sourceBundleId) {
    throw new ClientError(ClientErrorCode.protocolViolation, `the server committed source bundle ${bundle.source_bundle_id} for frozen bundle ${sourceBundleId}`);
  }
  try {
    return { kind: 'rows', rows: (await fetchBundleRows(ctx, bundle.bundle_seq, undefined, bundle.row_count)).rows };
  } catch (error) {
    if (isCode(error, 'history_pruned', 'committed_bundle_not_found')) return { kind: 'pruned' };
    throw error;
  }
}
