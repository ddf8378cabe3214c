/**
 * The conflict log: one record per conflict this device resolved, saying what was merged and what
 * was overwritten, so an app can tell its user ("your change to the title was replaced by the one
 * made on another device; your priority was kept") and offer to redo an edit. Kept in
 * `_sync_conflict_log`, written in the transaction that resolves the conflict, newest
 * `CONFLICT_LOG_ROWS_MAX` kept; the app reads it with `client.conflicts()` (or a live query on the
 * table) and clears what it has shown with `client.dismissConflicts()`.
 */
import { type ConflictRecord } from './api.js';
import { type SqliteDb, type SqliteStatements } from './sqlite/port.js';

/** Conflict records kept; older ones are dropped as new ones arrive. */
export const CONFLICT_LOG_ROWS_MAX = 500;

/** The table of the log (live queries may read it). */
export const CONFLICT_LOG_TABLE = '_sync_conflict_log';

const DDL = `CREATE TABLE IF NOT EXISTS ${CONFLICT_LOG_TABLE} (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  schema_name TEXT NOT NULL,
  table_name TEXT NOT NULL,
  local_table TEXT NOT NULL,
  key_wire TEXT NOT NULL,
  local_op TEXT NOT NULL,
  resolution TEXT NOT NULL,
  base_row_version INTEGER,
  server_row_version INTEGER NOT NULL,
  server_row_deleted INTEGER NOT NULL,
  kept_local TEXT NOT NULL,
  took_server TEXT NOT NULL,
  overwritten TEXT NOT NULL,
  base TEXT,
  local TEXT,
  server TEXT,
  result TEXT,
  resolved_at TEXT NOT NULL
)`;

export async function installConflictLog(db: SqliteDb): Promise<void> {
  await db.exec(DDL);
}

/** Appends one record (inside the resolving transaction) and drops the oldest beyond the limit. */
export async function logConflict(tx: SqliteStatements, r: Omit<ConflictRecord, 'id'>): Promise<void> {
  const json = (v: unknown) => (v === null ? null : JSON.stringify(v));
  await tx.run(
    `INSERT INTO ${CONFLICT_LOG_TABLE} (schema_name, table_name, local_table, key_wire, local_op, resolution, base_row_version, server_row_version,
       server_row_deleted, kept_local, took_server, overwritten, base, local, server, result, resolved_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [r.schema, r.table, r.localTable, r.key, r.localOp, r.resolution, r.baseRowVersion, r.serverRowVersion, r.serverRowDeleted ? 1 : 0,
      JSON.stringify(r.keptLocal), JSON.stringify(r.tookServer), JSON.stringify(r.overwritten), json(r.base), json(r.local), json(r.server), json(r.result), r.resolvedAt]);
  await tx.run(`DELETE FROM ${CONFLICT_LOG_TABLE} WHERE id <= (SELECT max(id) FROM ${CONFLICT_LOG_TABLE}) - ?`, [CONFLICT_LOG_ROWS_MAX]);
}

interface LogRow {
  id: number;
  schema_name: string;
  table_name: string;
  local_table: string;
  key_wire: string;
  local_op: ConflictRecord['localOp'];
  resolution: ConflictRecord['resolution'];
  base_row_version: number | null;
  server_row_version: number;
  server_row_deleted: number;
  kept_local: string;
  took_server: string;
  overwritten: string;
  base: string | null;
  local: string | null;
  server: string | null;
  result: string | null;
  resolved_at: string;
}

/** Turns a row of the log (as `SELECT *` reads it, e.g. in a live query) into a record. */
export function conflictRecord(r: Readonly<Record<string, unknown>>): ConflictRecord {
  const row = r as unknown as LogRow;
  const parse = (v: string | null) => (v === null ? null : (JSON.parse(v) as Record<string, unknown>));
  return {
    id: Number(row.id),
    schema: row.schema_name,
    table: row.table_name,
    localTable: row.local_table,
    key: row.key_wire,
    localOp: row.local_op,
    resolution: row.resolution,
    baseRowVersion: row.base_row_version === null ? null : Number(row.base_row_version),
    serverRowVersion: Number(row.server_row_version),
    serverRowDeleted: Number(row.server_row_deleted) === 1,
    keptLocal: JSON.parse(row.kept_local) as string[],
    tookServer: JSON.parse(row.took_server) as string[],
    overwritten: JSON.parse(row.overwritten) as string[],
    base: parse(row.base),
    local: parse(row.local),
    server: parse(row.server),
    result: parse(row.result),
    resolvedAt: row.resolved_at,
  };
}

/** The query of the log, oldest first: for `conflicts()` and for live queries (`useConflicts`). */
export const CONFLICT_LOG_SQL = `SELECT * FROM ${CONFLICT_LOG_TABLE} ORDER BY id`;

export async function readConflicts(db: SqliteStatements): Promise<ConflictRecord[]> {
  return (await db.query(CONFLICT_LOG_SQL)).map(conflictRecord);
}

/** Forgets the given records, or all of them. */
export async function dismissConflicts(db: SqliteDb, ids?: readonly number[]): Promise<void> {
  if (ids === undefined) {
    await db.run(`DELETE FROM ${CONFLICT_LOG_TABLE}`);
    return;
  }
  if (ids.length === 0) return;
  await db.transaction((tx) => tx.runMany(`DELETE FROM ${CONFLICT_LOG_TABLE} WHERE id = ?`, ids.map((id) => [id])));
}
