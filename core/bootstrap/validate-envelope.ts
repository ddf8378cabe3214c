/**
 * The supported envelope: the registered-table requirements, rules 1–10 of docs/protocol.md §11. Every
 * violation of every table is collected, so one bootstrap run names them all.
 */
import { type SchemaViolation } from '../errors.js';
import { type RegisteredTableDecl } from '../config.js';
import { type TableInfo, type RelationInfo, type ForeignKeyInfo } from './introspect.js';
import { SCOPE_COLUMN } from '../sync/catalog/names.js';
const KEY_TYPES = new Set(['uuid', 'text']);
const ALLOWED_ACTIONS = new Set(['NO ACTION', 'RESTRICT', 'CASCADE', 'SET NULL', 'SET DEFAULT']);
const ALLOWED_MATCH = new Set(['SIMPLE']);

const nameOf = (r: { schema: string; table: string }): string => `${r.schema}.${r.table}`;

function checkOwnershipColumns(rel: RelationInfo, keyColumn: string, out: SchemaViolation[]): void {
  const table = nameOf(rel);
  const scope = rel.columns.find((c) => c.name === SCOPE_COLUMN);
  if (!scope) out.push({ rule: '3', table, object: SCOPE_COLUMN, message: `missing the hidden ownership column ${SCOPE_COLUMN} TEXT NOT NULL` });
  else {
    if (scope.type !== 'text') out.push({ rule: '3', table, object: SCOPE_COLUMN, message: `${SCOPE_COLUMN} must be of type text, found ${scope.type}` });
    if (!scope.notNull) out.push({ rule: '3', table, object: SCOPE_COLUMN, message: `${SCOPE_COLUMN} must be NOT NULL` });
  }
  const key = rel.columns.find((c) => c.name === keyColumn);
  if (key && !key.notNull) out.push({ rule: '3', table, object: keyColumn, message: `sync key column ${keyColumn} must be NOT NULL` });
}

function checkTable(info: TableInfo, registered: readonly RegisteredTableDecl[], out: SchemaViolation[]): void {
  const table = nameOf(info);
  const keyColumn = info.decl.keyColumn;

  // Rule 2: permanent, logged, ordinary or partitioned tables only; descendants too.
  for (const rel of [info, ...info.descendants]) {
    if (rel.relkind !== 'r' && rel.relkind !== 'p') {
      out.push({ rule: '2', table: nameOf(rel), message: `relation kind "${rel.relkind}" is not a table (views, foreign and other relations are unsupported)` });
    }
    if (rel.persistence === 'u') out.push({ rule: '2', table: nameOf(rel), message: 'unlogged tables are unsupported' });
    if (rel.persistence === 't') out.push({ rule: '2', table: nameOf(rel), message: 'temporary tables are unsupported' });
  }

  // Rule 1: exactly one visible sync key column of type uuid or text, NOT NULL.
  const key = info.columns.find((c) => c.name === keyColumn);
  if (keyColumn === SCOPE_COLUMN) out.push({ rule: '1', table, object: keyColumn, message: `the sync key may not be the hidden ${SCOPE_COLUMN}` });
  else if (!key) out.push({ rule: '1', table, object: keyColumn, message: `declared sync key column ${keyColumn} does not exist` });
  else {
    if (!KEY_TYPES.has(key.type)) out.push({ rule: '1', table, object: keyColumn, message: `sync key ${keyColumn} must be uuid or text, found ${key.type}` });
    if (!key.notNull) out.push({ rule: '1', table, object: keyColumn, message: `sync key ${keyColumn} must be NOT NULL` });
    if (key.generated) out.push({ rule: '1', table, object: keyColumn, message: `sync key ${keyColumn} may not be a generated column` });
  }

  // Rule 3: the root and every descendant carry the ownership column and a NOT NULL key.
  for (const rel of [info, ...info.descendants]) {
    const local: SchemaViolation[] = [];
    checkOwnershipColumns(rel, keyColumn, local);
    // The root's key nullability is reported once, under rule 1.
    out.push(...(rel === info ? local.filter((v) => v.object !== keyColumn) : local));
  }

  // Rules 4–6: unique constraints and indexes. Rule 4 is the registered table's own; rules 5–6
  // hold for every uniqueness wherever it is declared (a partition, an inheritance child) and for
  // exclusion constraints, which are uniqueness too: one that is not scoped by the user lets user
  // A learn whether user B holds a value (422 against 200) and reserve values B can never use.
  const scopeKey = new Set([SCOPE_COLUMN, keyColumn]);
  const hasScopeKeyUnique = info.uniqueIndexes.some(
    (u) => u.onRoot && u.kind === 'unique' && !u.partial && !u.expression && u.columns.length === 2 && u.columns.every((c) => scopeKey.has(c)),
  );
  if (!hasScopeKeyUnique) {
    out.push({ rule: '4', table, message: `(${SCOPE_COLUMN}, ${keyColumn}) must be unique: add a primary key or unique constraint on exactly these columns` });
  }
  for (const u of info.uniqueIndexes) {
    const object = u.constraint ?? u.name;
    const where = u.onRoot ? '' : ` (declared on ${u.relation}, a descendant of ${table}: uniqueness there crosses users too)`;
    if (u.kind === 'exclusion') {
      if (!u.scopeEquality) {
        out.push({ rule: '5', table: u.relation, object, message: `exclusion constraint on (${u.columns.join(', ')}) must include ${SCOPE_COLUMN} WITH =${where}` });
      }
      continue;
    }
    if (u.partial) out.push({ rule: '6', table: u.relation, object, message: `partial (predicate) unique indexes are unsupported${where}` });
    if (u.expression) out.push({ rule: '6', table: u.relation, object, message: `expression unique indexes are unsupported${where}` });
    if (!u.columns.includes(SCOPE_COLUMN)) {
      out.push({ rule: '5', table: u.relation, object, message: `unique constraint/index on (${u.columns.join(', ')}) must include ${SCOPE_COLUMN}${where}` });
    }
  }

  // Rules 7–10: foreign keys.
  for (const fk of info.foreignKeys) {
    const target = `${fk.refSchema}.${fk.refTable}`;
    const isRegistered = registered.some((r) => r.schema === fk.refSchema && r.table === fk.refTable);
    if (!isRegistered) out.push({ rule: '7', table, object: fk.name, message: `foreign key points to ${target}, which is not a registered table` });
    const scopeAt = fk.columns.indexOf(SCOPE_COLUMN);
    if (scopeAt < 0 || fk.refColumns[scopeAt] !== SCOPE_COLUMN) {
      out.push({ rule: '7', table, object: fk.name, message: `foreign key to ${target} must include ${SCOPE_COLUMN} on both sides` });
    }
    if (!fk.deferrable) out.push({ rule: '8', table, object: fk.name, message: 'foreign key must be DEFERRABLE (INITIALLY DEFERRED recommended)' });
    if (!ALLOWED_ACTIONS.has(fk.updateAction)) out.push({ rule: '9', table, object: fk.name, message: `ON UPDATE ${fk.updateAction} is unsupported` });
    if (!ALLOWED_ACTIONS.has(fk.deleteAction)) out.push({ rule: '9', table, object: fk.name, message: `ON DELETE ${fk.deleteAction} is unsupported` });
    checkSettingActions(table, fk, out);
    if (!ALLOWED_MATCH.has(fk.matchType)) out.push({ rule: '10', table, object: fk.name, message: `MATCH ${fk.matchType} is unsupported (use MATCH SIMPLE)` });
  }
}

