/**
 * Conflict resolution (protocol §10.3; README, "Conflicts merge column by column"): every conflict a `push_conflict` answer
 * reports is resolved in one round by its table's policy, and the frozen bundle is rewritten under
 * the same source tuple (a refused commit consumed nothing).
 *
 * Without a resolver the policy merges column by column against the base (merge.ts, base-rows.ts):
 * the device's edits of columns nobody else changed are kept and pushed again on the server's
 * version; the server's changes are taken; a column changed on both sides takes the server's. A
 * delete on either side, or a merge that keeps nothing of the device's, takes the server's row. A
 * resolver sees base, local and server rows and the default merge, and answers `server`, `local`
 * or a `merged` row. Each resolution is logged (conflict-log.ts) in the same transaction.
 *
 * An answer cut to the server's byte budget (protocol §6) lists only some conflicts: those are
 * resolved, the others stay in the bundle as they were, and the next commit reports them. A server
 * row left out of the answer is read from its committed bundle, never taken for a deletion.
 */
import { type Conflict } from '../core/protocol/meta.js';
import { type ConflictInput, type ConflictRecord, type ConflictResolution, type MergeProposal } from './api.js';
import { applyServerRow, applyTransaction, inApplyMode, setRowMeta, writeLocalRow } from './apply.js';
import { readBase, rebase } from './base-rows.js';
import { fetchBundleRows } from './committed-rows.js';
import { logConflict } from './conflict-log.js';
import { type ClientContext } from './context.js';
import { isCode } from './http-errors.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { mergeColumns, sameValue } from './merge.js';
import { rewriteOutbox, rowToPayload, wireRow, type OutboxRow } from './outbox.js';
import { qi } from './local-schema.js';
import { type SqliteStatements } from './sqlite/port.js';
import { type FrozenBundle } from './state.js';

type Payload = Record<string, unknown>;

/** One conflict with what the policy needs: the base and the default merge. */
interface Case {
  readonly at: number;
  readonly conflict: Conflict;
  readonly input: ConflictInput;
  readonly resolution: ConflictResolution;
  /** How the log names the resolution. */
  readonly how: ConflictRecord['resolution'];
}

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

/** The base, the local and the server rows of one conflict, and their default merge. */
async function inputOf(ctx: ClientContext, row: OutboxRow, conflict: Conflict): Promise<ConflictInput> {
  // A local insert has no base (the server never had the row as far as this device knows).
  const basePayload = row.wire.op === 'INSERT' ? null : await readBase(ctx.db, row.table, row.keyLocal);
  const base = basePayload ? { rowVersion: row.wire.base_row_version, payload: basePayload } : null;
  const serverPayload = conflict.server_row_deleted ? null : conflict.server_row;
  const local = row.wire.payload;
  let merged: MergeProposal | null = null;
  if (local !== null && serverPayload !== null) {
    const key = row.table.key.name;
    merged = mergeColumns(row.table.columns.map((c) => c.name), key, base?.payload ?? null, local, { ...serverPayload, [key]: row.keyWire });
  }
  return {
    schema: row.table.schema,
    table: row.table.table,
    key: row.keyWire,
    localOp: row.wire.op,
    localPayload: local,
    serverRowVersion: conflict.server_row_version,
    serverRowDeleted: conflict.server_row_deleted,
    serverPayload,
    base,
    merged,
  };
}

/** The default policy: the column merge, or the server's row when a side deleted it or nothing of the device's survives. */
function byDefault(input: ConflictInput): { resolution: ConflictResolution; how: ConflictRecord['resolution'] } {
  const merged = input.merged;
  if (!merged || merged.fromLocal.length === 0) return { resolution: { keep: 'server' }, how: 'server' };
  return { resolution: { keep: 'merged', payload: merged.payload }, how: 'merged' };
}

async function decide(ctx: ClientContext, row: OutboxRow, conflict: Conflict, at: number, known: boolean): Promise<Case> {
  const input = await inputOf(ctx, row, conflict);
  // The server's row could not be read: keep the local change, pushed on top of its version.
  if (!known) return { at, conflict, input, resolution: { keep: 'local' }, how: 'local' };
  if (!row.table.resolver) return { at, conflict, input, ...byDefault(input) };
  const resolution = await row.table.resolver(input);
  const how: ConflictRecord['resolution'] = resolution.keep === 'merged'
    ? (input.merged && resolution.payload !== null && sameValue(resolution.payload, input.merged.payload) ? 'merged' : 'resolver')
    : resolution.keep;
  return { at, conflict, input, resolution, how };
}

/** What became of each column the device changed, for the log. */
function columnsOutcome(c: Case, result: Payload | null): Pick<ConflictRecord, 'keptLocal' | 'tookServer' | 'overwritten'> {
  const merged = c.input.merged;
  if (!merged) return { keptLocal: [], tookServer: [], overwritten: [] };
  const changedHere = [...merged.fromLocal, ...merged.bothChanged];
  const kept = result === null ? [] : changedHere.filter((col) => sameValue(result[col], c.input.localPayload?.[col]));
  return {
    keptLocal: kept,
    tookServer: merged.fromServer.filter((col) => result !== null && sameValue(result[col], c.input.serverPayload?.[col])),
    overwritten: changedHere.filter((col) => !kept.includes(col)),
  };
}

