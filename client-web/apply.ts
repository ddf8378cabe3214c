/**
 * Applies server data to the local tables: committed rows (pull and push replay), a staged
 * snapshot (rebuild), and single server rows (conflicts the server wins). Always inside the
 * caller's transaction, with capture off and foreign keys deferred (a small pull or replay checks
 * them at once first: `KeyChecks`), and never over a row that has unpushed local changes
 * (`_sync_dirty` state 0 or 2; state 1 is the frozen bundle being acknowledged). Row versions
 * only move forward, so re-applying an older bundle is a no-op.
 */
import { type CommittedRow } from '../core/protocol/rows.js';
import { type SnapshotRowArray, type SnapshotTable } from '../core/protocol/read-path.js';
import { fromWire } from './codec.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { columnsToRefresh, stagedTables, stageTable } from './install.js';
import { type LocalModel, type TableModel, qi, syncTriggerName } from './local-schema.js';
import { insertValues } from './sqlite/insert-values.js';
import { type SqlValue, type SqliteDb, type SqliteStatements } from './sqlite/port.js';

/**
 * When an apply transaction checks foreign keys: `deferred` at its COMMIT, so server rows may
 * arrive children first (PRAGMA defer_foreign_keys); `immediate` at the end of each statement.
 * The pragma costs more than it seems: SQLite expires every prepared statement of the connection
 * at each flag pragma, so after it every statement the client and the app run is prepared again
 * at its next use, and a write to a table with capture triggers compiles their programs again
 * (~1 ms per statement in Node, 2–3 ms in chromium, at every pull). Small applies therefore try
 * `immediate` first (applyTransaction).
 */
export type KeyChecks = 'immediate' | 'deferred';

/**
 * Up to this many rows an apply runs with immediate key checks first (applyTransaction's
 * `immediateFirst`); should a statement fail a foreign key, the transaction runs again deferred,
 * so at most this many rows are applied twice. A larger apply defers at once: the statements
 * prepared again are a small part of its work.
 */
export const IMMEDIATE_KEYS_ROWS = 256;

/** Runs `fn` with capture off and foreign keys checked as `keys` says (deferred until the caller's commit by default). */
export async function inApplyMode<T>(tx: SqliteStatements, fn: () => Promise<T>, keys: KeyChecks = 'deferred'): Promise<T> {
  if (keys === 'deferred') await tx.exec('PRAGMA defer_foreign_keys = ON');
  await tx.run('UPDATE _sync_control SET applying = 1 WHERE id = 1');
  const result = await fn();
  await tx.run('UPDATE _sync_control SET applying = 0 WHERE id = 1');
  return result;
}

const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;

/** `ON CONFLICT (key) DO UPDATE SET <every other column>` (or `DO NOTHING` for a key-only table). */
function onKeyConflict(t: TableModel): string {
  const nonKey = t.columns.filter((c) => c.name !== t.key.name).map((c) => `${qi(c.name)} = excluded.${qi(c.name)}`);
  return `ON CONFLICT (${qi(t.key.name)}) DO ${nonKey.length > 0 ? `UPDATE SET ${nonKey.join(', ')}` : 'NOTHING'}`;
}

/** Position of the key column in `t.columns` (and in payloadToValues' answer). */
const keyIndex = (t: TableModel): number => t.columns.findIndex((c) => c.name === t.key.name);

/** Statements per table, built once per model. */
interface TableStatements {
  readonly upsert: string;
  readonly remove: string;
  readonly metaPull: string;
  readonly metaOwn: string;
  /** The same without the pending-change lookups, for a page applied while nothing is pending. */
  readonly upsertClean: string;
  readonly removeClean: string;
  readonly forgetNoOp: string;
  readonly recordSkip: string;
}

const cache = new WeakMap<TableModel, TableStatements>();

