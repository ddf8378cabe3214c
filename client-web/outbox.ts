/**
 * The outbox: freezing the dirty set into one bundle, and reading or rewriting it.
 *
 * A freeze turns every dirty key into at most one pushed row, reading the row as it is now
 * (coalescing all edits since the last push): present locally → INSERT (base 0, or the
 * tombstone's version) or UPDATE (base = the version it is based on); gone locally → DELETE of a
 * row the server knows, or nothing for a key the server never saw. The frozen rows, their order
 * and their canonical request hash never change across retries, so a crash or an unknown commit
 * outcome resumes the very same bundle; edits made after the freeze wait for the next one.
 */
import { canonicalRowsText, sha256Hex } from '../core/protocol/canonical-rows.js';
import { keyToWire, toWire } from './codec.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { type LocalModel, type TableModel, qi } from './local-schema.js';
import { columnsToRefresh } from './install.js';
import { insertValues } from './sqlite/insert-values.js';
import { type SqlValue, type SqliteStatements } from './sqlite/port.js';
import { clearFrozen, readAttachment, readFrozen, readSource, recordFrozen, updateFrozen, type FrozenBundle } from './state.js';

export type WireOp = 'INSERT' | 'UPDATE' | 'DELETE';

/** A pushed row exactly as it goes on the wire (docs/protocol.md §4.1). */
export interface PushedWireRow {
  readonly schema: string;
  readonly table: string;
  readonly key: Record<string, string>;
  readonly op: WireOp;
  readonly base_row_version: number;
  readonly payload: Record<string, unknown> | null;
}

/** A frozen row with what the client needs to map it back to its local row. */
export interface OutboxRow {
  readonly table: TableModel;
  readonly keyLocal: SqlValue;
  readonly keyWire: string;
  readonly wire: PushedWireRow;
}

/** The size limits a freeze respects (from the server's `bundle_limits`). */
export interface FreezeLimits {
  readonly maxRows: number;
  readonly maxBytes: number;
}

/** Lowercase hex SHA-256 of the RFC 8785 canonical JSON of the pushed rows (docs/protocol.md §4.3). */
export async function requestHash(rows: readonly PushedWireRow[]): Promise<string> {
  return sha256Hex(canonicalRowsText(rows));
}

/**
 * The wire payload of a local row: every local column, the key included, except columns the app
 * added locally whose server values the next rebuild still has to fill (`omit`): sending their
 * local default would overwrite the server's value, while omitting them keeps it.
 */
export function rowToPayload(table: TableModel, row: Record<string, SqlValue>, omit: readonly string[]): Record<string, unknown> {
  const payload: Record<string, unknown> = {};
  for (const column of table.columns) if (!omit.includes(column.name)) payload[column.name] = toWire(column, row[column.name] ?? null);
  return payload;
}

/** Why a local row cannot go on the wire: the first column whose value the codec refuses. */
export interface EncodingFailure {
  readonly column: string;
  readonly message: string;
}

function encodingFailure(column: string, error: unknown): EncodingFailure {
  if (error instanceof ClientError && error.code === ClientErrorCode.invalidLocalRow) return { column, message: error.message };
  throw error;
}

/** rowToPayload, or the column it cannot encode (the codec's `invalid_local_row`). */
export function encodeRow(table: TableModel, row: Record<string, SqlValue>, omit: readonly string[]): { readonly payload: Record<string, unknown> } | EncodingFailure {
  const payload: Record<string, unknown> = {};
  for (const column of table.columns) {
    if (omit.includes(column.name)) continue;
    try {
      payload[column.name] = toWire(column, row[column.name] ?? null);
    } catch (error) {
      return encodingFailure(column.name, error);
    }
  }
  return { payload };
}

/**
 * The wire text of a local key, or the failure when the key cannot be encoded (a row written
 * before the key guards existed); `text` is then a readable stand-in for the quarantine.
 */
export function encodeKey(table: TableModel, keyLocal: SqlValue): { readonly keyWire: string; readonly failure: EncodingFailure | null } {
  try {
    return { keyWire: keyToWire(table.key, keyLocal), failure: null };
  } catch (error) {
    const text = keyLocal instanceof Uint8Array ? `x'${Array.from(keyLocal, (b) => b.toString(16).padStart(2, '0')).join('')}'` : String(keyLocal);
    return { keyWire: text, failure: encodingFailure(table.key.name, error) };
  }
}