/**
 * Resolves the reported conflicts and rewrites the frozen bundle. Answers the new bundle, or null
 * when nothing is left to push (every change lost to the server's rows). `needsRebuild` records,
 * in the same transaction, that a server row arrived under a parent this device never saw.
 */
export async function resolveConflicts(ctx: ClientContext, frozen: FrozenBundle, rows: readonly OutboxRow[], conflicts: readonly Conflict[],
  needsRebuild: (tx: SqliteStatements) => Promise<void>): Promise<FrozenBundle | null> {
  const index = new Map(rows.map((r, i) => [`${r.table.wireName}\u0000${r.keyWire}`, i]));
  const cases: Case[] = [];
  for (const { conflict, known } of await withServerRows(ctx, conflicts)) {
    const keyText = Object.values(conflict.key)[0] ?? '';
    const at = index.get(`${conflict.schema}.${conflict.table}\u0000${keyText}`);
    if (at === undefined) throw new ClientError(ClientErrorCode.protocolViolation, `a conflict names ${conflict.schema}.${conflict.table} ${keyText}, which is not in the pushed bundle`);
    // Resolvers run before the transaction: they are application code and may be slow.
    cases.push(await decide(ctx, rows[at] as OutboxRow, conflict, at, known));
  }
  const next: (OutboxRow | null)[] = [...rows];
  const resolvedAt = new Date().toISOString();
  return applyTransaction(ctx.db, ctx.model, async (tx) => {
    await inApplyMode(tx, async () => {
      for (const c of cases) {
        const { at, conflict, resolution } = c;
        const row = rows[at] as OutboxRow;
        const serverVersion = conflict.server_row_version;
        const serverGone = conflict.server_row_deleted || (conflict.server_row === null && !conflict.server_row_omitted);
        const serverRow = serverGone || conflict.server_row === null ? null : { ...conflict.server_row, [row.table.key.name]: row.keyWire };
        const [dirty] = await tx.query<{ state: number }>('SELECT state FROM _sync_dirty WHERE tbl = ? AND key = ?', [row.table.local, row.keyLocal]);
        let result: Payload | null;
        if (resolution.keep === 'server') {
          next[at] = null;
          if (dirty?.state === 2) {
            // Changed again after the freeze: that newer edit stays and is pushed on top of the server's row.
            await setRowMeta(tx, row.table, row.keyLocal, serverVersion, serverGone);
            await tx.run('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ?', [row.table.local, row.keyLocal]);
            await rebase(tx, row.table, row.keyLocal, serverRow);
          } else {
            await applyServerRow(tx, row.table, row.keyLocal, serverVersion, serverGone ? null : conflict.server_row);
          }
          result = serverRow;
        } else {
          const payload = resolution.keep === 'local' ? row.wire.payload : resolution.payload;
          await setRowMeta(tx, row.table, row.keyLocal, serverVersion, serverGone);
          // The change stays pending on the server's version: that row is its base now.
          await rebase(tx, row.table, row.keyLocal, serverRow);
          if (payload === null) {
            next[at] = serverGone ? null : { ...row, wire: wireRow(row.table, row.keyWire, 'DELETE', serverVersion, null) };
            if (resolution.keep === 'merged') await writeLocalRow(tx, row.table, row.keyLocal, null);
            if (serverGone) {
              // Both sides deleted: nothing to push; a newer local edit (state 2) stays dirty.
              await tx.run('DELETE FROM _sync_dirty WHERE tbl = ? AND key = ? AND state = 1', [row.table.local, row.keyLocal]);
              await tx.run('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ? AND state = 2', [row.table.local, row.keyLocal]);
            }
            result = null;
          } else {
            const full = { ...payload, [row.table.key.name]: row.keyWire };
            next[at] = { ...row, wire: wireRow(row.table, row.keyWire, serverGone ? 'INSERT' : 'UPDATE', serverVersion, full) };
            // Capture is off: the merged row is already in the outbox.
            if (resolution.keep === 'merged') await writeLocalRow(tx, row.table, row.keyLocal, dirty?.state === 2 ? await withNewerEdits(tx, row, full) : full);
            result = full;
          }
        }
        await logConflict(tx, {
          schema: row.table.schema,
          table: row.table.table,
          localTable: row.table.local,
          key: row.keyWire,
          localOp: row.wire.op,
          resolution: c.how,
          baseRowVersion: c.input.base?.rowVersion ?? null,
          serverRowVersion: serverVersion,
          serverRowDeleted: serverGone,
          ...columnsOutcome(c, result),
          base: c.input.base?.payload ?? null,
          local: row.wire.payload,
          server: serverRow,
          result,
          resolvedAt,
        });
      }
    });
    return rewriteOutbox(tx, frozen, next.filter((r): r is OutboxRow => r !== null));
  }, needsRebuild);
}

/**
 * The merged row as the local table should hold it when the row changed again after the freeze:
 * columns edited since keep their newer local values (they are pushed with the next bundle).
 */
async function withNewerEdits(tx: SqliteStatements, row: OutboxRow, merged: Payload): Promise<Payload> {
  const [now] = await tx.query(`SELECT * FROM ${qi(row.table.local)} WHERE ${qi(row.table.key.name)} = ?`, [row.keyLocal]);
  if (!now) return merged;
  const current = rowToPayload(row.table, now, []);
  const frozen = row.wire.payload ?? {};
  const out: Payload = { ...merged };
  for (const c of row.table.columns) if (c.name in frozen && !sameValue(current[c.name], frozen[c.name])) out[c.name] = current[c.name];
  return out;
}