function statements(t: TableModel): TableStatements {
  const hit = cache.get(t);
  if (hit) return hit;
  const tbl = lit(t.local);
  const key = qi(t.key.name);
  const cols = t.columns.map((c) => qi(c.name));
  // ?1 = local key, ?2 = incoming row_version, ?3… = column values (or ?3 = deleted flag for meta).
  const notPending = `NOT EXISTS (SELECT 1 FROM _sync_dirty WHERE tbl = ${tbl} AND key = ?1 AND state <> 1)`;
  const newer = `coalesce((SELECT row_version FROM _sync_row_meta WHERE tbl = ${tbl} AND key = ?1), -1) < ?2`;
  const meta = `INSERT INTO _sync_row_meta (tbl, key, row_version, deleted) SELECT ${tbl}, ?1, ?2, ?3`;
  const metaUpdate = 'ON CONFLICT (tbl, key) DO UPDATE SET row_version = excluded.row_version, deleted = excluded.deleted WHERE excluded.row_version > _sync_row_meta.row_version';
  const upsert = (guard: string) =>
    `INSERT INTO ${qi(t.local)} (${cols.join(', ')}) SELECT ${cols.map((_, i) => `?${i + 3}`).join(', ')} ` +
    `WHERE ${guard} ${onKeyConflict(t)}`;
  const built: TableStatements = {
    upsert: upsert(`${notPending} AND ${newer}`),
    remove: `DELETE FROM ${qi(t.local)} WHERE ${key} = ?1 AND ${notPending} AND ${newer}`,
    upsertClean: upsert(newer),
    removeClean: `DELETE FROM ${qi(t.local)} WHERE ${key} = ?1 AND ${newer}`,
    // A pull must not move the base version of a row with local changes: its next push has to
    // meet the other device's change as a conflict. A replay of our own bundle must move it.
    metaPull: `${meta} WHERE ${notPending} ${metaUpdate}`,
    metaOwn: `${meta} WHERE 1 ${metaUpdate}`,
    // A dirty mark that changes nothing: the row is absent locally and its base is "absent on the
    // server" (never seen, or a tombstone) — a key inserted and deleted again before any push.
    // The next freeze drops such a mark; until then it must not keep the server's row out, or
    // the device moves past that row's bundle without it and never learns it.
    forgetNoOp:
      `DELETE FROM _sync_dirty WHERE tbl = ${tbl} AND key = ?1 AND state = 0 ` +
      `AND NOT EXISTS (SELECT 1 FROM ${qi(t.local)} WHERE ${key} = ?1) ` +
      `AND NOT EXISTS (SELECT 1 FROM _sync_row_meta WHERE tbl = ${tbl} AND key = ?1 AND deleted = 0 AND row_version > 0)`,
    // A newer server row kept out by a pending change is remembered (see _sync_skipped in install.ts).
    // The no-op update on conflict makes every kept-out row count as one change: that is the count
    // of rows skipped for pending edits.
    recordSkip:
      `INSERT INTO _sync_skipped (tbl, key) SELECT ${tbl}, ?1 ` +
      `WHERE EXISTS (SELECT 1 FROM _sync_dirty WHERE tbl = ${tbl} AND key = ?1 AND state <> 1) AND ${newer} ` +
      'ON CONFLICT (tbl, key) DO UPDATE SET key = excluded.key',
  };
  cache.set(t, built);
  return built;
}

export interface ApplyStats {
  /** Rows that changed a local row. */
  readonly applied: number;
  /** Newer server rows kept out because the local row has unpushed changes. */
  readonly skipped: number;
}

/**
 * The local table of a wire row, or undefined for a table this client does not manage: a table the
 * server registered after this app version was built, or one an accepted contract step retired.
 * Its rows are skipped, so older clients keep syncing what they know (schema evolution).
 */
function tableOf(model: LocalModel, row: { schema: string; table: string }): TableModel | undefined {
  return model.byWire.get(`${row.schema}.${row.table}`);
}

/** Index after the run of rows of the same table as rows[i]. */
function endOfTableRun(rows: readonly { schema: string; table: string }[], i: number): number {
  const first = rows[i] as { schema: string; table: string };
  let j = i;
  while (j < rows.length && rows[j]?.schema === first.schema && rows[j]?.table === first.table) j++;
  return j;
}

/** Local key value of a wire key object. */
export function keyFromWire(table: TableModel, key: Record<string, string>): SqlValue {
  const text = key[table.key.name];
  if (typeof text !== 'string') throw new ClientError(ClientErrorCode.protocolViolation, `a row of ${table.wireName} has no text key column ${table.key.name}`);
  return fromWire(table.key, text);
}

/** Local column values of a wire payload, in the model's column order. */
export function payloadToValues(table: TableModel, payload: Record<string, unknown>): SqlValue[] {
  return table.columns.map((c) => fromWire(c, payload[c.name]));
}

/**
 * Applies committed rows in order. `own` marks the replay of this device's bundle: its frozen
 * keys are overwritten by the authoritative rows and their base versions always move.
 */
