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
import { type ClientContext, type ClientLimits } from './context.js';
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
      /** The bundles this page asked for (`max_bundles`): fewer came when the server's byte budget cut it short. */
      readonly asked: number;
      /** The last bundle in this page, or undefined for an empty page. */
      readonly last: number | undefined;
      readonly rows: readonly CommittedRow[];
      readonly hasMore: boolean;
    }
  | { readonly kind: 'history_pruned' }
  | { readonly kind: 'source_refused'; readonly error: SyncHttpError };

/**
 * Rows a pull page is sized for, unless the caller fixed its bundles (`pullBundles`). The pages
 * after the one being applied are asked for ahead only where they start is known: after a page
 * that came full (as many bundles as asked). A page cut short by the server's byte budget (a
 * default page of 100 bundles of 100 notes is 3.8 MB) leaves one request out at a time, so the
 * server's part of every page waits for the apply of the one before. Pages of ~2,500 rows come
 * full and overlap: 10k notes in 100 bundles pulled 10–17% faster in pages of 25 bundles than of
 * 100 (1,000 rows a page: slower than either; 5,000: as 100), bench/README.md.
 */
const PULL_PAGE_ROWS = 2_500;

/** Bundles of a pull's first page while the client has not seen how many rows a bundle carries. */
const PULL_FIRST_BUNDLES = 25;

/**
 * Bundles the next pull page asks for: the caller's fixed number, else PULL_PAGE_ROWS' worth at
 * `rowsPerBundle` (the rows per bundle of a page seen last; undefined before any), between 1 and
 * the server's maximum.
 */
export function pullPageBundles(limits: ClientLimits, rowsPerBundle: number | undefined): number {
  if (limits.pullBundlesFixed) return limits.bundlesPerPull;
  if (rowsPerBundle === undefined || !(rowsPerBundle > 0)) return Math.min(PULL_FIRST_BUNDLES, limits.bundlesPerPull);
  return Math.max(1, Math.min(Math.round(PULL_PAGE_ROWS / rowsPerBundle), limits.bundlesPerPullMax));
}

/**
 * Fetches the page of at most `bundles` bundles after `checkpoint` (towards `target`, the ceiling
 * frozen by the first page). `signal` abandons a page asked for ahead that is no longer wanted
 * (see pages-ahead.ts).
 */
export async function pullPage(ctx: ClientContext, checkpoint: number, target: number | undefined, bundles: number,
  signal?: AbortSignal): Promise<PullPage> {
  // The page a push notification brought, when it is the one this pull would ask for (§5.9).
  let page = ctx.notified.take(checkpoint, target);
  try {
    page ??= await ctx.transport.request('GET', '/sync/pull', {
      query: { after_bundle_seq: checkpoint, max_bundles: bundles, target_bundle_seq: target },
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
    const bundleRows = bundle.rows_omitted ? (await fetchBundleRows(ctx, bundle.bundle_seq, signal, bundle.row_count)).rows : bundle.rows;
    if (bundleRows.length !== bundle.row_count) {
      throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundle.bundle_seq} announced ${bundle.row_count} rows but carried ${bundleRows.length}`);
    }
    rows.push(...bundleRows);
  }
  return {
    kind: 'page',
    stable: target ?? page.stable_bundle_seq,
    bundles: page.bundles.length,
    asked: bundles,
    last: page.bundles.at(-1)?.bundle_seq,
    rows,
    hasMore: page.has_more,
  };
}
