/**
 * The rebuild steps (protocol §5.6, §10.4–§10.6): create a snapshot session (with
 * `source_replacement` when rotating), download its pages into the stage tables, and delete the
 * session afterwards. Fresh installs, pruned history, a replay below the retained floor and source
 * recovery all rebuild this way; the coordinator decides when, records the session, adopts a
 * rotated source, and applies the staged snapshot in one final transaction.
 *
 * The download is resumable: each page is staged into `_sync_stage_<table>` (or, on a first
 * hydration, written into a table that has no stage table: see directTables in apply.ts) with the
 * next row ordinal in its own transaction (the step's own progress), so a crash resumes at the
 * next page; an expired or vanished session is answered as `vanished` and started over.
 */
import { type SnapshotCreated, type SnapshotPage, type SourceReplacementReason } from '../core/protocol/read-path.js';
import { applyTransaction, inApplyMode, stageSnapshotRows } from './apply.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { resetStageTables, stagedTables } from './install.js';
import { isCode, SOURCE_REFUSALS } from './http-errors.js';
import { recordSnapshotProgress, type SnapshotDownload } from './state.js';
import { type SyncHttpError } from './transport.js';
import { SnapshotAnswer, SnapshotCreatedAnswer } from './wire.js';
import { PagesAhead, pagesAfter } from './pages-ahead.js';

/** A rotation to request with the snapshot (protocol §10.5). */
export interface Rotation {
  readonly previousSourceId: string;
  readonly newSourceId: string;
  readonly reason: SourceReplacementReason;
}

/** What a create answers: the session, or a source refusal (outside a rotation, which is the recovery itself). */
export type SnapshotCreate = { readonly kind: 'session'; readonly download: SnapshotDownload } | { readonly kind: 'source_refused'; readonly error: SyncHttpError };

/**
 * Creates the snapshot session. `retry: false` for a create asked for ahead of need (an attach's,
 * sent with its connect): a failure is answered at once, and the create the rebuild would make
 * anyway is the retry.
 */
export async function createSnapshotSession(ctx: ClientContext, rotation: Rotation | null, retry = true): Promise<SnapshotCreate> {
  const body = rotation
    ? { source_replacement: { previous_source_id: rotation.previousSourceId, new_source_id: rotation.newSourceId, reason: rotation.reason } }
    : {};
  // The fields of newer servers (capabilities' features): rows as arrays, the first page in the answer.
  const newer = {
    ...(ctx.limits.snapshotRowArrays ? { row_form: 'arrays' } : {}),
    ...(ctx.limits.snapshotFirstPage ? { first_page_rows: ctx.limits.pageRows } : {}),
  };
  const create = (asNewer: boolean) =>
    ctx.transport.request('POST', '/sync/snapshot-sessions', { body: asNewer ? { ...body, ...newer } : body, schema: SnapshotCreatedAnswer, retry });
  let session: SnapshotCreated;
  try {
    // A handler of a build before these fields (a deploy under way: capabilities answered by the
    // new one) refuses them as invalid_request: the same create without them is answered objects.
    const asNewer = Object.keys(newer).length > 0;
    session = await create(asNewer).catch((error: unknown) => {
      if (asNewer && isCode(error, 'invalid_request')) return create(false);
      throw error;
    });
  } catch (error) {
    if (!rotation && isCode(error, ...SOURCE_REFUSALS)) return { kind: 'source_refused', error };
    throw error;
  }
  return {
    kind: 'session',
    download: {
      snapshotId: session.snapshot_id,
      snapshotBundleSeq: session.snapshot_bundle_seq,
      rowCount: session.row_count,
      nextRowOrdinal: 0,
      expiresAt: session.expires_at,
      ...(session.row_count > 0 ? { bytesPerRow: session.byte_count / session.row_count } : {}),
      ...(session.first_page ? { firstPage: session.first_page } : {}),
    },
  };
}

/** Thrown inside a page's transaction (rolling it back): a row's parent was not written before it. */
class ParentNotBefore extends Error {}