export async function applyCommittedRows(tx: SqliteStatements, model: LocalModel, rows: readonly CommittedRow[], own: boolean): Promise<ApplyStats> {
  let applied = 0;
  let skipped = 0;
  // Usually nothing is pending: then one lookup here spares two per row below.
  const [pending] = await tx.query<{ n: number }>('SELECT EXISTS (SELECT 1 FROM _sync_dirty WHERE state <> 1) AS n');
  const clean = pending?.n === 0;
  // Consecutive rows of one table and one kind (upsert / delete) run as one prepared batch.
  for (let i = 0; i < rows.length; ) {
    const first = rows[i] as CommittedRow;
    const table = tableOf(model, first);
    if (!table) {
      i = endOfTableRun(rows, i);
      continue;
    }
    const isDelete = first.op === 'DELETE';
    const data: SqlValue[][] = [];
    const meta: SqlValue[][] = [];
    for (; i < rows.length; i++) {
      const row = rows[i] as CommittedRow;
      if (row.op === 'DELETE' !== isDelete || row.schema !== first.schema || row.table !== first.table) break;
      const key = keyFromWire(table, row.key);
      if (isDelete) data.push([key, row.row_version]);
      else data.push([key, row.row_version, ...payloadToValues(table, row.payload ?? {})]);
      meta.push([key, row.row_version, isDelete ? 1 : 0]);
    }
    const s = statements(table);
    if (clean && !isDelete) {
      applied += await upsertSetBased(tx, table, data);
      continue;
    }
    if (!clean) {
      await tx.runMany(s.forgetNoOp, meta.map(([key]) => [key as SqlValue]));
      skipped += (await tx.runMany(s.recordSkip, meta.map(([key, version]) => [key as SqlValue, version as SqlValue]))).changes;
    }
    applied += (await tx.runMany(isDelete ? (clean ? s.removeClean : s.remove) : clean ? s.upsertClean : s.upsert, data)).changes;
    await tx.runMany(own || clean ? s.metaOwn : s.metaPull, meta);
  }
  return { applied, skipped };
}

/**
 * A run of upserts applied while nothing is pending: the rows go into a scratch table with one
 * prepared insert, then into the table and `_sync_row_meta` with one statement each, the version
 * check a join instead of a lookup per bound row (that per-row INSERT … SELECT cost twice a bare
 * insert; this costs about 1.3×, bench/README.md). A key twice in the run (two bundles of the
 * page) ends as its last row, as applied one by one. `data` rows are [key, version, …columns].
 */
async function upsertSetBased(tx: SqliteStatements, t: TableModel, data: readonly SqlValue[][]): Promise<number> {
  const scratch = qi(`_sync_apply_${t.local}`);
  const cols = t.columns.map((c) => qi(c.name));
  const key = qi(t.key.name);
  // A TEMP table: per connection, never on disk, never captured, gone with the connection.
  // Created only when missing: a CREATE, even one IF NOT EXISTS finds a no-op, reports a schema
  // write, and after one every live query reading the table asks again which tables it reads.
  const exists = await tx.query("SELECT 1 FROM sqlite_temp_master WHERE type = 'table' AND name = ?", [`_sync_apply_${t.local}`]);
  if (exists.length === 0) await tx.exec(`CREATE TEMP TABLE ${scratch} (_sync_version INTEGER NOT NULL, ${cols.join(', ')})`);
  const at = keyIndex(t);
  await insertValues(tx, `INSERT INTO ${scratch} (_sync_version, ${cols.join(', ')})`, `(${['?', ...cols.map(() => '?')].join(', ')})`,
    data.map((row) => {
      const values = row.slice(1);
      values[at + 1] = row[0] as SqlValue;
      return values;
    }));
  const tbl = lit(t.local);
  // Capture is off and nothing is pending: the capture and base triggers would skip every row.
  const applied = await withoutCaptureTriggers(tx, t, data.length >= BULK_ROWS ? ['ins', 'upd', 'base_upd'] : [], async () => (await tx.run(
    `INSERT INTO ${qi(t.local)} (${cols.join(', ')}) SELECT ${cols.map((c) => `s.${c}`).join(', ')} FROM ${scratch} s ` +
    `WHERE coalesce((SELECT m.row_version FROM _sync_row_meta m WHERE m.tbl = ${tbl} AND m.key = s.${key}), -1) < s._sync_version ` +
    `ORDER BY s.rowid ${onKeyConflict(t)}`)).changes);
  await tx.run(
    `INSERT INTO _sync_row_meta (tbl, key, row_version, deleted) SELECT ${tbl}, s.${key}, s._sync_version, 0 FROM ${scratch} s WHERE 1 ORDER BY s.rowid ` +
    'ON CONFLICT (tbl, key) DO UPDATE SET row_version = excluded.row_version, deleted = excluded.deleted WHERE excluded.row_version > _sync_row_meta.row_version');
  await tx.run(`DELETE FROM ${scratch}`);
  return applied;
}

