/**
 * Conflict resolution (protocol §10.3): every conflict a `push_conflict` answer reports is resolved in
 * one round by its table's policy — the server's row (the default), the local change pushed again
 * on top of the server's version, or a merged payload — and the frozen bundle is rewritten under
 * the same source tuple (a refused commit consumed nothing). An answer cut to the server's byte
 * budget (protocol §6) lists only some conflicts: those are resolved, the others stay in the
 * bundle as they were, and the next commit reports them. A server row left out of the answer is
 * read from its committed bundle, never taken for a deletion.
 */
import { type Conflict } from '../core/protocol/meta.js';
import { type ConflictResolution } from './api.js';
import { applyServerRow, applyTransaction, inApplyMode, setRowMeta, writeLocalRow } from './apply.js';
import { fetchBundleRows } from './committed-rows.js';
import { type ClientContext } from './context.js';
import { isCode } from './http-errors.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { rewriteOutbox, wireRow, type OutboxRow } from './outbox.js';
import { type SqliteStatements } from './sqlite/port.js';
import { type FrozenBundle } from './state.js';

/**
 * The conflicts with every server row in hand. A row too large for the server's answer comes
 * without it (`server_row_omitted`, protocol §5.2); the committed bundle `server_row_version`
 * last wrote it, so its rows hold it. When that bundle is gone (below the retained floor) the row
 * stays unknown: such a conflict keeps the local change (see `decide`), so an edit is never
 * replaced by a row the client could not read.
 */
async function withServerRows(ctx: ClientContext, conflicts: readonly Conflict[]): Promise<{ conflict: Conflict; known: boolean }[]> {
  const out = conflicts.map((conflict) => ({ conflict, known: !conflict.server_row_omitted }));
  const bundles = new Map<number, Promise<readonly { schema: string; table: string; key: Record<string, string>; payload: Record<string, unknown> | null }[] | null>>();
  for (const entry of out) {
    if (entry.known) continue;
    const seq = entry.conflict.server_row_version;
    if (!bundles.has(seq)) {
      bundles.set(seq, fetchBundleRows(ctx, seq).then((b) => b.rows, (error: unknown) => {
        if (isCode(error, 'history_pruned', 'committed_bundle_not_found')) return null;
        throw error;
      }));
    }
    const rows = await bundles.get(seq);
    const keyText = Object.values(entry.conflict.key)[0];
    const found = rows?.find((r) => r.schema === entry.conflict.schema && r.table === entry.conflict.table && Object.values(r.key)[0] === keyText);
    if (found?.payload) entry.conflict = { ...entry.conflict, server_row: found.payload, server_row_omitted: false };
    entry.known = Boolean(found?.payload);
  }
  return out;
}

/** The resolution of one conflict by its table's policy (server wins without a resolver). */
async function decide(row: OutboxRow, conflict: Conflict, known: boolean): Promise<ConflictResolution> {
  // The server's row could not be read: keep the local change, pushed on top of its version.
  if (!known) return { keep: 'local' };
  if (!row.table.resolver) return { keep: 'server' };
  return row.table.resolver({
    schema: row.table.schema,
    table: row.table.table,
    key: row.keyWire,
    localOp: row.wire.op,
    localPayload: row.wire.payload,
    serverRowVersion: conflict.server_row_version,
    serverRowDeleted: conflict.server_row_deleted,
    serverPayload: conflict.server_row_deleted ? null : conflict.server_row,
  });
}

/**
 * Resolves the reported conflicts and rewrites the frozen bundle. Answers the new bundle, or null
 * when nothing is left to push (every change lost to the server's rows). `needsRebuild` records,
 * in the same transaction, that a server row arrived under a parent this device never saw.
 */
export async function resolveConflicts(ctx: ClientContext, frozen: FrozenBundle, rows: readonly OutboxRow[], conflicts: readonly Conflict[],
  needsRebuild: (tx: SqliteStatements) => Promise<void>): Promise<FrozenBundle | null> {
  const index = new Map(rows.map((r, i) => [`${r.table.wireName}\u0000${r.keyWire}`, i]));
  const decisions: { at: number; conflict: Conflict; resolution: ConflictResolution }[] = [];
  for (const { conflict, known } of await withServerRows(ctx, conflicts)) {
    const keyText = Object.values(conflict.key)[0] ?? '';
    const at = index.get(`${conflict.schema}.${conflict.table}\u0000${keyText}`);
    if (at === undefined) throw new ClientError(ClientErrorCode.protocolViolation, `a conflict names ${conflict.schema}.${conflict.table} ${keyText}, which is not in the pushed bundle`);
    // Resolvers run before the transaction: they are application code and may be slow.
    decisions.push({ at, conflict, resolution: await decide(rows[at] as OutboxRow, conflict, known) });
  }
  const next: (OutboxRow | null)[] = [...rows];
  return applyTransaction(ctx.db, ctx.model, async (tx) => {
    await inApplyMode(tx, async () => {
      for (const { at, conflict, resolution } of decisions) {
        const row = rows[at] as OutboxRow;
        const serverVersion = conflict.server_row_version;
        const serverGone = conflict.server_row_deleted || (conflict.server_row === null && !conflict.server_row_omitted);
        const [dirty] = await tx.query<{ state: number }>('SELECT state FROM _sync_dirty WHERE tbl = ? AND key = ?', [row.table.local, row.keyLocal]);
        if (resolution.keep === 'server') {
          next[at] = null;
          if (dirty?.state === 2) {
            // Changed again after the freeze: that newer edit stays and is pushed on top of the server's row.
            await setRowMeta(tx, row.table, row.keyLocal, serverVersion, serverGone);
            await tx.run('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ?', [row.table.local, row.keyLocal]);
          } else {
            await applyServerRow(tx, row.table, row.keyLocal, serverVersion, serverGone ? null : conflict.server_row);
          }
          continue;
        }
        const payload = resolution.keep === 'local' ? row.wire.payload : resolution.payload;
        await setRowMeta(tx, row.table, row.keyLocal, serverVersion, serverGone);
        if (payload === null) {
          next[at] = serverGone ? null : { ...row, wire: wireRow(row.table, row.keyWire, 'DELETE', serverVersion, null) };
          if (resolution.keep === 'merged') await writeLocalRow(tx, row.table, row.keyLocal, null);
          if (serverGone) {
            // Both sides deleted: nothing to push; a newer local edit (state 2) stays dirty.
            await tx.run('DELETE FROM _sync_dirty WHERE tbl = ? AND key = ? AND state = 1', [row.table.local, row.keyLocal]);
            await tx.run('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ? AND state = 2', [row.table.local, row.keyLocal]);
          }
          continue;
        }
        const full = { ...payload, [row.table.key.name]: row.keyWire };
        next[at] = { ...row, wire: wireRow(row.table, row.keyWire, serverGone ? 'INSERT' : 'UPDATE', serverVersion, full) };
        // Capture is off: the merged row is already in the outbox.
        if (resolution.keep === 'merged') await writeLocalRow(tx, row.table, row.keyLocal, full);
      }
    });
    return rewriteOutbox(tx, frozen, next.filter((r): r is OutboxRow => r !== null));
  }, needsRebuild);
}