/**
 * A dirty row the client cannot encode for the wire: a value that slipped past the checks at the
 * write (written before they existed, or through a handle without them). The freeze sets it
 * aside (quarantine.ts) instead of failing the whole device: it can never be pushed as it is.
 */
export interface Unencodable {
  readonly table: TableModel;
  readonly keyLocal: SqlValue;
  readonly keyWire: string;
  readonly op: WireOp;
  readonly base: number;
  /** The local row as SQLite holds it (null for a delete whose key cannot be encoded). */
  readonly values: Record<string, SqlValue> | null;
  readonly failure: EncodingFailure;
}

/**
 * Moves unencodable rows (and what depends on them) out of a freeze, answering the rows that
 * remain; runs in the freeze's transaction.
 */
export type SetAside = (tx: SqliteStatements, rows: readonly OutboxRow[], unencodable: readonly Unencodable[]) => Promise<readonly OutboxRow[]>;

function wireRow(table: TableModel, keyWire: string, op: WireOp, base: number, payload: Record<string, unknown> | null): PushedWireRow {
  return { schema: table.schema, table: table.table, key: { [table.key.name]: keyWire }, op, base_row_version: base, payload };
}

const OUTBOX_DDL = (name: string) => `CREATE TABLE ${qi(name)} (
  ordinal INTEGER PRIMARY KEY,
  tbl TEXT NOT NULL,
  key_local NOT NULL,
  key_wire TEXT NOT NULL,
  op TEXT NOT NULL,
  base_row_version INTEGER NOT NULL,
  payload TEXT
)`;

/** What a freeze found: the bundle to push (or null), and whether the synced data needs a rebuild. */
export interface FreezeResult {
  readonly frozen: FrozenBundle | null;
  /** The rows this freeze wrote into the outbox, in order (none when a bundle was frozen before). */
  readonly rows: readonly OutboxRow[];
  /**
   * A key vanished (inserted and deleted again) whose newer server row a pull kept out: only a
   * rebuild brings that row back. The caller records it in the same transaction.
   */
  readonly rebuildRequired: boolean;
  /** Rows set aside because they cannot be encoded (with the rows depending on them). */
  readonly setAside: number;
}

/**
 * Freezes the dirty set into `_sync_outbox_<n>` (inside the caller's transaction) and answers the
 * frozen bundle, or the one already frozen, or null when nothing needs pushing. The first row is
 * always taken, whatever its size: a row over the byte budget left behind would never be pushed
 * (the server takes it, or refuses it with a reason the app can see). A row the client cannot
 * encode never blocks the others: `setAside` moves it into the quarantine (docs/protocol.md §11).
 */
