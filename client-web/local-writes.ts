/**
 * The database as the application sees it (`client.db`): the same SQLite port, with two additions.
 *
 * - A write (anything but `query`) notifies the sync loop, which syncs after a quiet moment.
 *   The client's own statements use the database underneath and notify nothing.
 * - A write refused by the client's check triggers (install.ts: a value that is not its column's
 *   local form, such as text in an INTEGER column or an upper-case UUID key) fails with
 *   `ClientError` `invalid_local_row`, its details naming table, key, column and reason, instead
 *   of a raw SQLite error.
 */
import { ClientError, ClientErrorCode } from './errors.js';
import { type SqlRow, type SqlValue, type SqliteDb, type SqliteStatements } from './sqlite/port.js';

/** Opens the message of a check trigger's refusal, so the wrapper can tell it from other failures. */
export const INVALID_LOCAL_ROW_MARK = 'lockstep invalid_local_row';

/** What a refused local write names (the details of its `invalid_local_row`). */
export interface LocalRowRefusal {
  readonly table: string;
  readonly key: string | number | null;
  readonly column: string;
  readonly reason: string;
}

/**
 * The refusal a trigger's message carries: `<mark>: {json}`, quoted by SQLite as an SQL string
 * (quotes doubled) inside its error message (install.ts), or null when it cannot be read.
 */
export function refusalOf(message: string): LocalRowRefusal | null {
  const at = message.indexOf(INVALID_LOCAL_ROW_MARK);
  if (at < 0) return null;
  const quoted = message.slice(at + INVALID_LOCAL_ROW_MARK.length + 2).replace(/ \[sql: .*$/s, '').replace(/'$/, '');
  try {
    const parsed = JSON.parse(quoted.replaceAll("''", "'")) as LocalRowRefusal;
    return typeof parsed.table === 'string' && typeof parsed.column === 'string' ? parsed : null;
  } catch {
    return null;
  }
}

function translate(error: unknown): unknown {
  if (error instanceof Error && error.message.includes(INVALID_LOCAL_ROW_MARK)) {
    const refusal = refusalOf(error.message);
    const text = refusal
      ? `${refusal.table} ${JSON.stringify(refusal.key)}: column ${refusal.column} ${refusal.reason}`
      : error.message.slice(error.message.indexOf(INVALID_LOCAL_ROW_MARK) + INVALID_LOCAL_ROW_MARK.length + 2).replace(/ \[sql: .*$/s, '');
    return new ClientError(ClientErrorCode.invalidLocalRow, `refused a local write: ${text}`, refusal ?? undefined, { cause: error });
  }
  return error;
}

async function guarded<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw translate(error);
  }
}

function statements(inner: SqliteStatements): SqliteStatements {
  return {
    exec: (sql: string) => guarded(() => inner.exec(sql)),
    run: (sql: string, params?: readonly SqlValue[]) => guarded(() => inner.run(sql, params)),
    query: <T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[]) => inner.query<T>(sql, params),
    runMany: (sql: string, rows: readonly (readonly SqlValue[])[]) => guarded(() => inner.runMany(sql, rows)),
  };
}

/** `db` for the application: writes call `onWrite` once they succeeded. */
export function applicationDb(db: SqliteDb, onWrite: () => void): SqliteDb {
  const wrote = <T>(value: T): T => {
    onWrite();
    return value;
  };
  const s = statements(db);
  return {
    exec: (sql) => s.exec(sql).then(wrote),
    run: (sql, params) => s.run(sql, params).then(wrote),
    query: (sql, params) => s.query(sql, params),
    runMany: (sql, rows) => s.runMany(sql, rows).then(wrote),
    transaction: (fn) => guarded(() => db.transaction((tx) => fn(statements(tx)))).then(wrote),
    tablesRead: (sql) => db.tablesRead(sql),
    onCommit: (listener) => db.onCommit(listener),
    close: () => db.close(),
  };
}