/**
 * The tables the hydration of an attach may write straight into instead of staging: untouched (no
 * rows, no pending, skipped or versioned keys, so there is nothing to keep, replace or delete), and
 * each of whose local foreign keys points at a parent written straight in as well, which the
 * server's snapshot sends first: its own foreign key to that parent, published in capabilities,
 * orders the parent's rows before the child's (protocol §5.6) unless the two reference each other
 * (a cycle: no order) or the table itself. So a page never holds a row whose parent comes in a
 * later page's transaction; should one come anyway (a server whose order lags a foreign key added
 * since), the download starts over staged (downloadSnapshot). Their rows show up page by page, a
 * consistent snapshot's rows in key order; the others wait for the final apply. Staging the rows
 * and copying them again cost as much as the whole insert (bench/README.md).
 */
export async function directTables(tx: SqliteStatements, model: LocalModel): Promise<Set<string>> {
  const direct = new Set<string>();
  // Parents first (model.tables' order), so a parent is decided before its children.
  for (const t of model.tables) {
    const parents = await tx.query<{ table: string }>('SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)', [t.local]);
    const ordered = parents.every(({ table }) => {
      const parent = model.byLocal.get(table);
      return parent !== undefined && parent !== t && direct.has(parent.local) && (t.serverReferences ?? []).includes(parent.wireName) && !reaches(model, parent, t);
    });
    if (ordered && (await untouched(tx, t))) direct.add(t.local);
  }
  return direct;
}

/** Whether `from` references `to` on the server, directly or through other tables. */
function reaches(model: LocalModel, from: TableModel, to: TableModel): boolean {
  const seen = new Set<string>();
  const visit = (t: TableModel): boolean => {
    if (seen.has(t.wireName)) return false;
    seen.add(t.wireName);
    return (t.serverReferences ?? []).some((name) => name === to.wireName || (model.byWire.has(name) && visit(model.byWire.get(name) as TableModel)));
  };
  return visit(from);
}

type SnapshotRowObject = { schema: string; table: string; key: Record<string, string>; row_version: number; payload: Record<string, unknown> };

/** A snapshot page's rows: objects, or arrays under `tables` (protocol §5.6, row_form arrays). */
export interface SnapshotPageRows {
  readonly rows: readonly unknown[];
  readonly tables?: Readonly<Record<string, SnapshotTable>> | undefined;
}

/** One table's run of consecutive page rows: local values in the model's column order (key included) and row versions. */
interface SnapshotRun {
  readonly table: TableModel;
  readonly values: SqlValue[][];
  readonly versions: number[];
}

function* objectRuns(model: LocalModel, rows: readonly SnapshotRowObject[]): Generator<SnapshotRun> {
  for (let i = 0; i < rows.length; ) {
    const first = rows[i] as SnapshotRowObject;
    const table = tableOf(model, first);
    if (!table) {
      i = endOfTableRun(rows, i);
      continue;
    }
    const at = keyIndex(table);
    const run: SnapshotRun = { table, values: [], versions: [] };
    for (; i < rows.length; i++) {
      const row = rows[i] as SnapshotRowObject;
      if (row.schema !== first.schema || row.table !== first.table) break;
      const values = payloadToValues(table, row.payload);
      values[at] = keyFromWire(table, row.key);
      run.values.push(values);
      run.versions.push(row.row_version);
    }
    yield run;
  }
}

/**
 * Rows as arrays: each local column's value is found by its position in the table's header, once
 * per run instead of by name per row; a column the server does not send reads as absent, as a
 * payload without it does.
 */
function* arrayRuns(model: LocalModel, rows: readonly SnapshotRowArray[], tables: Readonly<Record<string, SnapshotTable>>): Generator<SnapshotRun> {
  for (let i = 0; i < rows.length; ) {
    const id = (rows[i] as SnapshotRowArray)[0];
    let end = i;
    while (end < rows.length && (rows[end] as SnapshotRowArray)[0] === id) end++;
    const header = tables[String(id)] as SnapshotTable;
    const table = model.byWire.get(`${header.schema}.${header.table}`);
    if (!table) {
      i = end;
      continue;
    }
    const positions = table.columns.map((c) => {
      const n = header.columns.indexOf(c.name);
      return n < 0 ? -1 : n + 2;
    });
    const keyAt = positions[keyIndex(table)] as number;
    const run: SnapshotRun = { table, values: [], versions: [] };
    for (; i < end; i++) {
      const row = rows[i] as SnapshotRowArray;
      if (keyAt < 0 || typeof row[keyAt] !== 'string') {
        throw new ClientError(ClientErrorCode.protocolViolation, `a row of ${table.wireName} has no text key column ${table.key.name}`);
      }
      run.values.push(table.columns.map((c, n) => fromWire(c, (positions[n] as number) < 0 ? undefined : row[positions[n] as number])));
      run.versions.push(row[1]);
    }
    yield run;
  }
}