export async function freeze(tx: SqliteStatements, model: LocalModel, limits: FreezeLimits, setAside: SetAside): Promise<FreezeResult> {
  const existing = await readFrozen(tx);
  if (existing) return { frozen: existing, rows: [], rebuildRequired: false, setAside: 0 };
  const source = await readSource(tx);
  const attachment = await readAttachment(tx);
  let rows: OutboxRow[] = [];
  const unencodable: Unencodable[] = [];
  const vanished: [string, SqlValue][] = [];
  let bytes = 0;
  /** The limits left dirty rows of the model's tables out of this bundle. */
  let cut = false;
  outer: for (const table of model.tables) {
    const omit = await columnsToRefresh(tx, table);
    const cols = table.columns.map((c) => `t.${qi(c.name)}`).join(', ');
    const found = await tx.query(
      `SELECT d.key AS __k, m.row_version AS __v, m.deleted AS __d, t.${qi(table.key.name)} IS NOT NULL AS __e, ${cols}
         FROM _sync_dirty d
         LEFT JOIN ${qi(table.local)} t ON t.${qi(table.key.name)} = d.key
         LEFT JOIN _sync_row_meta m ON m.tbl = d.tbl AND m.key = d.key
        WHERE d.tbl = ? ORDER BY d.key`, [table.local]);
    for (const r of found) {
      const keyLocal = r['__k'] ?? null;
      const version = r['__v'] === null || r['__v'] === undefined ? 0 : Number(r['__v']);
      const tombstone = r['__d'] === 1;
      const known = version > 0 && !tombstone;
      const exists = r['__e'] === 1;
      if (!exists && !known) {
        vanished.push([table.local, keyLocal]);
        continue;
      }
      const op: WireOp = exists ? (known ? 'UPDATE' : 'INSERT') : 'DELETE';
      const { keyWire, failure: keyFailure } = encodeKey(table, keyLocal);
      const encoded = exists ? encodeRow(table, r, omit) : { payload: null };
      if (keyFailure || 'column' in encoded) {
        const values = exists ? Object.fromEntries(table.columns.map((c) => [c.name, r[c.name] ?? null])) : null;
        unencodable.push({ table, keyLocal, keyWire, op, base: version, values, failure: keyFailure ?? (encoded as EncodingFailure) });
        continue;
      }
      const row = wireRow(table, keyWire, op, version, encoded.payload);
      const size = JSON.stringify(row).length;
      if (rows.length > 0 && (rows.length + 1 > limits.maxRows || bytes + size > limits.maxBytes)) {
        cut = true;
        break outer;
      }
      bytes += size;
      rows.push({ table, keyLocal, keyWire, wire: row });
    }
  }
  await tx.runMany('DELETE FROM _sync_dirty WHERE tbl = ? AND key = ?', vanished);
  let rebuildRequired = false;
  // A set-aside key that a pull kept a newer server row out of needs that row back, like a vanished one.
  for (const [tbl, key] of [...vanished, ...unencodable.map((u): [string, SqlValue] => [u.table.local, u.keyLocal])]) {
    const [skipped] = await tx.query('SELECT 1 AS s FROM _sync_skipped WHERE tbl = ? AND key = ?', [tbl, key]);
    if (skipped) rebuildRequired = true;
  }
  const before = rows.length;
  if (unencodable.length > 0) rows = [...(await setAside(tx, rows, unencodable))];
  const setAsideRows = unencodable.length + before - rows.length;
  // Usually no pull kept anything out: one lookup spares a statement per frozen row.
  const [anySkipped] = await tx.query('SELECT 1 AS s FROM _sync_skipped LIMIT 1');
  if (anySkipped) {
    await tx.runMany('DELETE FROM _sync_skipped WHERE tbl = ? AND key = ?', [
      ...vanished,
      ...unencodable.map((u): [string, SqlValue] => [u.table.local, u.keyLocal]),
      ...rows.map((r): [string, SqlValue] => [r.table.local, r.keyLocal]),
    ]);
  }
  if (rows.length === 0) return { frozen: null, rows, rebuildRequired, setAside: setAsideRows };
  const outboxTable = `_sync_outbox_${source.nextSourceBundleId}`;
  await tx.exec(`DROP TABLE IF EXISTS ${qi(outboxTable)}; ${OUTBOX_DDL(outboxTable)}`);
  await writeOutboxRows(tx, outboxTable, rows);
  if (cut || unencodable.length > 0) {
    await tx.runMany('UPDATE _sync_dirty SET state = 1 WHERE tbl = ? AND key = ?', rows.map((r) => [r.table.local, r.keyLocal]));
  } else {
    // Every dirty row of the model's tables is in the bundle (those that vanished are deleted):
    // one statement marks them all, instead of one run per row (10k rows: ~20 ms).
    await tx.run(`UPDATE _sync_dirty SET state = 1 WHERE tbl IN (${model.tables.map(() => '?').join(', ')})`, model.tables.map((t) => t.local));
  }
  const frozen: FrozenBundle = {
    outboxTable,
    protocol: model.protocol,
    sourceId: source.sourceId,
    sourceBundleId: source.nextSourceBundleId,
    rowCount: rows.length,
    requestHash: await requestHash(rows.map((r) => r.wire)),
    initializationId: attachment.initializationId,
    rejected: null,
  };
  await recordFrozen(tx, frozen);
  return { frozen, rows, rebuildRequired, setAside: setAsideRows };
}

