/**
 * Whether a quarantined row can be re-queued: a row it refers to by foreign key may be gone since
 * (the list of a to-do deleted on another device), and then the re-queue could never succeed — the
 * local write fails on the foreign key, or the server refuses the bundle again. Checked before the
 * re-queue, so the app is told why (`quarantine_parent_missing`, naming each missing row) and can
 * offer what can work: a fix that points elsewhere, or a drop.
 */
import { keyToWire } from './codec.js';
import { type LocalModel, qi } from './local-schema.js';
import { type SqlValue, type SqliteStatements } from './sqlite/port.js';

/** A row a quarantined row refers to that does not exist. */
export interface MissingParent {
  /** The referring column. */
  readonly column: string;
  /** The parent's local table, and its server table when it is managed. */
  readonly localTable: string;
  readonly schema: string | null;
  readonly table: string | null;
  /** The missing key, as wire text when the parent is managed. */
  readonly key: string;
}

export async function missingParents(db: SqliteStatements, model: LocalModel, localTable: string, values: Readonly<Record<string, SqlValue>>): Promise<MissingParent[]> {
  const fks = await db.query<{ id: number; seq: number; table: string; from: string; to: string | null }>('SELECT id, seq, "table", "from", "to" FROM pragma_foreign_key_list(?)', [localTable]);
  const missing: MissingParent[] = [];
  for (const fk of fks) {
    // Composite foreign keys (seq > 0) are not among the supported local shapes: one column each.
    if (fk.seq > 0) continue;
    const value = values[fk.from] ?? null;
    if (value === null) continue;
    const parent = model.byLocal.get(fk.table);
    const to = fk.to ?? parent?.key.name ?? 'rowid';
    const [found] = await db.query(`SELECT 1 AS found FROM ${qi(fk.table)} WHERE ${qi(to)} = ? LIMIT 1`, [value]);
    if (found) continue;
    missing.push({
      column: fk.from,
      localTable: fk.table,
      schema: parent?.schema ?? null,
      table: parent?.table ?? null,
      key: parent && to === parent.key.name ? keyToWire(parent.key, value) : String(value),
    });
  }
  return missing;
}
