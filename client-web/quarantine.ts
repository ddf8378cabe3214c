/**
 * Salvaging a rejected bundle (the quarantine): instead of holding every change behind
 * one bad row, the offending row — the one `push_rejected` names by table and key (or the only row
 * of a one-row bundle) — moves into `_sync_quarantine` with the rejection, together with every row
 * that depends on it by foreign key (in the bundle, or pending locally), and the rest of the
 * bundle is pushed under the same source tuple (a refused bundle consumed nothing). A row the
 * client cannot even encode for the wire is set aside the same way at freeze (setAsideUnencodable),
 * with `invalid_local_row` and the column as its reason, and its local values kept as they are.
 *
 * The local tables then hold what the server holds for those keys: a quarantined new row is
 * removed locally (children first), a quarantined change of a row the server knows is put back
 * by a rebuild (`rebuild_required`; the snapshot has the server's version). The application lists
 * the quarantine, and either re-queues a row — written back as an ordinary local change, fixed or
 * as it was, and pushed with the next bundle — or drops it.
 */
import { type QuarantinedRow } from './api.js';
import { applyTransaction, inApplyMode, payloadToValues, writeLocalRow } from './apply.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { type LocalModel, type TableModel, qi } from './local-schema.js';
import { localRowOf, localRowPayload } from './local-values.js';
import { encodeKey, encodeRow, readOutbox, rewriteOutbox, type OutboxRow, type Unencodable, type WireOp } from './outbox.js';
import { type SqlValue, type SqliteStatements } from './sqlite/port.js';
import { deleteQuarantine, insertQuarantine, readQuarantine, readSource, type FrozenBundle, type QuarantineRecord, type Rejection } from './state.js';
import { columnsToRefresh } from './install.js';

/** A change to move into the quarantine: from the frozen bundle, or a pending local row. */
interface Candidate {
  readonly table: TableModel;
  readonly keyLocal: SqlValue;
  readonly keyWire: string;
  readonly op: WireOp;
  readonly base: number;
  /** The wire payload, or the local values (local-values.ts) of a row that cannot be encoded. */
  readonly payload: Record<string, unknown> | null;
  /** Index of the candidate it depends on, or -1 for an offending row. */
  readonly parent: number;
  /** Position in the frozen bundle, or -1 for a row outside it. */
  readonly ordinal: number;
  readonly rejection: Rejection;
}

/**
 * The frozen row a rejection names, or -1 when it names none: the violation's table and key, the
 * first row problem of an `invalid_request` (its `row_ordinal` is the bundle's), or the only row
 * of a one-row bundle, whatever the server could name.
 */
export function offendingRow(rows: readonly OutboxRow[], rejection: Rejection): number {
  const v = rejection.violation;
  if (v?.table && v.key) {
    const keyText = Object.values(v.key)[0];
    const at = rows.findIndex((r) => r.table.table === v.table && (v.schema === null || r.table.schema === v.schema) && r.keyWire === keyText);
    if (at >= 0) return at;
  }
  if (rejection.code === 'invalid_request' && Array.isArray(rejection.details)) {
    const ordinal = (rejection.details[0] as { row_ordinal?: unknown } | undefined)?.row_ordinal;
    if (typeof ordinal === 'number' && Number.isInteger(ordinal) && ordinal >= 0 && ordinal < rows.length) return ordinal;
  }
  return rows.length === 1 ? 0 : -1;
}

/** Local foreign keys pointing at `parent`'s sync key: (child table, child column). */
async function referencing(tx: SqliteStatements, model: LocalModel, parent: TableModel): Promise<{ table: TableModel; column: string }[]> {
  const found: { table: TableModel; column: string }[] = [];
  for (const child of model.tables) {
    const fks = await tx.query<{ table: string; from: string; to: string | null }>('SELECT "table", "from", "to" FROM pragma_foreign_key_list(?)', [child.local]);
    for (const fk of fks) {
      if (fk.table === parent.local && (fk.to === null || fk.to === parent.key.name)) found.push({ table: child, column: fk.from });
    }
  }
  return found;
}