async function writeOutboxRows(tx: SqliteStatements, outboxTable: string, rows: readonly OutboxRow[]): Promise<void> {
  await insertValues(tx, `INSERT INTO ${qi(outboxTable)} (ordinal, tbl, key_local, key_wire, op, base_row_version, payload)`, '(?, ?, ?, ?, ?, ?, ?)',
    rows.map((r, i) => [i, r.table.local, r.keyLocal, r.keyWire, r.wire.op, r.wire.base_row_version, r.wire.payload === null ? null : JSON.stringify(r.wire.payload)]));
}

/** The frozen rows in ordinal order. */
export async function readOutbox(db: SqliteStatements, model: LocalModel, frozen: FrozenBundle): Promise<OutboxRow[]> {
  const found = await db.query<{ tbl: string; key_local: SqlValue; key_wire: string; op: WireOp; base_row_version: number; payload: string | null }>(
    `SELECT tbl, key_local, key_wire, op, base_row_version, payload FROM ${qi(frozen.outboxTable)} ORDER BY ordinal`);
  return found.map((r) => {
    const table = model.byLocal.get(r.tbl);
    if (!table) throw new Error(`lockstep: the outbox names table ${r.tbl}, which is no longer managed`);
    const payload = r.payload === null ? null : (JSON.parse(r.payload) as Record<string, unknown>);
    return { table, keyLocal: r.key_local, keyWire: r.key_wire, wire: wireRow(table, r.key_wire, r.op, Number(r.base_row_version), payload) };
  });
}

/**
 * Replaces the frozen rows after conflict resolution or a quarantine (same source tuple: a refused
 * bundle consumed nothing) and answers the updated bundle, or null when nothing is left to push.
 */
export async function rewriteOutbox(tx: SqliteStatements, frozen: FrozenBundle, rows: readonly OutboxRow[]): Promise<FrozenBundle | null> {
  await tx.exec(`DELETE FROM ${qi(frozen.outboxTable)}`);
  if (rows.length === 0) {
    await dropOutbox(tx, frozen);
    return null;
  }
  await writeOutboxRows(tx, frozen.outboxTable, rows);
  const hash = await requestHash(rows.map((r) => r.wire));
  await updateFrozen(tx, rows.length, hash);
  return { ...frozen, rowCount: rows.length, requestHash: hash, rejected: null };
}

/**
 * Keeps only the first `keep` rows of the frozen bundle (same source tuple: a refused bundle
 * consumed nothing) and returns the others to the dirty set, where the next freeze takes them.
 * The way out of a rejection that names no row: halves are pushed until the refused row is alone.
 */
export async function shrinkOutbox(tx: SqliteStatements, frozen: FrozenBundle, rows: readonly OutboxRow[], keep: number): Promise<FrozenBundle> {
  const kept = await rewriteOutbox(tx, frozen, rows.slice(0, keep));
  if (!kept) throw new Error('lockstep: a shrunk bundle keeps at least one row');
  await tx.runMany('UPDATE _sync_dirty SET state = 0 WHERE tbl = ? AND key = ?', rows.slice(keep).map((r) => [r.table.local, r.keyLocal]));
  return kept;
}

/** Forgets the frozen bundle: its table, its state row, and the frozen marks of its keys. */
export async function dropOutbox(tx: SqliteStatements, frozen: FrozenBundle): Promise<void> {
  await tx.exec(`DROP TABLE IF EXISTS ${qi(frozen.outboxTable)}`);
  await clearFrozen(tx);
  // Keys changed again after the freeze (2) stay dirty for the next bundle.
  await tx.run('DELETE FROM _sync_dirty WHERE state = 1');
  await tx.run('UPDATE _sync_dirty SET state = 0 WHERE state = 2');
}

/**
 * Returns the frozen rows to the dirty set, for a bundle the server definitively refused before
 * committing (a scope or source refusal at create): the tuple was not consumed, and the local
 * rows still hold every change, so the next freeze captures the same intent again.
 */
export async function unfreeze(tx: SqliteStatements, frozen: FrozenBundle): Promise<void> {
  await tx.exec(`DROP TABLE IF EXISTS ${qi(frozen.outboxTable)}`);
  await clearFrozen(tx);
  await tx.run('UPDATE _sync_dirty SET state = 0 WHERE state <> 0');
}

export { wireRow };
