/**
 * The narrow SQLite port the client core is written against (style.md #7). The core never
 * imports wa-sqlite; adapters implement this interface and one conformance suite
 * (test/sqlite-port.test.ts) runs against every adapter.
 *
 * Values are SQLite's own: NULL, INTEGER (number, or bigint outside ±2^53-1), REAL, TEXT, BLOB.
 */

/** A value bound to or read from SQLite. */
export type SqlValue = null | number | bigint | string | Uint8Array;

/** One result row, by column name. */
export type SqlRow = Record<string, SqlValue>;

/** The statements of one connection, usable inside and outside a transaction. */
export interface SqliteStatements {
  /** Runs one or more statements without parameters (DDL, PRAGMA). */
  exec(sql: string): Promise<void>;
  /** Runs one statement with positional `?` parameters; answers the number of changed rows. */
  run(sql: string, params?: readonly SqlValue[]): Promise<{ changes: number }>;
  /** Runs one statement and answers all of its rows. */
  query<T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  /**
   * Prepares one statement once and runs it for every parameter list, in order (the bulk path
   * of apply and hydration). Answers the total number of changed rows.
   */
  runMany(sql: string, paramRows: readonly (readonly SqlValue[])[]): Promise<{ changes: number }>;
}

/** Receives the tables one committed transaction wrote (see `SqliteDb.onCommit`). */
export type CommitListener = (tables: ReadonlySet<string>) => void;

/** One open database. Calls are serialised by the adapter; a transaction holds the connection. */
export interface SqliteDb extends SqliteStatements {
  /**
   * Runs `fn` inside `BEGIN IMMEDIATE … COMMIT`; rolls back when `fn` throws. Other calls on the
   * same `SqliteDb` wait until the transaction ends, so use only `tx` inside `fn`.
   */
  transaction<T>(fn: (tx: SqliteStatements) => Promise<T>): Promise<T>;
  /**
   * The tables one statement reads, as SQLite itself reports them while it prepares the statement
   * (its authorizer's read actions): views, subqueries and CTEs come out as the tables beneath
   * them (view names included), triggers do not count, and nothing is parsed here. The statement
   * is prepared, never run.
   */
  tablesRead(sql: string): Promise<string[]>;
  /**
   * Subscribes to commits: `listener` runs once per committed transaction — one of
   * `transaction()`, or a statement run outside any — with every table it may have written, as
   * SQLite authorized the writes while preparing its statements (the writes of triggers and of
   * foreign-key actions included, DROP TABLE too). It is a superset: a statement that matched no
   * row still names its table, but no write is ever missing. A rolled-back transaction reports
   * nothing. Answers the unsubscribe.
   */
  onCommit(listener: CommitListener): () => void;
  /** Closes the database; later calls fail. */
  close(): Promise<void>;
}
