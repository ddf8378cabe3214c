/**
 * The pull step (protocol §5.4, §10.3–§10.4): one page of complete committed bundles after the
 * checkpoint, up to the stable ceiling the first page froze. Bundles too large for one response
 * (`rows_omitted`) are completed from the committed-rows endpoint first, so a page is always whole
 * bundles. The coordinator asks for the next pages as soon as a page arrives (pages-ahead.ts),
 * then applies the page (rows and checkpoint in one transaction); `history_pruned` and a source
 * refusal are outcomes it answers.
 */
import { type CommittedRow } from '../core/protocol/rows.js';
import { fetchBundleRows } from './committed-rows.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { isCode, SOURCE_REFUSALS } from './http-errors.js';
import { type SyncHttpError } from './transport.js';
import { PullAnswer } from './wire.js';

export type PullPage =
  | {
      readonly kind: 'page';
      /** The frozen ceiling of this pull (from the first page on). */
      readonly stable: number;
      /** Bundles in this page, in order. */
      readonly bundles: number;
      /** The last bundle in this page, or undefined for an empty page. */
      readonly last: number | undefined;
      readonly rows: readonly CommittedRow[];
      readonly hasMore: boolean;
    }
  | { readonly kind: 'history_pruned' }
  | { readonly kind: 'source_refused'; readonly error: SyncHttpError };

/**
 * Fetches the page after `checkpoint` (towards `target`, the ceiling frozen by the first page).
 * `signal` abandons a page asked for ahead that is no longer wanted (see pages-ahead.ts).
 */
export async function pullPage(ctx: ClientContext, checkpoint: number, target: number | undefined, signal?: AbortSignal): Promise<PullPage> {
  // The page a push notification brought, when it is the one this pull would ask for (§5.9).
  let page = ctx.notified.take(checkpoint, target);
  try {
    page ??= await ctx.transport.request('GET', '/sync/pull', {
      query: { after_bundle_seq: checkpoint, max_bundles: ctx.limits.bundlesPerPull, target_bundle_seq: target },
      schema: PullAnswer,
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    if (isCode(error, 'history_pruned')) return { kind: 'history_pruned' };
    if (isCode(error, ...SOURCE_REFUSALS)) return { kind: 'source_refused', error };
    throw error;
  }
  const rows: CommittedRow[] = [];
  let expected = checkpoint + 1;
  for (const bundle of page.bundles) {
    if (bundle.bundle_seq !== expected) {
      throw new ClientError(ClientErrorCode.protocolViolation, `pull after ${checkpoint} answered bundle ${bundle.bundle_seq} where ${expected} was due`);
    }
    expected++;
    const bundleRows = bundle.rows_omitted ? (await fetchBundleRows(ctx, bundle.bundle_seq, signal)).rows : bundle.rows;
    if (bundleRows.length !== bundle.row_count) {
      throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundle.bundle_seq} announced ${bundle.row_count} rows but carried ${bundleRows.length}`);
    }
    rows.push(...bundleRows);
  }
  return {
    kind: 'page',
    stable: target ?? page.stable_bundle_seq,
    bundles: page.bundles.length,
    last: page.bundles.at(-1)?.bundle_seq,
    rows,
    hasMore: page.has_more,
  };
}
