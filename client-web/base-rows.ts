/**
 * The base of each dirty row (README, "Conflicts merge column by column"): the server row a local change started from, kept so
 * a conflict can be merged column by column (merge.ts) instead of one side winning whole.
 *
 * A clean row holds exactly what the server last sent (pulls and replays overwrite only clean
 * rows), so the base is the row as it is just before its first local change: a BEFORE UPDATE and a
 * BEFORE DELETE trigger per managed table (`_sync_trg_<table>_base_upd`, `_base_del`) copy the old
 * row into `_sync_base_<table>` (the table's columns, untyped, so every value is kept exactly as
 * stored) when the row has no dirty mark yet and the change is the app's (capture on). The base's
 * version is the row's `_sync_row_meta` version, which a pull never moves while the row is dirty.
 * Local inserts have no base: the server never had the row.
 *
 * Bases of rows that are clean again are garbage, never read (the next first change replaces them):
 * `forgetCleanBases` drops them after a replay. A conflict's resolution makes the server's row the
 * new base of a change that stays pending (`rebase`), and so does the replay of this device's own
 * bundle for a row changed again after the freeze.
 */
import { type CommittedRow } from '../core/protocol/rows.js';
import { keyFromWire, payloadToValues } from './apply.js';
import { ensureTriggers, type LocalModel, type TableModel, qi, syncTriggerName } from './local-schema.js';
import { rowToPayload } from './outbox.js';
import { type SqlValue, type SqliteDb, type SqliteStatements } from './sqlite/port.js';

export function baseTable(t: TableModel): string {
  return `_sync_base_${t.local}`;
}

const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;

/** The base tables and their triggers, following the model (recreated when they differ, like the capture triggers). */
export async function installBaseCapture(db: SqliteDb, model: LocalModel): Promise<void> {
  await db.transaction(async (tx) => {
    for (const t of model.tables) {
      const base = qi(baseTable(t));
      const key = qi(t.key.name);
      const existing = new Set((await tx.query<{ name: string }>('SELECT name FROM pragma_table_info(?)', [baseTable(t)])).map((c) => c.name));
      if (existing.size === 0) {
        // No declared types: no affinity, so each value stays exactly as the local table stored it.
        const others = t.columns.filter((c) => c.name !== t.key.name).map((c) => `, ${qi(c.name)}`).join('');
        await tx.exec(`CREATE TABLE ${base} (${key} PRIMARY KEY${others}) WITHOUT ROWID`);
      } else {
        // A column the app added since: older bases lack it (merge.ts treats it as unchanged locally).
        for (const c of t.columns) if (!existing.has(c.name)) await tx.exec(`ALTER TABLE ${base} ADD COLUMN ${qi(c.name)}`);
      }
      const cols = t.columns.map((c) => qi(c.name));
      const when = `WHEN (SELECT applying FROM _sync_control WHERE id = 1) = 0 ` +
        `AND NOT EXISTS (SELECT 1 FROM _sync_dirty WHERE tbl = ${lit(t.local)} AND key = OLD.${key})`;
      const copy = `INSERT OR REPLACE INTO ${base} (${cols.join(', ')}) VALUES (${cols.map((c) => `OLD.${c}`).join(', ')});`;
      const trigger = (suffix: string, event: string) => {
        const name = syncTriggerName(t.local, suffix);
        return { name, sql: `CREATE TRIGGER ${qi(name)} BEFORE ${event} ON ${qi(t.local)} ${when} BEGIN ${copy} END` };
      };
      await ensureTriggers(tx, [trigger('base_upd', 'UPDATE'), trigger('base_del', 'DELETE')]);
    }
  });
}

/** The base of one row as a wire payload, or null when it has none (a local insert). */
export async function readBase(db: SqliteStatements, table: TableModel, keyLocal: SqlValue): Promise<Record<string, unknown> | null> {
  const [row] = await db.query(`SELECT * FROM ${qi(baseTable(table))} WHERE ${qi(table.key.name)} = ?`, [keyLocal]);
  return row ? rowToPayload(table, row, []) : null;
}

/** Makes a server row (wire payload) the base of a change that stays pending; null forgets the base. */
export async function rebase(tx: SqliteStatements, table: TableModel, keyLocal: SqlValue, payload: Readonly<Record<string, unknown>> | null): Promise<void> {
  if (payload === null) {
    await tx.run(`DELETE FROM ${qi(baseTable(table))} WHERE ${qi(table.key.name)} = ?`, [keyLocal]);
    return;
  }
  const values = payloadToValues(table, payload as Record<string, unknown>);
  values[table.columns.findIndex((c) => c.name === table.key.name)] = keyLocal;
  const cols = table.columns.map((c) => qi(c.name));
  await tx.run(`INSERT OR REPLACE INTO ${qi(baseTable(table))} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, values);
}

/**
 * After the replay of this device's bundle: a row changed again after the freeze (dirty state 2)
 * stays pending on top of what was just committed, so the committed row becomes its base.
 */
export async function rebaseChangedAgain(tx: SqliteStatements, model: LocalModel, committed: readonly CommittedRow[]): Promise<void> {
  const again = await tx.query<{ tbl: string; key: SqlValue }>('SELECT tbl, key FROM _sync_dirty WHERE state = 2');
  if (again.length === 0) return;
  const pending = new Set(again.map((r) => `${r.tbl}\u0000${String(r.key instanceof Uint8Array ? Array.from(r.key).join(',') : r.key)}`));
  for (const row of committed) {
    const table = model.byWire.get(`${row.schema}.${row.table}`);
    if (!table) continue;
    const key = keyFromWire(table, row.key);
    if (!pending.has(`${table.local}\u0000${String(key instanceof Uint8Array ? Array.from(key).join(',') : key)}`)) continue;
    await rebase(tx, table, key, row.op === 'DELETE' ? null : { ...row.payload, [table.key.name]: row.key[table.key.name] });
  }
}

/** Drops the bases of rows that are clean again (garbage: a row's next first change replaces its base). */
export async function forgetCleanBases(tx: SqliteStatements, model: LocalModel): Promise<void> {
  for (const t of model.tables) {
    const base = qi(baseTable(t));
    await tx.run(`DELETE FROM ${base} WHERE NOT EXISTS (SELECT 1 FROM _sync_dirty d WHERE d.tbl = ? AND d.key = ${base}.${qi(t.key.name)})`, [t.local]);
  }
}
