/**
 * Client-side read paths over HTTP into wa-sqlite: pull to a frozen ceiling, bundle by bundle,
 * and snapshot hydration page by page. Both apply with the bench's minimal applier.
 */
import { type HttpClient } from './http-client.js';
import { type MinimalApplier, type WireBundle } from './minimal-applier.js';
import { nowMs } from './stats.js';

interface PullPage {
  readonly stable_bundle_seq: number;
  readonly bundles: WireBundle[];
  readonly has_more: boolean;
}

export interface PullOutcome {
  readonly bundles: number;
  readonly rows: number;
  readonly pages: number;
  readonly checkpoint: number;
  /** Milliseconds waiting for HTTP answers (and parsing them) vs applying into SQLite. */
  readonly httpMs: number;
  readonly applyMs: number;
}

/** Pulls everything after `after` to the ceiling frozen by the first page, applying each bundle. */
export async function pullAll(client: HttpClient, applier: MinimalApplier, after: number, maxBundles = 100): Promise<PullOutcome> {
  let checkpoint = after;
  let target: number | undefined;
  let bundles = 0;
  let rows = 0;
  let pages = 0;
  let httpMs = 0;
  let applyMs = 0;
  for (;;) {
    const t0 = nowMs();
    const page = (await client.get<PullPage>(`/sync/pull?after_bundle_seq=${checkpoint}&max_bundles=${maxBundles}${target !== undefined ? `&target_bundle_seq=${target}` : ''}`)).body;
    const t1 = nowMs();
    httpMs += t1 - t0;
    pages++;
    target ??= page.stable_bundle_seq;
    for (const bundle of page.bundles) {
      let bundleRows = bundle.rows;
      if (bundle.rows_omitted) {
        const h0 = nowMs();
        bundleRows = [];
        let next = 0;
        for (;;) {
          const part = (await client.get<{ rows: WireBundle['rows']; next_row_ordinal: number; has_more: boolean }>(`/sync/committed-bundles/${bundle.bundle_seq}/rows?after_row_ordinal=${next}`)).body;
          bundleRows = bundleRows.concat(part.rows);
          next = part.next_row_ordinal;
          if (!part.has_more) break;
        }
        httpMs += nowMs() - h0;
      }
      const a0 = nowMs();
      await applier.applyBundle(bundle, bundleRows);
      applyMs += nowMs() - a0;
      checkpoint = bundle.bundle_seq;
      bundles++;
      rows += bundleRows.length;
    }
    if (!page.has_more) break;
    if (page.bundles.length === 0) throw new Error('pull page with has_more and no bundles');
  }
  return { bundles, rows, pages, checkpoint, httpMs, applyMs };
}

interface SnapshotSession {
  readonly snapshot_id: string;
  readonly snapshot_bundle_seq: number;
  readonly row_count: number;
}

interface SnapshotPage {
  readonly rows: Parameters<MinimalApplier['applySnapshotPage']>[0];
  readonly next_row_ordinal: number;
  readonly has_more: boolean;
}

export interface HydrationOutcome {
  readonly rows: number;
  readonly pages: number;
  readonly snapshotBundleSeq: number;
  readonly createMs: number;
  readonly pagesMs: number;
  readonly applyMs: number;
  readonly totalMs: number;
}

/** Snapshot create, every page (`maxRows` each), applied page by page; deletes the session after. */
export async function hydrate(client: HttpClient, applier: MinimalApplier, maxRows = 5000): Promise<HydrationOutcome> {
  const t0 = nowMs();
  const session = (await client.post<SnapshotSession>('/sync/snapshot-sessions', {})).body;
  const createMs = nowMs() - t0;
  let after = 0;
  let rows = 0;
  let pages = 0;
  let pagesMs = 0;
  let applyMs = 0;
  for (;;) {
    const p0 = nowMs();
    const page = (await client.get<SnapshotPage>(`/sync/snapshot-sessions/${session.snapshot_id}?after_row_ordinal=${after}&max_rows=${maxRows}`)).body;
    const p1 = nowMs();
    pagesMs += p1 - p0;
    pages++;
    await applier.applySnapshotPage(page.rows, page.has_more ? undefined : session.snapshot_bundle_seq);
    applyMs += nowMs() - p1;
    rows += page.rows.length;
    after = page.next_row_ordinal;
    if (!page.has_more) break;
    if (page.rows.length === 0) throw new Error('snapshot page with has_more and no rows');
  }
  const totalMs = nowMs() - t0;
  await client.del(`/sync/snapshot-sessions/${session.snapshot_id}`);
  if (rows !== session.row_count) throw new Error(`snapshot delivered ${rows} of ${session.row_count} rows`);
  return { rows, pages, snapshotBundleSeq: session.snapshot_bundle_seq, createMs, pagesMs, applyMs, totalMs };
}
