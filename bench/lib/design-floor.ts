/**
 * Design floors (issue 27): the least work the protocol's own design asks for (docs/protocol.md), done with
 * none of Lockstep's code, so a figure can say how much of a gap to a bare floor is the design's
 * and how much is the implementation's.
 *
 * - A push is a staged session: rows arrive in chunks at stateless handlers, so each chunk is
 *   stored in PostgreSQL in its own transaction (`push_session_rows`); the commit writes the rows
 *   into the business table, keeps them in the bundle log for pulls (`bundle_rows`) and moves each
 *   row's version (`row_state`), in one transaction. The floor does exactly these four writes of
 *   the same rows, each as one set-based statement: no validation, version check, capture, row
 *   text or hash, no HTTP. Staged rows are never deleted here (a generous floor).
 * - A pull or a hydration hands over committed rows in the protocol's row shape (`schema`,
 *   `table`, `key`, `op`, `row_version`, `payload` for every row), and a client keeps each row's
 *   version for its next push's `base_row_version`. The floor renders that shape, sends it as one
 *   HTTP body, and inserts the rows and their versions in one wa-sqlite transaction.
 * - A hydration reads a frozen snapshot: the rows as of its ceiling, whatever commits meanwhile,
 *   served in deterministic chunks, so the create copies them (`snapshot_session_rows`) with a
 *   fixed ordinal. The floor copies them in one statement (in the order read: no sort), reads the
 *   copy, and inserts the rows and their versions. Since layout 26 a snapshot's rows may travel
 *   as arrays under one column list per table (docs/protocol.md §5.6), the lighter shape, so the
 *   hydration's floor sends that one (specRowArrays).
 *
 * Their tables are in schema.ts (bench.floor_*), never registered.
 */
import type pg from 'pg';
import { insertValues } from '../../client-web/sqlite/insert-values.js';
import { type SqliteDb } from '../../client-web/sqlite/port.js';
import { type BodyServer } from './body-server.js';
import { type Note } from './rows.js';
import { INSERT_NOTE_HEAD, NOTE_TUPLE, noteValues, openBaselineDb } from './web-client.js';

export interface DesignFloorPush {
  readonly stageMs: number;
  readonly commitMs: number;
  readonly totalMs: number;
}

/** The staged design's four writes of `notes` for a fresh `userId`, in chunks of `chunkRows`. */
export async function designFloorPush(admin: pg.Pool, userId: string, notes: readonly Note[], chunkRows: number): Promise<DesignFloorPush> {
  const client = await admin.connect();
  try {
    const start = performance.now();
    // Each chunk as its own request would send it: the rows as JSON, stored in their own transaction.
    for (let at = 0; at < notes.length; at += chunkRows) {
      await client.query(
        `INSERT INTO bench.floor_stage (user_id, push_id, row_ordinal, payload)
         SELECT $1, 1, $2 + (o - 1)::integer, v FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS t(v, o)`,
        [userId, at, JSON.stringify(notes.slice(at, at + chunkRows))]);
    }
    const staged = performance.now();
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO bench.floor_notes (id, _sync_scope_id, title, body, position, done, updated_at)
       SELECT (payload->>'id')::uuid, user_id, payload->>'title', payload->>'body', (payload->>'position')::integer,
              (payload->>'done')::boolean, (payload->>'updated_at')::timestamptz
         FROM bench.floor_stage WHERE user_id = $1 AND push_id = 1 ORDER BY row_ordinal
       ON CONFLICT (_sync_scope_id, id) DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body, position = EXCLUDED.position,
         done = EXCLUDED.done, updated_at = EXCLUDED.updated_at`, [userId]);
    await client.query(
      `INSERT INTO bench.floor_bundle_rows (user_id, bundle_seq, row_ordinal, payload)
       SELECT user_id, 1, row_ordinal, payload FROM bench.floor_stage WHERE user_id = $1 AND push_id = 1`, [userId]);
    await client.query(
      `INSERT INTO bench.floor_row_state (user_id, key_id, row_version)
       SELECT user_id, (payload->>'id')::uuid, 1 FROM bench.floor_stage WHERE user_id = $1 AND push_id = 1
       ON CONFLICT (user_id, key_id) DO UPDATE SET row_version = EXCLUDED.row_version`, [userId]);
    await client.query('COMMIT');
    const end = performance.now();
    return { stageMs: staged - start, commitMs: end - staged, totalMs: end - start };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Rows of `userId` in one of the floor's tables, for the row-count checks. */
export async function countFloor(admin: pg.Pool, table: 'floor_notes' | 'floor_bundle_rows' | 'floor_row_state', userId: string): Promise<number> {
  const column = table === 'floor_notes' ? '_sync_scope_id' : 'user_id';
  const r = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM bench.${table} WHERE ${column} = $1`, [userId]);
  return Number(r.rows[0]?.n ?? -1);
}

export interface DesignFloorSnapshot {
  readonly copyMs: number;
  readonly rows: Note[];
}

