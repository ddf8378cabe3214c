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
import { CommittedRowsAnswer } from './wire.js';

/** Fetches every committed row of one bundle, page by page. */
export async function fetchBundleRows(ctx: ClientContext, bundleSeq: number, signal?: AbortSignal): Promise<{ head: BundleSummary; rows: CommittedRow[] }> {
  const rows: CommittedRow[] = [];
  let after = 0;
  for (;;) {
    const page = await ctx.transport.request('GET', `/sync/committed-bundles/${bundleSeq}/rows`, {
      query: { after_row_ordinal: after, max_rows: ctx.limits.pageRows },
      schema: CommittedRowsAnswer,
      ...(signal ? { signal } : {}),
    });
    rows.push(...page.rows);
    if (!page.has_more) {
      if (rows.length !== page.row_count) {
        throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundleSeq} announced ${page.row_count} rows but served ${rows.length}`);
      }
      const { bundle_seq, source_id, source_bundle_id, row_count, bundle_hash } = page;
      return { head: { bundle_seq, source_id, source_bundle_id, row_count, bundle_hash }, rows };
    }
    if (page.next_row_ordinal <= after) throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundleSeq} page after ${after} made no progress`);
    after = page.next_row_ordinal;
  }
}

/**
 * The rows of this device's own committed bundle for its replay, or `pruned` when they are gone:
 * the bundle fell below the retained floor before the replay (protocol §10.2); a snapshot has them.
 */
export async function fetchOwnBundle(ctx: ClientContext, bundle: Pick<BundleSummary, 'bundle_seq' | 'source_bundle_id'>, sourceBundleId: number): Promise<{ readonly kind: 'rows'; readonly rows: CommittedRow[] } | { readonly kind: 'pruned' }> {
  // The row counts may differ: the server captures its cascades and triggers into the same
  // bundle (a list delete brings the deletes of items this device never saw).
  if (bundle.source_bundle_id !== sourceBundleId) {
    throw new ClientError(ClientErrorCode.protocolViolation, `the server committed source bundle ${bundle.source_bundle_id} for frozen bundle ${sourceBundleId}`);
  }
  try {
    return { kind: 'rows', rows: (await fetchBundleRows(ctx, bundle.bundle_seq)).rows };
  } catch (error) {
    if (isCode(error, 'history_pruned', 'committed_bundle_not_found')) return { kind: 'pruned' };
    throw error;
  }
}
