/**
 * The database as the application sees it (`client.db`): the same SQLite port, with two additions.
 *
 * - A write (anything but `query`) notifies the sync loop, which syncs after a quiet moment.
 *   The client's own statements use the database underneath and notify nothing.
 * - A write refused by the client's key guard (install.ts: a key the wire would change, such as
 *   an upper-case UUID) fails with `ClientError` `invalid_local_row` instead of a raw SQLite error.
 */
import { ClientError, ClientErrorCode } from './errors.js';
import { type SqlRow, type SqlValue, type SqliteDb, type SqliteStatements } from './sqlite/port.js';

/** Opens the message of a guard trigger's RAISE, so the wrapper can tell it from other failures. */
export const INVALID_LOCAL_ROW_MARK = 'lockstep invalid_local_row';

function translate(error: unknown): unknown {
  if (error instanceof Error && error.message.includes(INVALID_LOCAL_ROW_MARK)) {
    const detail = error.message.slice(error.message.indexOf(INVALID_LOCAL_ROW_MARK) + INVALID_LOCAL_ROW_MARK.length + 2).replace(/ \[sql: .*$/s, '');
    return new ClientError(ClientErrorCode.invalidLocalRow, `refused a local write: ${detail}`, undefined, { cause: error });
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