/**
 * Writes one page of snapshot rows (already local values): into the stage table of their table,
 * or, for a table without one (see directTables), into the table itself with its row versions —
 * past any key the app wrote meanwhile (a pending change keeps its row, as in every apply). The
 * caller's transaction has capture off (inApplyMode).
 */
export async function stageSnapshotRows(tx: SqliteStatements, model: LocalModel, page: SnapshotPageRows, staged?: ReadonlySet<string>): Promise<void> {
  const runs = page.tables
    ? arrayRuns(model, page.rows as readonly SnapshotRowArray[], page.tables)
    : objectRuns(model, page.rows as readonly SnapshotRowObject[]);
  for (const { table, values, versions } of runs) {
    if (staged !== undefined && !staged.has(table.local)) {
      const at = keyIndex(table);
      await writeSnapshotRows(tx, table, values, values.map((v, n) => [v[at] as SqlValue, versions[n] as number]));
      continue;
    }
    values.forEach((v, n) => v.push(versions[n] as number));
    const cols = [...table.columns.map((c) => qi(c.name)), '_sync_row_version'];
    await insertValues(tx, `INSERT INTO ${qi(stageTable(table))} (${cols.join(', ')})`, `(${cols.map(() => '?').join(', ')})`, values);
  }
}

/**
 * From this many rows a bulk write of server rows drops the capture triggers for its statement
 * (withoutCaptureTriggers). Creating the insert trigger again (its program holds the local-form
 * checks) took 1–4 ms in the hydration benchmark, what its skipped program costs ~100–200 rows;
 * a small pull (the common case) keeps its triggers and pays nothing.
 */
const BULK_ROWS = 256;

/**
 * Runs `fn` (a bulk write of server rows, inside the caller's transaction with capture off) with
 * the table's capture triggers of `suffixes` dropped, and creates them again, as they were, before
 * the transaction commits. A trigger costs every row it fires on its WHEN and its program even
 * while capture is off, as much as the insert itself (bench/README.md); SQLite's DDL is
 * transactional, so a rollback (or a crash) brings the triggers back with the rows gone, and no
 * other connection ever sees the table without them. The app's own triggers stay.
 */
async function withoutCaptureTriggers<T>(tx: SqliteStatements, t: TableModel, suffixes: readonly string[], fn: () => Promise<T>): Promise<T> {
  if (suffixes.length === 0) return fn();
  const names = suffixes.map((s) => syncTriggerName(t.local, s));
  const saved = await tx.query<{ name: string; sql: string }>(
    `SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? AND name IN (${names.map(() => '?').join(', ')})`, [t.local, ...names]);
  for (const trigger of saved) await tx.exec(`DROP TRIGGER ${qi(trigger.name)}`);
  try {
    return await fn();
  } finally {
    for (const trigger of saved) await tx.exec(trigger.sql);
  }
}

/** Snapshot rows straight into a table hydrated for the first time: a plain insert while nothing is pending. */
async function writeSnapshotRows(tx: SqliteStatements, table: TableModel, values: SqlValue[][], meta: SqlValue[][]): Promise<void> {
  const [pending] = await tx.query<{ n: number }>('SELECT EXISTS (SELECT 1 FROM _sync_dirty WHERE tbl = ?) AS n', [table.local]);
  if (pending?.n === 0) {
    const cols = table.columns.map((c) => qi(c.name));
    await withoutCaptureTriggers(tx, table, values.length >= BULK_ROWS ? ['ins'] : [], () =>
      insertValues(tx, `INSERT INTO ${qi(table.local)} (${cols.join(', ')})`, `(${cols.map(() => '?').join(', ')})`, values));
    await insertValues(tx, 'INSERT INTO _sync_row_meta (tbl, key, row_version, deleted)', `(${lit(table.local)}, ?, ?, 0)`, meta);
    return;
  }
  // The app wrote to the table during the download: the rows of a pull, with its guards.
  const s = statements(table);
  const at = keyIndex(table);
  const keyed = values.map((v, n) => [v[at] as SqlValue, (meta[n] as SqlValue[])[1] as SqlValue]);
  await tx.runMany(s.recordSkip, keyed);
  await tx.runMany(s.upsert, values.map((v, n) => [...(keyed[n] as SqlValue[]), ...v]));
  await tx.runMany(s.metaPull, keyed.map(([key, version]) => [key as SqlValue, version as SqlValue, 0]));
}

