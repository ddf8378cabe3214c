/**
 * Pull (docs/protocol.md §5.4, §10.3): complete committed bundles after the checkpoint, in order,
 * up to the stable ceiling frozen by the first page (`target_bundle_seq` on the next ones).
 *
 * Each page is applied in one local transaction that also advances the checkpoint, so a crash
 * repeats at most that page (re-applying is a no-op: row versions only move forward). A bundle
 * the server sent with `rows_omitted` is completed from the committed-bundle endpoint before the
 * page is applied. Rows with unpushed local changes are never overwritten. `history_pruned`
 * sets `rebuild_required` durably, rebuilds, and pulls on from the snapshot's bundle.
 */
import { type CommittedRow } from '../core/protocol/rows.js';
import { type PullResponse } from '../core/protocol/read-path.js';
import { PullAnswer } from './wire.js';
import { type PullResult } from './api.js';
import { applyCommittedRows, applyTransaction, inApplyMode } from './apply.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { isCode } from './http-errors.js';
import { outboxTables } from './install.js';
import { fetchBundleRows } from './push.js';
import { rebuild } from './rebuild.js';
import { guardSource } from './source-recovery.js';
import { readAttachment, setRebuildRequired } from './state.js';

async function failClosedOnOutbox(ctx: ClientContext): Promise<void> {
  const outboxes = await outboxTables(ctx.db);
  if (outboxes.length > 0) {
    throw new ClientError(ClientErrorCode.outboxPending, `pull refused: frozen bundle ${outboxes.join(', ')} must be pushed or discarded first`);
  }
}

export async function pullToStable(ctx: ClientContext): Promise<PullResult> {
  await failClosedOnOutbox(ctx);
  let rebuilt = false;
  if ((await readAttachment(ctx.db)).rebuildRequired) {
    await rebuild(ctx);
    rebuilt = true;
  }
  let checkpoint = (await readAttachment(ctx.db)).checkpoint;
  let target: number | undefined;
  let bundlesApplied = 0;
  let rowsApplied = 0;
  let rowsSeen = 0;
  let rowsSkippedPending = 0;
  for (;;) {
    let page: PullResponse;
    try {
      page = await guardSource(ctx, () => ctx.transport.request('GET', '/sync/pull', {
        query: { after_bundle_seq: checkpoint, max_bundles: ctx.limits.bundlesPerPull, target_bundle_seq: target },
        schema: PullAnswer,
      }));
    } catch (error) {
      if (!isCode(error, 'history_pruned')) throw error;
      // Durable first: a crash during the rebuild resumes it on the next sync (rule 6).
      await setRebuildRequired(ctx.db, true);
      await rebuild(ctx);
      rebuilt = true;
      checkpoint = (await readAttachment(ctx.db)).checkpoint;
      target = undefined;
      continue;
    }
    target ??= page.stable_bundle_seq;
    const rows: CommittedRow[] = [];
    let expected = checkpoint + 1;
    for (const bundle of page.bundles) {
      if (bundle.bundle_seq !== expected) {
        throw new ClientError(ClientErrorCode.protocolViolation, `pull after ${checkpoint} answered bundle ${bundle.bundle_seq} where ${expected} was due`);
      }
      expected++;
      const bundleRows = bundle.rows_omitted ? (await fetchBundleRows(ctx, bundle.bundle_seq)).rows : bundle.rows;
      if (bundleRows.length !== bundle.row_count) {
        throw new ClientError(ClientErrorCode.protocolViolation, `bundle ${bundle.bundle_seq} announced ${bundle.row_count} rows but carried ${bundleRows.length}`);
      }
      rows.push(...bundleRows);
    }
    const last = page.bundles.at(-1)?.bundle_seq;
    if (last !== undefined) {
      const stats = await applyTransaction(ctx.db, ctx.model, async (tx) => {
        const applied = await inApplyMode(tx, () => applyCommittedRows(tx, ctx.model, rows, false));
        await tx.run('UPDATE _sync_attachment_state SET last_bundle_seq_seen = max(last_bundle_seq_seen, ?) WHERE id = 1', [last]);
        // An interrupted snapshot download older than what is now applied must not be resumed.
        await tx.run('DELETE FROM _sync_rebuild_state WHERE snapshot_bundle_seq < ?', [last]);
        return applied;
      });
      bundlesApplied += page.bundles.length;
      rowsApplied += stats.applied;
      rowsSkippedPending += stats.skipped;
      rowsSeen += rows.length;
      checkpoint = last;
      // Rows still to come are estimated from the bundles still to come.
      const perBundle = rowsSeen / bundlesApplied;
      ctx.progress({ phase: 'pull', rowsDone: rowsSeen, rowsTotal: rowsSeen + Math.round(perBundle * Math.max(0, target - checkpoint)) });
    }
    if (!page.has_more || checkpoint >= target || last === undefined) break;
  }
  return { bundlesApplied, rowsApplied, rowsSkippedPending, checkpoint, rebuilt };
}