/** The frozen copy of a scope's rows (bench.notes) as snapshot `snapshotId`, then its read. */
export async function designFloorSnapshot(admin: pg.Pool, scopeId: string, snapshotId: number): Promise<DesignFloorSnapshot> {
  const start = performance.now();
  await admin.query(
    `INSERT INTO bench.floor_snapshot (snapshot_id, row_ordinal, row_version, id, title, body, position, done, updated_at)
     SELECT $2, (row_number() OVER ())::integer, 1, id, title, body, position, done, updated_at FROM bench.notes WHERE _sync_scope_id = $1`,
    [scopeId, snapshotId]);
  const copyMs = performance.now() - start;
  const read = await admin.query<Note>(
    `SELECT id::text, title, body, position, done, to_json(updated_at)#>>'{}' AS updated_at FROM bench.floor_snapshot WHERE snapshot_id = $1`,
    [snapshotId]);
  return { copyMs, rows: read.rows };
}

/** A committed row in the protocol's shape, as a pull page or a snapshot page carries it. */
export interface SpecRow {
  readonly schema: string;
  readonly table: string;
  readonly key: { readonly id: string };
  readonly op: 'INSERT';
  readonly row_version: number;
  readonly payload: Note;
}

/** `notes` in the protocol's committed-row shape (docs/protocol.md §4.1), each with its version. */
export function specRows(notes: readonly Note[], rowVersion: (i: number) => number): SpecRow[] {
  return notes.map((n, i) => ({ schema: 'bench', table: 'notes', key: { id: n.id }, op: 'INSERT', row_version: rowVersion(i), payload: n }));
}

/** A snapshot page's rows as arrays (docs/protocol.md §5.6): `[table_id, row_version, values…]` under `tables`. */
export interface SpecRowArrays {
  readonly tables: Readonly<Record<string, { readonly schema: string; readonly table: string; readonly columns: readonly string[] }>>;
  readonly rows: readonly (readonly unknown[])[];
}

const NOTE_COLUMNS = ['id', 'title', 'body', 'position', 'done', 'updated_at'] as const;

/** `notes` as a snapshot page of arrays carries them, each with its version. */
export function specRowArrays(notes: readonly Note[], rowVersion: (i: number) => number): SpecRowArrays {
  return {
    tables: { 1: { schema: 'bench', table: 'notes', columns: NOTE_COLUMNS } },
    rows: notes.map((n, i) => [1, rowVersion(i), ...NOTE_COLUMNS.map((c) => n[c])]),
  };
}

/** A baseline device with a table shaped like the client's own `_sync_row_meta` for the versions. */
export async function openDesignFloorDb(): Promise<SqliteDb> {
  const db = await openBaselineDb();
  await db.exec(`CREATE TABLE floor_row_meta (tbl TEXT NOT NULL, key NOT NULL, row_version INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tbl, key)) WITHOUT ROWID`);
  return db;
}

/**
 * `rows` sent as one HTTP body through `bodyServer`, read and parsed, then inserted into `db`
 * (from openDesignFloorDb) with their versions: two inserts of many rows a statement, one transaction.
 */
export async function designFloorTransferAndApply(bodyServer: BodyServer, db: SqliteDb, rows: readonly SpecRow[]): Promise<void> {
  bodyServer.set(JSON.stringify({ rows }));
  const body = (await (await fetch(bodyServer.url)).json()) as { rows: SpecRow[] };
  await db.transaction(async (tx) => {
    await insertValues(tx, INSERT_NOTE_HEAD, NOTE_TUPLE, body.rows.map((r) => noteValues(r.payload)));
    await insertValues(tx, FLOOR_META_HEAD, '(?, ?, ?, 0)', body.rows.map((r) => [r.table, r.key.id, r.row_version]));
  });
}

/** designFloorTransferAndApply for rows as arrays: the values by their position in the table's column list. */
export async function designFloorTransferAndApplyArrays(bodyServer: BodyServer, db: SqliteDb, page: SpecRowArrays): Promise<void> {
  bodyServer.set(JSON.stringify(page));
  const body = (await (await fetch(bodyServer.url)).json()) as { rows: [number, number, string, string, string, number, boolean, string][] };
  await db.transaction(async (tx) => {
    await insertValues(tx, INSERT_NOTE_HEAD, NOTE_TUPLE, body.rows.map((r) => [r[2], r[3], r[4], r[5], r[6] ? 1 : 0, r[7]]));
    await insertValues(tx, FLOOR_META_HEAD, "('notes', ?, ?, 0)", body.rows.map((r) => [r[2], r[1]]));
  });
}

const FLOOR_META_HEAD = 'INSERT INTO floor_row_meta (tbl, key, row_version, deleted)';

/** Row versions `db` kept (the floors' check that none was skipped). */
export async function keptVersions(db: SqliteDb): Promise<number> {
  const [row] = await db.query('SELECT count(*) AS n FROM floor_row_meta');
  return Number(row?.['n']);
}