/**
 * Downloads the remaining pages into the stage tables; `vanished` when the session is gone. Up to
 * `pagesAhead` pages are asked for while a page is staged (pages-ahead.ts), so the network and
 * the staging transaction overlap; the durable position still moves only after a page is staged.
 *
 * A page written straight into a table with a foreign key (directTables) commits like a pull: a
 * row under a parent the app deleted meanwhile goes with it (the cascade the local delete stands
 * for). A row whose parent this device never had means the server did not send parents first:
 * then the download starts over from the first row of the same session with every table staged,
 * and the final apply replaces what the direct pages wrote.
 */
export async function downloadSnapshot(ctx: ClientContext, download: SnapshotDownload): Promise<'downloaded' | 'vanished'> {
  const pageRows = ctx.limits.pageRows;
  const pages = new PagesAhead<SnapshotPage>((after, signal) =>
    ctx.transport.request('GET', `/sync/snapshot-sessions/${download.snapshotId}`, {
      // A client that reads arrays says so on every page (it reads objects too): a session of
      // arrays answers only a request that reads them.
      query: { after_row_ordinal: after, max_rows: pageRows, row_form: ctx.limits.snapshotRowArrays ? 'arrays' : undefined },
      schema: SnapshotAnswer,
      signal,
    }));
  let next = download.nextRowOrdinal;
  let staged = await stagedTables(ctx.db, ctx.model);
  ctx.progress({ phase: 'hydrate', rowsDone: next, rowsTotal: download.rowCount });
  // The first page came with the create: it counts as asked for, so as many requests go out ahead.
  const firstPage = next === 0 ? download.firstPage : undefined;
  if (firstPage) pages.seed(0, firstPage);
  try {
    // Pages of rows of the mean size that fill at most half a response come full unless a run of
    // wider rows cuts one short: then the first pages are asked for together, one round trip
    // sooner than after the first page (the guesses past a short page are abandoned as usual).
    if (download.bytesPerRow !== undefined && download.bytesPerRow * pageRows <= ctx.limits.maxResponseBytes / 2) {
      pages.keep(pagesAfter(next, true, pageRows, ctx.limits.pagesAhead + (firstPage ? 1 : 0), download.rowCount));
    }
    let inflight = next < download.rowCount ? pages.take(next) : null;
    while (inflight) {
      const fetched = await inflight;
      if ('error' in fetched) {
        if (isCode(fetched.error, 'snapshot_session_not_found', 'snapshot_session_expired')) return 'vanished';
        throw fetched.error;
      }
      const { page } = fetched;
      const after = page.next_row_ordinal;
      if (after <= next && page.has_more) {
        throw new ClientError(ClientErrorCode.protocolViolation, `snapshot page after ${next} made no progress`);
      }
      // After a full page the pages asked for ahead line up; after a short one they do not.
      pages.keep(page.has_more ? pagesAfter(after, after - next === pageRows, pageRows, ctx.limits.pagesAhead, download.rowCount) : []);
      inflight = pages.has(after) ? pages.take(after) : null;
      const into = staged;
      try {
        await applyTransaction(ctx.db, ctx.model, async (tx) => {
          // Capture off: rows written straight into a table are the server's, not local changes.
          await inApplyMode(tx, () => stageSnapshotRows(tx, ctx.model, page, into));
          await recordSnapshotProgress(tx, after);
        }, async () => {
          throw new ParentNotBefore();
        });
      } catch (error) {
        if (!(error instanceof ParentNotBefore)) throw error;
        pages.abandon();
        await ctx.db.transaction(async (tx) => {
          await resetStageTables(tx, ctx.model);
          await recordSnapshotProgress(tx, 0);
        });
        staged = await stagedTables(ctx.db, ctx.model);
        next = 0;
        inflight = pages.take(0);
        ctx.progress({ phase: 'hydrate', rowsDone: 0, rowsTotal: download.rowCount });
        continue;
      }
      next = after;
      ctx.progress({ phase: 'hydrate', rowsDone: next, rowsTotal: download.rowCount });
    }
    return 'downloaded';
  } finally {
    // A failed page, a vanished session or a failed apply: nothing asked for ahead is wanted.
    pages.abandon();
  }
}

/** Best effort: the server expires a session anyway. */
export async function deleteSnapshotSession(ctx: ClientContext, snapshotId: string): Promise<void> {
  await ctx.transport.request('DELETE', `/sync/snapshot-sessions/${snapshotId}`, { retry: false }).catch(() => undefined);
}