/** The pending local change of a row outside the bundle (as a freeze would take it). */
async function localChange(tx: SqliteStatements, table: TableModel, keyLocal: SqlValue): Promise<Pick<Candidate, 'op' | 'base' | 'payload'>> {
  const [meta] = await tx.query<{ row_version: number; deleted: number }>('SELECT row_version, deleted FROM _sync_row_meta WHERE tbl = ? AND key = ?', [table.local, keyLocal]);
  const base = Number(meta?.row_version ?? 0);
  const known = base > 0 && meta?.deleted !== 1;
  const [row] = await tx.query(`SELECT * FROM ${qi(table.local)} WHERE ${qi(table.key.name)} = ?`, [keyLocal]);
  if (!row) return { op: 'DELETE', base, payload: null };
  const encoded = encodeRow(table, row, await columnsToRefresh(tx, table));
  return { op: known ? 'UPDATE' : 'INSERT', base, payload: 'payload' in encoded ? encoded.payload : localRowPayload(localValues(table, row)) };
}

function localValues(table: TableModel, row: Readonly<Record<string, SqlValue>>): Record<string, SqlValue> {
  return Object.fromEntries(table.columns.map((c) => [c.name, row[c.name] ?? null]));
}

/**
 * The offending rows and everything depending on them: rows of the bundle whose payload points at
 * a quarantined key, and local rows that reference a quarantined key (a removed parent would
 * otherwise take them along unnoticed). Each dependent carries its origin's rejection.
 */
async function closure(tx: SqliteStatements, model: LocalModel, rows: readonly OutboxRow[], origins: readonly Omit<Candidate, 'parent'>[]): Promise<Candidate[]> {
  const key = (table: TableModel, keyWire: string) => `${table.local}\u0000${keyWire}`;
  const out: Candidate[] = origins.map((o) => ({ ...o, parent: -1 }));
  const seen = new Set(origins.map((o) => key(o.table, o.keyWire)));
  for (let i = 0; i < out.length; i++) {
    const parent = out[i] as Candidate;
    for (const ref of await referencing(tx, model, parent.table)) {
      for (const [ordinal, row] of rows.entries()) {
        if (row.table !== ref.table || row.wire.payload?.[ref.column] !== parent.keyWire) continue;
        if (seen.has(key(row.table, row.keyWire))) continue;
        seen.add(key(row.table, row.keyWire));
        out.push({ ...pick(row), parent: i, ordinal, rejection: parent.rejection });
      }
      const locals = await tx.query<{ k: SqlValue }>(`SELECT ${qi(ref.table.key.name)} AS k FROM ${qi(ref.table.local)} WHERE ${qi(ref.column)} = ?`, [parent.keyLocal]);
      for (const { k } of locals) {
        const { keyWire } = encodeKey(ref.table, k);
        if (seen.has(key(ref.table, keyWire))) continue;
        seen.add(key(ref.table, keyWire));
        out.push({ table: ref.table, keyLocal: k, keyWire, ...(await localChange(tx, ref.table, k)), parent: i, ordinal: -1, rejection: parent.rejection });
      }
    }
  }
  return out;
}

function pick(row: OutboxRow): Pick<Candidate, 'table' | 'keyLocal' | 'keyWire' | 'op' | 'base' | 'payload'> {
  return { table: row.table, keyLocal: row.keyLocal, keyWire: row.keyWire, op: row.wire.op, base: row.wire.base_row_version, payload: row.wire.payload };
}

/**
 * Records the candidates in the quarantine and makes the local tables hold what the server holds
 * for them: dirty marks gone (an edit made after the freeze stays pending), a new row removed
 * (children first, so no local cascade takes a row that is not in the quarantine), a row the
 * server knows rebuilt by the next sync (`needsRebuild`, in this transaction).
 */