/**
 * SET NULL and SET DEFAULT set every referencing column unless they name some, and the
 * referencing columns of a scoped foreign key include the hidden scope: without a list, every
 * delete of a parent would null `_sync_scope_id` (NOT NULL: the delete is rejected, naming a
 * column the client never sees) or reset it to a default (the row would change hands).
 * On update every action is accepted (rule 9): a sync key and `_sync_scope_id` never change on
 * any path (sync.capture refuses such an UPDATE, push cannot express one), so an ON UPDATE action
 * of a foreign key to a sync key can never fire. One to other unique columns fires when they
 * change; SET NULL / SET DEFAULT there reach `_sync_scope_id` too, and that UPDATE is refused
 * (a NOT NULL violation, or capture's refusal of a scope change): a typed rejection, never a row
 * that changes hands.
 */
function checkSettingActions(table: string, fk: ForeignKeyInfo, out: SchemaViolation[]): void {
  if (!fk.columns.includes(SCOPE_COLUMN)) return;
  const others = fk.columns.filter((c) => c !== SCOPE_COLUMN);
  if ((fk.deleteAction === 'SET NULL' || fk.deleteAction === 'SET DEFAULT') &&
      (fk.deleteSetColumns.length === 0 || fk.deleteSetColumns.includes(SCOPE_COLUMN))) {
    out.push({
      rule: '9', table, object: fk.name,
      message: `ON DELETE ${fk.deleteAction} would set ${SCOPE_COLUMN} too, so every delete of a parent fails; ` +
        `name the columns to set: ON DELETE ${fk.deleteAction} (${others.join(', ')})`,
    });
  }
}

/**
 * Checks every declared table. `infos[i]` is null when declaration i names no relation.
 * Nullable identities are the first thing reported, and nothing is changed before this runs.
 */
export function validateEnvelope(decls: readonly RegisteredTableDecl[], infos: readonly (TableInfo | null)[]): SchemaViolation[] {
  const out: SchemaViolation[] = [];
  decls.forEach((decl, i) => {
    const info = infos[i];
    if (!info) out.push({ rule: 'exists', table: `${decl.schema}.${decl.table}`, message: 'registered table does not exist' });
    else checkTable(info, decls, out);
  });
  return out;
}
