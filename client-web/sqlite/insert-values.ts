/**
 * Bulk inserts of many rows a statement. Through wa-sqlite every statement run crosses into wasm
 * three times (step, changes, reset) whatever it writes, and for a narrow row that is as much as
 * the write itself: one `INSERT … VALUES (…), (…), …` of a few hundred rows wrote 100,000 notes
 * and their row versions in 231 ms against 358 ms a row at a time (bench/README.md). SQLite
 * inserts the tuples one after another, so rowids, triggers, constraint checks and the changes
 * count are those of the same rows inserted one by one.
 */
import { type SqlValue, type SqliteStatements } from './port.js';
import { SQLITE_CODES, SqliteError } from './wa-sqlite-db.js';

/**
 * Parameters bound to one statement at most: SQLite's historical SQLITE_MAX_VARIABLE_NUMBER, which
 * every build accepts. Past ~150 rows a statement the gain flattens (142 and 500 rows of notes
 * cost the same), so the older bound costs nothing.
 */
const PARAMS_PER_STATEMENT = 999;

/**
 * Inserts `rows` with `head` (`INSERT INTO t (a, b, …)`) and `tuple` (`(?, ?, …)`, which may hold
 * literals: `('notes', ?, ?, 0)`): one prepared statement of as many tuples as the bound allows,
 * run for each full group, and one for the rest. The rows are bound as one flat list, where a
 * short row would shift its neighbours' values instead of failing, so every row must be as long
 * as the first (and SQLite checks that the tuple takes that many). Answers the rows inserted.
 */
export async function insertValues(tx: SqliteStatements, head: string, tuple: string, rows: readonly (readonly SqlValue[])[]): Promise<{ changes: number }> {
  const width = rows[0]?.length ?? 0;
  for (const row of rows) {
    if (row.length !== width) {
      throw new SqliteError(SQLITE_CODES.RANGE, `rows of ${width} and of ${row.length} values in one insert`, `${head} VALUES ${tuple}`);
    }
  }
  if (rows.length === 0) return { changes: 0 };
  const per = Math.max(1, Math.floor(PARAMS_PER_STATEMENT / Math.max(1, width)));
  const full = rows.length - (rows.length % per);
  let changes = 0;
  if (full > 0) {
    const groups: SqlValue[][] = [];
    for (let start = 0; start < full; start += per) groups.push(flatten(rows, start, start + per, width));
    changes += (await tx.runMany(statement(head, tuple, per), groups)).changes;
  }
  if (full < rows.length) {
    changes += (await tx.runMany(statement(head, tuple, rows.length - full), [flatten(rows, full, rows.length, width)])).changes;
  }
  return { changes };
}

function statement(head: string, tuple: string, count: number): string {
  return `${head} VALUES ${new Array<string>(count).fill(tuple).join(', ')}`;
}

function flatten(rows: readonly (readonly SqlValue[])[], start: number, end: number, width: number): SqlValue[] {
  const values = new Array<SqlValue>((end - start) * width);
  let at = 0;
  for (let r = start; r < end; r++) {
    const row = rows[r] as readonly SqlValue[];
    for (let i = 0; i < width; i++) values[at++] = row[i] as SqlValue;
  }
  return values;
}