/**
 * Replaces the synced data with the staged snapshot, set-based: upsert every staged row, delete
 * every local row the snapshot lacks, reset base versions — all except rows with unpushed
 * changes, which keep their values and their base versions (their push meets any newer server
 * change as a conflict).
 */
export async function applyStagedSnapshot(tx: SqliteStatements, model: LocalModel): Promise<number> {
  let applied = 0;
  const staged = await stagedTables(tx, model);
  for (const t of model.tables) {
    const stage = qi(stageTable(t));
    const tbl = lit(t.local);
    const key = qi(t.key.name);
    const cols = t.columns.map((c) => qi(c.name));
    if (!staged.has(t.local)) {
      // Written page by page (directTables): every row version of the table is this snapshot's.
      const [n] = await tx.query<{ n: number }>('SELECT count(*) AS n FROM _sync_row_meta WHERE tbl = ?', [t.local]);
      applied += Number(n?.n ?? 0);
      if ((await columnsToRefresh(tx, t)).length > 0) await tx.run('UPDATE _sync_local_model SET refresh = NULL WHERE tbl = ?', [t.local]);
      continue;
    }
    if (await untouched(tx, t)) {
      // A first hydration of this table: nothing local to keep, replace or delete, so the staged
      // rows are copied as they are, in the server's key order (appends to the key index), with
      // no per-row lookups and no stage index. Half the cost of the general path below.
      applied += (await tx.run(`INSERT INTO ${qi(t.local)} (${cols.join(', ')}) SELECT ${cols.map((c) => `s.${c}`).join(', ')} FROM ${stage} s`)).changes;
      await tx.run(`INSERT INTO _sync_row_meta (tbl, key, row_version, deleted) SELECT ${tbl}, s.${key}, s._sync_row_version, 0 FROM ${stage} s`);
      if ((await columnsToRefresh(tx, t)).length > 0) await tx.run('UPDATE _sync_local_model SET refresh = NULL WHERE tbl = ?', [t.local]);
      continue;
    }
    // The general path joins the stage on the key: index it once, now.
    await tx.exec(`CREATE UNIQUE INDEX IF NOT EXISTS ${qi(`${stageTable(t)}_key`)} ON ${stage} (${key})`);
    const pending = (ref: string) => `EXISTS (SELECT 1 FROM _sync_dirty d WHERE d.tbl = ${tbl} AND d.key = ${ref})`;
    // Dirty marks that change nothing (forgetNoOp in statements()) must not keep snapshot rows out.
    await tx.run(
      `DELETE FROM _sync_dirty WHERE tbl = ${tbl} AND state = 0 ` +
      `AND NOT EXISTS (SELECT 1 FROM ${qi(t.local)} l WHERE l.${key} = _sync_dirty.key) ` +
      `AND NOT EXISTS (SELECT 1 FROM _sync_row_meta m WHERE m.tbl = ${tbl} AND m.key = _sync_dirty.key AND m.deleted = 0 AND m.row_version > 0)`);
    await tx.run(`DELETE FROM _sync_skipped WHERE tbl = ${tbl} AND NOT ${pending('_sync_skipped.key')}`);
    await tx.run(`INSERT OR IGNORE INTO _sync_skipped (tbl, key) SELECT ${tbl}, s.${key} FROM ${stage} s WHERE ${pending(`s.${key}`)}`);
    applied += (await tx.run(
      `INSERT INTO ${qi(t.local)} (${cols.join(', ')}) SELECT ${cols.map((c) => `s.${c}`).join(', ')} FROM ${stage} s ` +
      `WHERE NOT ${pending(`s.${key}`)} ${onKeyConflict(t)}`)).changes;
    // Rows with pending changes keep their values, except columns the app added locally since
    // they last synced: those hold no value of the user's yet, and their push would otherwise
    // overwrite the server's value with the local default.
    const refresh = await columnsToRefresh(tx, t);
    if (refresh.length > 0) {
      await tx.run(
        `UPDATE ${qi(t.local)} SET ${refresh.map((c) => `${qi(c)} = s.${qi(c)}`).join(', ')} FROM ${stage} s ` +
        `WHERE s.${key} = ${qi(t.local)}.${key} AND ${pending(`s.${key}`)}`);
      await tx.run('UPDATE _sync_local_model SET refresh = NULL WHERE tbl = ?', [t.local]);
    }
    await tx.run(`DELETE FROM ${qi(t.local)} WHERE NOT EXISTS (SELECT 1 FROM ${stage} s WHERE s.${key} = ${qi(t.local)}.${key}) AND NOT ${pending(`${qi(t.local)}.${key}`)}`);
    // Tombstones of keys the snapshot lacks stay: a snapshot carries no tombstones, and without
    // its version a later re-insert of the key would push base 0 and lose to the server's
    // tombstone as a conflict, although nothing happened to the key since.
    await tx.run(
      `DELETE FROM _sync_row_meta WHERE tbl = ${tbl} AND NOT ${pending('_sync_row_meta.key')} ` +
      `AND NOT (deleted = 1 AND NOT EXISTS (SELECT 1 FROM ${stage} s WHERE s.${key} = _sync_row_meta.key))`);
    await tx.run(
      `INSERT INTO _sync_row_meta (tbl, key, row_version, deleted) SELECT ${tbl}, s.${key}, s._sync_row_version, 0 FROM ${stage} s ` +
      `WHERE NOT ${pending(`s.${key}`)} ON CONFLICT (tbl, key) DO NOTHING`);
  }
  return applied;
}