async function moveToQuarantine(tx: SqliteStatements, moved: readonly Candidate[], sourceBundleId: number, needsRebuild: (tx: SqliteStatements) => Promise<void>): Promise<void> {
  const at = new Date().toISOString();
  const ids: number[] = [];
  let serverKnown = false;
  for (const c of moved) {
    ids.push(await insertQuarantine(tx, {
      tbl: c.table.local, keyLocal: c.keyLocal, keyWire: c.keyWire, op: c.op, payload: c.payload, baseRowVersion: c.base,
      rejection: c.rejection, dependsOn: c.parent < 0 ? null : (ids[c.parent] as number), sourceBundleId, quarantinedAt: at,
    }));
    if (c.base > 0) serverKnown = true;
  }
  await inApplyMode(tx, async () => {
    for (const c of [...moved].reverse()) {
      const [dirty] = await tx.query<{ state: number }>('SELECT state FROM _sync_dirty WHERE tbl = ? AND key = ?', [c.table.local, c.keyLocal]);
      // Changed again after the freeze (2): that newer edit stays pending, for the next bundle.
      if (dirty?.state === 2) await tx.run('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ?', [c.table.local, c.keyLocal]);
      else await tx.run('DELETE FROM _sync_dirty WHERE tbl = ? AND key = ?', [c.table.local, c.keyLocal]);
      if (c.base === 0 && dirty?.state !== 2) await writeLocalRow(tx, c.table, c.keyLocal, null);
    }
  });
  // The server's version of a row it knows comes back with the next sync's rebuild.
  if (serverKnown) await needsRebuild(tx);
}

export interface Salvage {
  /** The rest of the bundle to push, or null when nothing is left. */
  readonly frozen: FrozenBundle | null;
  readonly quarantinedRows: number;
}

/**
 * Moves the rejected row and its dependents into the quarantine and rewrites the frozen bundle
 * without them. Answers null when the rejection names no row of the bundle (nothing to salvage
 * here: the coordinator splits the bundle until the row is alone). `needsRebuild` records, in the
 * same transaction, that rows the server knows must get the server's version back.
 */
export async function salvage(ctx: ClientContext, frozen: FrozenBundle, rejection: Rejection, needsRebuild: (tx: SqliteStatements) => Promise<void>): Promise<Salvage | null> {
  const rows = await readOutbox(ctx.db, ctx.model, frozen);
  const first = offendingRow(rows, rejection);
  if (first < 0) return null;
  return applyTransaction(ctx.db, ctx.model, async (tx) => {
    const moved = await closure(tx, ctx.model, rows, [{ ...pick(rows[first] as OutboxRow), ordinal: first, rejection }]);
    await moveToQuarantine(tx, moved, frozen.sourceBundleId, needsRebuild);
    const ordinals = new Set(moved.map((c) => c.ordinal));
    const rest = await rewriteOutbox(tx, frozen, rows.filter((_, i) => !ordinals.has(i)));
    return { frozen: rest, quarantinedRows: moved.length };
  }, needsRebuild);
}

/** The quarantine's reason for a row the client cannot encode: `invalid_local_row`, with its column. */
function unencodableRejection(u: Unencodable): Rejection {
  return {
    code: ClientErrorCode.invalidLocalRow,
    message: `${u.table.local} ${u.keyWire}: ${u.failure.message}`,
    // 22000 (data_exception): the class PostgreSQL refuses such a value with, had it been sent.
    violation: { sqlstate: '22000', constraint: null, schema: u.table.schema, table: u.table.table, column: u.failure.column, key: { [u.table.key.name]: u.keyWire } },
  };
}

/**
 * At freeze, inside its transaction: moves the rows that cannot be encoded, and the rows depending
 * on them, into the quarantine (whatever `onRejected` says: such a row can never be pushed, so
 * holding it would hold the device), and answers the frozen rows that remain.
 */
