/**
 * A SQLite port that times every statement the client runs through it, by SQL text: where the
 * client's local time goes (profile-client.ts). Wraps any SqliteDb, transactions included.
 */
import { type SqlRow, type SqlValue, type SqliteDb, type SqliteStatements } from '../../client-web/sqlite/port.js';
import { nowMs } from './stats.js';

export interface SqlSpan {
  calls: number;
  /** Parameter rows (runMany counts each). */
  rows: number;
  ms: number;
}

export class SqlTimings {
  readonly bySql = new Map<string, SqlSpan>();

  async time<T>(sql: string, rows: number, task: () => Promise<T>): Promise<T> {
    const start = nowMs();
    try {
      return await task();
    } finally {
      const key = sql.replace(/\s+/g, ' ').trim();
      const span = this.bySql.get(key) ?? { calls: 0, rows: 0, ms: 0 };
      span.calls++;
      span.rows += rows;
      span.ms += nowMs() - start;
      this.bySql.set(key, span);
    }
  }

  /** The costliest statements, longest first, each with its first `sqlChars` characters. */
  top(n: number, sqlChars = 220): string[] {
    return [...this.bySql]
      .sort((a, b) => b[1].ms - a[1].ms)
      .slice(0, n)
      .map(([sql, s]) => `${s.ms.toFixed(0)} ms, ${s.calls} calls, ${s.rows} rows: ${sql.slice(0, sqlChars)}`);
  }

  reset(): void {
    this.bySql.clear();
  }
}

function timedStatements(inner: SqliteStatements, timings: SqlTimings): SqliteStatements {
  return {
    exec: (sql) => timings.time(sql, 1, () => inner.exec(sql)),
    run: (sql, params) => timings.time(sql, 1, () => inner.run(sql, params)),
    query: <T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[]) => timings.time(sql, 1, () => inner.query<T>(sql, params)),
    runMany: (sql, paramRows) => timings.time(sql, paramRows.length, () => inner.runMany(sql, paramRows)),
  };
}

/** The same database, with every statement (inside transactions too) timed into `timings`. */
export function timedDb(db: SqliteDb, timings: SqlTimings): SqliteDb {
  return {
    ...timedStatements(db, timings),
    transaction: (fn) => db.transaction((tx) => fn(timedStatements(tx, timings))),
    tablesRead: (sql) => db.tablesRead(sql),
    onCommit: (listener) => db.onCommit(listener),
    close: () => db.close(),
  };
}