/** True when a table has no rows, no pending or skipped keys and no row versions (tombstones included). */
async function untouched(tx: SqliteStatements, t: TableModel): Promise<boolean> {
  const [row] = await tx.query<{ used: number }>(
    `SELECT EXISTS (SELECT 1 FROM ${qi(t.local)}) OR EXISTS (SELECT 1 FROM _sync_dirty WHERE tbl = ?1) ` +
    'OR EXISTS (SELECT 1 FROM _sync_row_meta WHERE tbl = ?1) OR EXISTS (SELECT 1 FROM _sync_skipped WHERE tbl = ?1) AS used', [t.local]);
  return Number(row?.used ?? 1) === 0;
}

/**
 * Writes one row's wire payload into its local table (upsert), or deletes the row for null.
 * The caller decides about capture and row meta.
 */
export async function writeLocalRow(tx: SqliteStatements, table: TableModel, keyLocal: SqlValue, payload: Record<string, unknown> | null): Promise<void> {
  if (payload === null) {
    await tx.run(`DELETE FROM ${qi(table.local)} WHERE ${qi(table.key.name)} = ?`, [keyLocal]);
    return;
  }
  const values = payloadToValues(table, payload);
  values[keyIndex(table)] = keyLocal;
  await tx.run(
    `INSERT INTO ${qi(table.local)} (${table.columns.map((c) => qi(c.name)).join(', ')}) VALUES (${table.columns.map(() => '?').join(', ')}) ${onKeyConflict(table)}`,
    values);
}

/** Makes one row exactly the server's (a conflict the server wins) and forgets its local change. */
export async function applyServerRow(tx: SqliteStatements, table: TableModel, keyLocal: SqlValue, version: number, payload: Record<string, unknown> | null): Promise<void> {
  await writeLocalRow(tx, table, keyLocal, payload);
  await setRowMeta(tx, table, keyLocal, version, payload === null);
  await tx.run('DELETE FROM _sync_dirty WHERE tbl = ? AND key = ?', [table.local, keyLocal]);
}

/** Sets a row's base version (a version 0 "never existed" forgets it). */
export async function setRowMeta(tx: SqliteStatements, table: TableModel, keyLocal: SqlValue, version: number, deleted: boolean): Promise<void> {
  if (version === 0) {
    await tx.run('DELETE FROM _sync_row_meta WHERE tbl = ? AND key = ?', [table.local, keyLocal]);
    return;
  }
  await tx.run(
    'INSERT INTO _sync_row_meta (tbl, key, row_version, deleted) VALUES (?, ?, ?, ?) ON CONFLICT (tbl, key) DO UPDATE SET row_version = excluded.row_version, deleted = excluded.deleted',
    [table.local, keyLocal, version, deleted ? 1 : 0]);
}

/** SQLite refused the COMMIT (SQLITE_CONSTRAINT): a deferred foreign key is still violated. */
function isDeferredFkFailure(error: unknown): boolean {
  const e = error as { code?: unknown; sql?: unknown } | null;
  return e?.code === 19 && e.sql === 'COMMIT';
}

/** A statement failed an immediate foreign key check (SQLITE_CONSTRAINT, SQLite's own message). */
function isImmediateFkFailure(error: unknown): boolean {
  const e = error as { code?: unknown; sql?: unknown; message?: unknown } | null;
  return e?.code === 19 && e.sql !== 'COMMIT' && typeof e.message === 'string' && e.message.includes('FOREIGN KEY constraint failed');
}