export async function setAsideUnencodable(tx: SqliteStatements, model: LocalModel, rows: readonly OutboxRow[], unencodable: readonly Unencodable[], needsRebuild: (tx: SqliteStatements) => Promise<void>): Promise<OutboxRow[]> {
  const origins = unencodable.map((u): Omit<Candidate, 'parent'> => ({
    table: u.table, keyLocal: u.keyLocal, keyWire: u.keyWire, op: u.op, base: u.base,
    payload: u.values === null ? null : localRowPayload(u.values), ordinal: -1, rejection: unencodableRejection(u),
  }));
  const moved = await closure(tx, model, rows, origins);
  // The bundle these rows would have gone with: the next one of this source.
  await moveToQuarantine(tx, moved, (await readSource(tx)).nextSourceBundleId, needsRebuild);
  const ordinals = new Set(moved.map((c) => c.ordinal));
  return rows.filter((_, i) => !ordinals.has(i));
}

/** A quarantine record as the application sees it. */
function present(ctx: ClientContext, r: QuarantineRecord): QuarantinedRow {
  const table = ctx.model.byLocal.get(r.tbl);
  const local = localRowOf(r.payload);
  const row = local ?? (table && r.payload ? Object.fromEntries(table.columns.map((c, i) => [c.name, payloadToValues(table, r.payload as Record<string, unknown>)[i] ?? null])) : null);
  return {
    id: r.id,
    schema: table?.schema ?? '',
    table: table?.table ?? r.tbl,
    localTable: r.tbl,
    key: r.keyWire,
    op: r.op,
    row,
    code: r.rejection.code,
    message: r.rejection.message,
    violation: r.rejection.violation,
    dependsOn: r.dependsOn,
    sourceBundleId: r.sourceBundleId,
    quarantinedAt: r.quarantinedAt,
  };
}

/** Every quarantined row, oldest first. */
export async function listQuarantine(ctx: ClientContext): Promise<QuarantinedRow[]> {
  return (await readQuarantine(ctx.db)).map((r) => present(ctx, r));
}

async function record(ctx: ClientContext, tx: SqliteStatements, id: number): Promise<{ record: QuarantineRecord; table: TableModel }> {
  const [found] = await readQuarantine(tx, id);
  const table = found ? ctx.model.byLocal.get(found.tbl) : undefined;
  if (!found || !table) throw new ClientError(ClientErrorCode.quarantineNotFound, `no quarantined row ${id}${found ? ` (its table ${found.tbl} is no longer managed)` : ''}`);
  return { record: found, table };
}

/**
 * Writes a quarantined row back into its table as an ordinary local change (captured, so it is
 * pushed with the next bundle), with `fix` applied over its values; a quarantined delete deletes
 * again unless `fix` gives a row. The record leaves the quarantine.
 */
export async function requeue(ctx: ClientContext, id: number, fix?: Readonly<Record<string, unknown>>): Promise<void> {
  await ctx.db.transaction(async (tx) => {
    const { record: r, table } = await record(ctx, tx, id);
    const current = present(ctx, r).row;
    const values = fix ? { ...(current ?? {}), ...fix, [table.key.name]: r.keyLocal } : current;
    if (values === null) {
      await writeLocalRow(tx, table, r.keyLocal, null);
    } else {
      const cols = table.columns.map((c) => c.name);
      await tx.run(
        `INSERT INTO ${qi(table.local)} (${cols.map(qi).join(', ')}) VALUES (${cols.map(() => '?').join(', ')}) ` +
        `ON CONFLICT (${qi(table.key.name)}) DO UPDATE SET ${cols.map((c) => `${qi(c)} = excluded.${qi(c)}`).join(', ')}`,
        cols.map((c) => (values[c] ?? null) as SqlValue));
    }
    await deleteQuarantine(tx, id);
  });
}

/** Forgets a quarantined row: the local table already holds the server's version of it. */
export async function drop(ctx: ClientContext, id: number): Promise<void> {
  await ctx.db.transaction(async (tx) => {
    await record(ctx, tx, id);
    await deleteQuarantine(tx, id);
  });
}
