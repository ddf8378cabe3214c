/**
 * Schema evolution: what changed between the stored catalog and the registered tables as they
 * are declared now, and whether bootstrap may apply it.
 *
 * Applied without asking (additive; clients that do not know the change keep syncing):
 * a new registered table, a new column that is nullable, has a default or is generated, a widened
 * type (core/sync/catalog/compat.ts), a NOT NULL relaxed or added, a new partition.
 *
 * Refused, every one named with its expand/contract recipe, nothing applied:
 * a column dropped or renamed, a type changed beyond a widening, a new NOT NULL column without a
 * default, a changed sync key, a registered table dropped or unregistered. A dropped column or
 * table is a deliberate contract step once clients no longer use it: `--accept <id>` applies it.
 */
import { type SchemaChange } from '../errors.js';
import { compareColumns, type CatalogColumn } from '../sync/catalog/compat.js';
import { SCOPE_COLUMN } from '../sync/catalog/names.js';
import { type CatalogEntry } from '../sync/catalog/table-sql.js';
import { type TableInfo } from './introspect.js';

/** A catalog row as stored in `sync.table_catalog`. */
export interface StoredEntry {
  readonly tableId: number;
  readonly schema: string;
  readonly table: string;
  readonly keyColumn: string;
  readonly keyKind: string;
  readonly columns: readonly CatalogColumn[];
  readonly retired: boolean;
}

const RECIPES = {
  dropColumn: (t: string, c: string) =>
    `make ${c} nullable (or give it a default) so pushes that omit it commit; ship an app version whose local ${t} no longer has ${c} ` +
    `and let clients update; then drop it and run bootstrap with --accept drop-column:${t}.${c} (or both at once: ` +
    `npm run bootstrap -- --sql <file with the ALTER TABLE> --accept drop-column:${t}.${c}). A rename is an add, a backfill kept in step by a trigger while clients move, then this drop.`,
  retype: (t: string, c: string) =>
    `add a new column of the new type (nullable or with a default) and run bootstrap; backfill it and keep both in step with a trigger ` +
    `while clients move to an app version that uses it; then drop ${t}.${c} as a contract step (see drop-column).`,
  required: (t: string, c: string) =>
    `add ${t}.${c} with a DEFAULT (or nullable) so older clients, which do not send it, can still insert; add NOT NULL later if you need it.`,
  key: (t: string) =>
    `create a new table with the new sync key, register it, copy the rows with a server write, move clients to it, then unregister ${t} (drop-table).`,
  dropTable: (t: string) =>
    `ship an app version that no longer syncs ${t} and let clients update; then remove it from SYNC_TABLES (or drop it) and run bootstrap ` +
    `with --accept drop-table:${t}. Its history stays readable; clients skip tables they do not manage.`,
};

/** Every change from `stored` to the current declarations (`next`, built from `infos`). */
export function diffCatalog(stored: readonly StoredEntry[], next: readonly CatalogEntry[], infos: readonly TableInfo[]): SchemaChange[] {
  const changes: SchemaChange[] = [];
  const active = stored.filter((s) => !s.retired);
  const nextByName = new Map(next.map((e) => [`${e.schema}.${e.table}`, e]));
  const infoByName = new Map(infos.map((i) => [`${i.schema}.${i.table}`, i]));
  for (const s of active) {
    const name = `${s.schema}.${s.table}`;
    const e = nextByName.get(name);
    if (!e) {
      changes.push({ id: `drop-table:${name}`, message: `registered table ${name} is no longer registered (or no longer exists)`, safe: false, acceptable: true, recipe: RECIPES.dropTable(name) });
      continue;
    }
    if (e.keyColumn !== s.keyColumn || e.keyKind !== s.keyKind) {
      changes.push({ id: `change-key:${name}`, message: `the sync key of ${name} changed from ${s.keyColumn} (${s.keyKind}) to ${e.keyColumn} (${e.keyKind})`, safe: false, acceptable: false, recipe: RECIPES.key(name) });
      continue;
    }
    const info = infoByName.get(name) as TableInfo;
    const live = info.columns.filter((c) => c.name !== SCOPE_COLUMN);
    const diff = compareColumns(s.columns, live.map((c) => ({ name: c.name, type: c.type, notNull: c.notNull })));
    for (const c of diff.dropped) {
      changes.push({ id: `drop-column:${name}.${c}`, message: `column ${name}.${c} was dropped or renamed`, safe: false, acceptable: true, recipe: RECIPES.dropColumn(name, c) });
    }
    for (const c of diff.retyped) {
      changes.push({ id: `retype-column:${name}.${c.name}`, message: `column ${name}.${c.name} changed type from ${c.from} to ${c.to}, which is not a widening`, safe: false, acceptable: false, recipe: RECIPES.retype(name, c.name) });
    }
    for (const c of diff.widened) {
      changes.push({ id: `widen-column:${name}.${c.name}`, message: `column ${name}.${c.name} widened from ${c.from} to ${c.to}`, safe: true, acceptable: true });
    }
    for (const c of diff.nullability) {
      changes.push({ id: `${c.nullable ? 'relax' : 'require'}-not-null:${name}.${c.name}`, message: `column ${name}.${c.name} is now ${c.nullable ? 'nullable' : 'NOT NULL'}`, safe: true, acceptable: true });
    }
    for (const c of diff.added) {
      const column = live.find((l) => l.name === c.name);
      const required = column !== undefined && column.notNull && column.defaultExpr === null && !column.generated;
      changes.push(required
        ? { id: `add-required-column:${name}.${c.name}`, message: `new column ${name}.${c.name} is NOT NULL without a default: clients that do not know it could not insert`, safe: false, acceptable: false, recipe: RECIPES.required(name, c.name) }
        : { id: `add-column:${name}.${c.name}`, message: `new column ${name}.${c.name} (${c.type})`, safe: true, acceptable: true });
    }
  }
  const storedNames = new Set(active.map((s) => `${s.schema}.${s.table}`));
  for (const e of next) {
    const name = `${e.schema}.${e.table}`;
    if (!storedNames.has(name)) changes.push({ id: `add-table:${name}`, message: `new registered table ${name}`, safe: true, acceptable: true });
  }
  return changes;
}

/** Changes that alter what clients see (capabilities' table specs), as opposed to internal ones. */
export function changesSpecs(changes: readonly SchemaChange[]): boolean {
  return changes.length > 0;
}