/**
 * Runs one apply transaction (pull page, replay, conflict resolution, snapshot). `fn` is given
 * the key checks to pass to inApplyMode: `immediate` on the first run when `immediateFirst`
 * (a small apply, IMMEDIATE_KEYS_ROWS), else `deferred`. A statement that fails an immediate
 * check (a child before its parent, a parent deleted before its children) makes the transaction
 * run again deferred; the result is the same, since a run whose every statement kept the keys
 * commits what the deferred run would.
 *
 * Server rows can arrive whose parent is not in the local database — under a parent deleted
 * locally and not pushed yet, or (a conflict the server wins) in a parent this device has not
 * pulled yet — and the deferred foreign key then refuses the COMMIT on every retry, so the device
 * would be stuck. On that refusal the transaction runs again and repairs the orphans before
 * committing (see `repairOrphans`); the common path pays nothing. When the repair had to drop rows
 * whose parent this device never saw, `needsRebuild` runs in the same transaction (the caller
 * records that a rebuild must bring both back).
 */
export async function applyTransaction<T>(db: SqliteDb, model: LocalModel, fn: (tx: SqliteStatements, keys: KeyChecks) => Promise<T>,
  needsRebuild: (tx: SqliteStatements) => Promise<void>, immediateFirst = false): Promise<T> {
  let failure: unknown;
  try {
    return await db.transaction((tx) => fn(tx, immediateFirst ? 'immediate' : 'deferred'));
  } catch (error) {
    failure = error;
  }
  if (immediateFirst && isImmediateFkFailure(failure)) {
    try {
      return await db.transaction((tx) => fn(tx, 'deferred'));
    } catch (error) {
      failure = error;
    }
  }
  if (!isDeferredFkFailure(failure)) throw failure;
  return db.transaction(async (tx) => {
    const result = await fn(tx, 'deferred');
    if (await inApplyMode(tx, () => repairOrphans(tx, model))) await needsRebuild(tx);
    return result;
  });
}

/**
 * Deletes managed rows whose parent is missing. Under a parent with a pending local change (a
 * local delete not pushed yet) the delete is captured, with its cascade: the local delete of the
 * parent covers children it learns of later, as SQLite's cascade would have had they been there,
 * and the server cascades the same way. Under a parent this device has never seen, the delete
 * is not captured and the answer is true: the next sync's rebuild must bring both back.
 */
async function repairOrphans(tx: SqliteStatements, model: LocalModel): Promise<boolean> {
  const violations = await tx.query<{ table: string; rowid: SqlValue; parent: string; fkid: number }>('PRAGMA foreign_key_check');
  let rebuild = false;
  for (const v of violations) {
    const t = model.byLocal.get(v.table);
    if (!t || v.rowid === null) continue;
    const [fk] = await tx.query<{ from: string }>('SELECT "from" FROM pragma_foreign_key_list(?) WHERE id = ?', [v.table, v.fkid]);
    if (!fk) continue;
    const [child] = await tx.query(`SELECT ${qi(fk.from)} AS parent_key FROM ${qi(t.local)} WHERE rowid = ?`, [v.rowid]);
    if (!child) continue;
    const [pending] = await tx.query('SELECT 1 AS p FROM _sync_dirty WHERE tbl = ? AND key = ?', [v.parent, child['parent_key'] ?? null]);
    if (pending) {
      // Capture on for this delete: the triggers mark the row (and anything it cascades to).
      await tx.run('UPDATE _sync_control SET applying = 0 WHERE id = 1');
      await tx.run(`DELETE FROM ${qi(t.local)} WHERE rowid = ?`, [v.rowid]);
      await tx.run('UPDATE _sync_control SET applying = 1 WHERE id = 1');
    } else {
      await tx.run(`DELETE FROM ${qi(t.local)} WHERE rowid = ?`, [v.rowid]);
      rebuild = true;
    }
  }
  return rebuild;
}

/**
 * Removes every synced row and its bookkeeping (a detach): the managed tables' rows (children
 * first, capture off) and the base versions and skip marks of the user who leaves.
 */
export async function clearSyncedData(tx: SqliteStatements, model: LocalModel): Promise<void> {
  await inApplyMode(tx, async () => {
    for (const t of [...model.tables].reverse()) await tx.run(`DELETE FROM ${qi(t.local)}`);
  });
  await tx.run('DELETE FROM _sync_row_meta');
  await tx.run('DELETE FROM _sync_skipped');
}
