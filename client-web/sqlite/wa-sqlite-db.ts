/**
 * The SQLite port (port.ts) over one wa-sqlite connection.
 *
 * wa-sqlite allows one operation at a time per connection (with the Asyncify build a second call
 * while one is suspended corrupts its state), so every call goes through a promise queue; a
 * transaction holds the queue from BEGIN to COMMIT/ROLLBACK and its own statements go through a
 * queue of their own.
 *
 * At open the adapter runs `PRAGMA foreign_keys = ON`: the client relies on local FK cascades, and
 * SQLite leaves enforcement off unless each connection asks for it.
 *
 * Give each connection its own wa-sqlite module (Factory instance): the SQLiteAPI reads
 * out-parameters from one scratch word per module after an `await`, so two connections of one
 * module that are busy at the same time can receive each other's statement handles.
 *
 * TEXT goes in and out with its length (text-bytes.ts), never NUL-terminated: wa-sqlite's own
 * bind_text and column_text cut a string at U+0000 and mangle a lone surrogate, so the adapter
 * binds and reads text through the module's raw exports. A string comes back exactly as it was
 * given; which text may be synced is decided by the capture triggers (client-web/codec.ts).
 *
 * Which tables a statement reads or writes comes from SQLite's authorizer, installed once per
 * connection: SQLite calls it while it prepares a statement, for every table and column the
 * statement (and the triggers and foreign-key actions it sets off) will touch. Writes collected
 * that way are reported per committed transaction (`onCommit`, the base of live queries); reads
 * are collected only on request (`tablesRead`).
 *
 * Statements of `run`, `query` and `runMany` stay prepared, a few dozen per connection (most
 * recently used kept): the client runs the same statements at every sync, and preparing a write
 * to a table with capture triggers compiles the triggers too. A cached statement keeps the tables
 * its preparation wrote (the authorizer does not run again), and adds any a re-preparation after a
 * schema change reports.
 */
import * as SQLite from 'wa-sqlite';
import { isWellFormed, maxTextBytes, readText, writeText } from './text-bytes.js';
import { type CommitListener, type SqlRow, type SqlValue, type SqliteDb, type SqliteStatements } from './port.js';

/** SQLite result codes this adapter names itself (https://sqlite.org/rescode.html). */
export const SQLITE_CODES = {
  ERROR: 1,
  BUSY: 5,
  CONSTRAINT: 19,
  NOMEM: 7,
  MISUSE: 21,
  RANGE: 25,
} as const;

const sqlPreviewChars = 200;

/** A failed SQLite call: the SQLite result code, SQLite's message and the statement. */
export class SqliteError extends Error {
  override readonly name = 'SqliteError';
  /** The primary result code (low byte), e.g. 19 for SQLITE_CONSTRAINT. */
  readonly code: number;
  /**
   * The extended result code (e.g. 1555 SQLITE_CONSTRAINT_PRIMARYKEY) when SQLite reported one.
   * The wa-sqlite 1.0 build does not turn extended result codes on, so this is usually undefined.
   */
  readonly extendedCode: number | undefined;
  /** The first characters of the statement that failed, if any. */
  readonly sql: string | undefined;

  constructor(resultCode: number, message: string, sql?: string, options?: { cause: unknown }) {
    const preview = sql === undefined ? '' : ` [sql: ${preview200(sql)}]`;
    super(`SQLite error ${resultCode}: ${message}${preview}`, options);
    this.code = resultCode & 0xff;
    this.extendedCode = resultCode > 0xff ? resultCode : undefined;
    this.sql = sql === undefined ? undefined : preview200(sql);
  }

  /** True for SQLITE_CONSTRAINT and its extended codes (unique, FK, NOT NULL, CHECK). */
  get isConstraint(): boolean {
    return this.code === SQLITE_CODES.CONSTRAINT;
  }
}

function preview200(sql: string): string {
  const flat = sql.trim().replace(/\s+/g, ' ');
  return flat.length > sqlPreviewChars ? `${flat.slice(0, sqlPreviewChars)}…` : flat;
}

/**
 * The few raw exports of the Emscripten module the adapter uses where the SQLiteAPI falls short.
 * wa-sqlite's bind_blob allocates byteLength bytes, and sqlite3_malloc(0) is NULL, which SQLite
 * binds as NULL: an empty Uint8Array would come back as null. With the module an empty blob is
 * bound from a one-byte scratch buffer with length 0. Text is bound and read with its length
 * (see the file comment), from the module's heap.
 */
export interface WaSqliteModule {
  /** The wasm memory; a new view after every growth, so read it after each allocation. */
  readonly HEAPU8: Uint8Array;
  _sqlite3_malloc(bytes: number): number;
  _sqlite3_free(ptr: number): void;
  _sqlite3_bind_blob(stmt: number, index: number, ptr: number, bytes: number, destructor: number): number;
  _sqlite3_bind_text(stmt: number, index: number, ptr: number, bytes: number, destructor: number): number;
  _sqlite3_column_text(stmt: number, column: number): number;
  _sqlite3_column_bytes(stmt: number, column: number): number;
  /** Synchronous in the synchronous build, the only one Lockstep loads (see runManyNow). */
  _sqlite3_step(stmt: number): number;
  _sqlite3_reset(stmt: number): number;
  _sqlite3_clear_bindings(stmt: number): number;
  /** The address of sqlite3_free, the destructor that hands a bound buffer to SQLite. */
  _getSqliteFree(): number;
}

export interface WaSqliteDbOptions {
  /** The Emscripten module behind `sqlite3`; binds empty blobs and exact text (see WaSqliteModule). */
  module: WaSqliteModule;
  /** Runs after the connection is closed (e.g. to release a VFS). */
  onClose?: () => void | Promise<void>;
  /**
   * Page cache of the connection in KiB (default 32 MiB). SQLite's own 2 MiB spills during the one
   * transaction that applies a hydration, and on OPFS every spill is I/O: 32 MiB applied 20,000
   * rows in about a quarter of the time in chromium.
   */
  cacheSizeKiB?: number;
}

const DEFAULT_CACHE_KIB = 32 * 1024;

/**
 * Prepared statements kept per connection. The client's own statements number a few dozen;
 * an application's queries beyond that are prepared again when they come back.
 */
export const STATEMENT_CACHE_SIZE = 64;

/** sqlite3_bind_text's destructor for a buffer the caller keeps valid while SQLite may read it. */
const SQLITE_STATIC = 0;

/** Runs tasks one at a time, in call order; a failed task does not stop the next. */
class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  push<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/** Authorizer action codes (https://sqlite.org/c3ref/c_alter_table.html) the adapter listens to. */
const AUTH = { DELETE: 9, INSERT: 18, READ: 20, UPDATE: 23, ALTER_TABLE: 26 } as const;
/**
 * Actions that write the table (or view) named by their first argument: rows, and the table's
 * existence or definition (CREATE and DROP of tables and views, temporary ones included).
 */
const WRITES_FIRST = new Set([AUTH.DELETE, AUTH.INSERT, AUTH.UPDATE, 2, 4, 6, 8, 11, 13, 15, 17]);

const int32Min = -0x8000_0000;
const int32Max = 0x7fff_ffff;

/** Statements that change rows; only after these is sqlite3_changes() about this statement. */
const dmlStart = /^(?:insert|update|delete|replace)\b/i;
const leadingNoise = /^(?:\s+|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)+/;

type ChangeKind = 'dml' | 'none' | 'unknown';

/** One statement kept prepared (see the file comment). */
interface CachedStatement {
  readonly stmt: number;
  /** Every table the statement may write, as the authorizer reported it at each preparation. */
  readonly writes: Set<string>;
}

function changeKind(sql: string): ChangeKind {
  const head = sql.replace(leadingNoise, '');
  if (dmlStart.test(head)) return 'dml';
  // A WITH prefix may lead to a SELECT or to DML; count those with total_changes().
  if (/^with\b/i.test(head)) return 'unknown';
  return 'none';
}

/**
 * Wraps an open wa-sqlite connection. `db` is the handle from `sqlite3.open_v2`; the adapter owns
 * it from now on (close() closes it).
 */
export function createWaSqliteDb(sqlite3: SQLiteAPI, db: number, options: WaSqliteDbOptions): SqliteDb {
  const queue = new SerialQueue();
  const module = options.module;
  const sqliteFree = module._getSqliteFree();
  let closed = false;
  let emptyBlobPtr = 0;
  /** Tables written since the last commit (or the last statement outside a transaction). */
  let written = new Set<string>();
  /** While tablesRead() prepares its statement: the tables read; writes are not recorded then. */
  let reading: Set<string> | null = null;
  const commitListeners = new Set<CommitListener>();
  /** Prepared statements by SQL text, least recently used first (Map order). */
  const cache = new Map<string, CachedStatement>();
  /** While a cached statement is prepared or stepped: its write set, which a re-preparation extends. */
  let preparingWrites: Set<string> | null = null;

  function authorize(_user: unknown, action: number, first: string | null, second: string | null): number {
    if (reading) {
      if (action === AUTH.READ && first !== null) reading.add(first);
      return SQLite.SQLITE_OK;
    }
    // ALTER TABLE names the database first and the table second.
    const table = WRITES_FIRST.has(action) ? first : action === AUTH.ALTER_TABLE ? second : null;
    if (table !== null) {
      written.add(table);
      preparingWrites?.add(table);
    }
    return SQLite.SQLITE_OK;
  }

  /** Reports what the ended transaction wrote; nothing after a rollback (`committed` false). */
  function settle(committed: boolean): void {
    if (written.size === 0) return;
    const tables = written;
    written = new Set();
    if (!committed) return;
    for (const listener of commitListeners) {
      try {
        listener(tables);
      } catch (error) {
        // A listener's bug must not break the database or the other listeners.
        console.error('lockstep: a commit listener threw', error);
      }
    }
  }

  /** After a call outside `transaction()`: a statement outside any transaction has committed by now. */
  function settleIfAutocommit(): void {
    if (written.size > 0 && sqlite3.get_autocommit(db)) settle(true);
  }

  /** wa-sqlite's SQLiteError (no statement, untyped code) as our SqliteError; others unchanged. */
  function fail(error: unknown, sql?: string): unknown {
    if (!(error instanceof SQLite.SQLiteError)) return error;
    const code = typeof error.code === 'number' ? error.code : SQLITE_CODES.ERROR;
    return new SqliteError(code, error.message, sql, { cause: error });
  }

  function closedError(): SqliteError {
    return new SqliteError(SQLITE_CODES.MISUSE, closed ? 'database is closed' : 'transaction has ended (use tx only inside fn)');
  }

  function bindValue(stmt: number, index: number, value: SqlValue, sql: string): void {
    let rc: number;
    if (value === null) rc = sqlite3.bind_null(stmt, index);
    else if (typeof value === 'number') {
      if (Number.isInteger(value)) {
        // wa-sqlite's bind() sends any integer outside int32 as a double; keep it INTEGER.
        if (value >= int32Min && value <= int32Max) rc = sqlite3.bind_int(stmt, index, value);
        else if (Number.isSafeInteger(value)) rc = sqlite3.bind_int64(stmt, index, BigInt(value));
        else rc = sqlite3.bind_double(stmt, index, value);
      } else rc = sqlite3.bind_double(stmt, index, value);
    } else if (typeof value === 'string') rc = bindText(stmt, index, value);
    else if (typeof value === 'bigint') rc = sqlite3.bind_int64(stmt, index, value);
    else if (value instanceof Uint8Array) {
      if (value.byteLength === 0) rc = bindEmptyBlob(stmt, index);
      else rc = sqlite3.bind_blob(stmt, index, value);
    } else {
      throw new SqliteError(SQLITE_CODES.MISUSE, `parameter ${index} is a ${typeof value}, not a SqlValue`, sql);
    }
    // bind_int64 answers SQLITE_RANGE instead of throwing for values outside int64.
    if (rc !== SQLite.SQLITE_OK) throw new SqliteError(rc, `cannot bind parameter ${index}`, sql);
  }

  function emptyPtr(): number {
    if (emptyBlobPtr === 0) emptyBlobPtr = module._sqlite3_malloc(1);
    return emptyBlobPtr;
  }

  function bindEmptyBlob(stmt: number, index: number): number {
    // SQLITE_STATIC (0): SQLite reads zero bytes from the pointer and never frees it.
    return module._sqlite3_bind_blob(stmt, index, emptyPtr(), 0, 0);
  }

  /** Text with its byte length, in a buffer SQLite frees (sqlite3_free as the destructor). */
  function bindText(stmt: number, index: number, value: string): number {
    if (value.length === 0) return module._sqlite3_bind_text(stmt, index, emptyPtr(), 0, 0);
    const capacity = maxTextBytes(value);
    const ptr = module._sqlite3_malloc(capacity);
    if (ptr === 0) return SQLITE_CODES.NOMEM;
    const written = writeText(value, module.HEAPU8.subarray(ptr, ptr + capacity));
    return module._sqlite3_bind_text(stmt, index, ptr, written, sqliteFree);
  }

  function readTextColumn(stmt: number, i: number): string {
    // sqlite3_column_text first, then _bytes (SQLite's documented order: the length is of that text).
    const ptr = module._sqlite3_column_text(stmt, i);
    const bytes = module._sqlite3_column_bytes(stmt, i);
    return ptr === 0 ? '' : readText(module.HEAPU8.subarray(ptr, ptr + bytes));
  }

  /**
   * The bulk path's text arena (runManyNow): each row's texts are written into one buffer and
   * bound SQLITE_STATIC, so SQLite reads them in place instead of each value taking a malloc here
   * and a free in SQLite. Every parameter is bound again before the next step, so the arena is
   * overwritten only after the step that read it; it is freed after the statement is finalized.
   */
  interface TextArena {
    ptr: number;
    bytes: number;
  }

  function arenaOf(arena: TextArena, bytes: number): number {
    if (bytes <= arena.bytes) return arena.ptr;
    const size = Math.max(bytes, arena.bytes * 2, 64 * 1024);
    const ptr = module._sqlite3_malloc(size);
    if (ptr === 0) throw new SqliteError(SQLITE_CODES.NOMEM, `cannot allocate ${size} bytes to bind text`);
    if (arena.ptr !== 0) module._sqlite3_free(arena.ptr);
    arena.ptr = ptr;
    arena.bytes = size;
    return ptr;
  }

  /** bindAll for the bulk path: text from the arena, every other value as bindValue binds it. */
  function bindRow(stmt: number, params: readonly SqlValue[], sql: string, count: number, arena: TextArena): void {
    if (params.length !== count) {
      throw new SqliteError(SQLITE_CODES.RANGE, `statement has ${count} parameters, got ${params.length}`, sql);
    }
    let bytes = 0;
    for (let i = 0; i < count; i++) {
      const value = params[i];
      if (typeof value === 'string') bytes += maxTextBytes(value);
    }
    let at = bytes === 0 ? 0 : arenaOf(arena, bytes);
    const end = at + bytes;
    for (let i = 0; i < count; i++) {
      const value = params[i] as SqlValue;
      if (typeof value !== 'string' || value.length === 0) {
        bindValue(stmt, i + 1, value, sql);
        continue;
      }
      // The view is read each time: binding a blob allocates, and a memory growth replaces it.
      const written = writeText(value, module.HEAPU8.subarray(at, end));
      const rc = module._sqlite3_bind_text(stmt, i + 1, at, written, SQLITE_STATIC);
      if (rc !== SQLite.SQLITE_OK) throw new SqliteError(rc, `cannot bind parameter ${i + 1}`, sql);
      at += written;
    }
  }

  function bindAll(stmt: number, params: readonly SqlValue[], sql: string, count: number): void {
    if (params.length !== count) {
      throw new SqliteError(SQLITE_CODES.RANGE, `statement has ${count} parameters, got ${params.length}`, sql);
    }
    for (let i = 0; i < count; i++) bindValue(stmt, i + 1, params[i] as SqlValue, sql);
  }

  function readColumn(stmt: number, i: number): SqlValue {
    switch (sqlite3.column_type(stmt, i)) {
      case SQLite.SQLITE_NULL:
        return null;
      case SQLite.SQLITE_INTEGER: {
        // column() answers a number when the high word fits ±2^53, which lets -2^53 through.
        const value = sqlite3.column(stmt, i) as number | bigint;
        if (typeof value === 'number' && !Number.isSafeInteger(value)) return sqlite3.column_int64(stmt, i);
        return value;
      }
      case SQLite.SQLITE_FLOAT:
        return sqlite3.column_double(stmt, i);
      case SQLite.SQLITE_TEXT:
        return readTextColumn(stmt, i);
      default:
        // A view into wasm memory, invalid after the next step or a memory growth: copy it out.
        return sqlite3.column_blob(stmt, i).slice();
    }
  }

  /**
   * SQL text goes through wa-sqlite's NUL-terminated strings: a U+0000 would end the statement
   * early (a script cut short) and a lone surrogate would be mangled. Values belong in parameters,
   * which carry any text exactly.
   */
  function checkSqlText(sql: string): void {
    if (sql.includes('\u0000') || !isWellFormed(sql)) {
      throw new SqliteError(SQLITE_CODES.MISUSE, 'SQL text cannot contain U+0000 or a lone surrogate: bind such text as a parameter', sql);
    }
  }

  /** Prepares exactly one statement; more than one in `sql` is a misuse. */
  async function prepare(sql: string): Promise<number> {
    checkSqlText(sql);
    const str = sqlite3.str_new(db, sql);
    try {
      const first = await sqlite3.prepare_v2(db, sqlite3.str_value(str));
      if (!first) throw new SqliteError(SQLITE_CODES.MISUSE, 'no statement to run', sql);
      const rest = await sqlite3.prepare_v2(db, first.sql).catch(async (error: unknown) => {
        await sqlite3.finalize(first.stmt);
        throw error;
      });
      if (rest) {
        await sqlite3.finalize(rest.stmt);
        await sqlite3.finalize(first.stmt);
        throw new SqliteError(SQLITE_CODES.MISUSE, 'more than one statement; use exec() for scripts', sql);
      }
      return first.stmt;
    } finally {
      sqlite3.str_finish(str);
    }
  }

  /**
   * The statement for `sql`, prepared once and kept (see the file comment). Its writes count as
   * made now, as a fresh preparation's would. Run it through `withStatement`.
   */
  async function cachedStatement(sql: string): Promise<CachedStatement> {
    const hit = cache.get(sql);
    if (hit) {
      cache.delete(sql);
      cache.set(sql, hit);
      for (const table of hit.writes) written.add(table);
      return hit;
    }
    const writes = new Set<string>();
    preparingWrites = writes;
    let stmt: number;
    try {
      stmt = await prepare(sql);
    } finally {
      preparingWrites = null;
    }
    const entry: CachedStatement = { stmt, writes };
    cache.set(sql, entry);
    if (cache.size > STATEMENT_CACHE_SIZE) {
      const [oldestSql, oldest] = cache.entries().next().value as [string, CachedStatement];
      cache.delete(oldestSql);
      await sqlite3.finalize(oldest.stmt);
    }
    return entry;
  }

  /**
   * Runs `use` on the cached statement for `sql`, then resets it and clears its bindings: a kept
   * statement must not hold a read transaction open, nor point into a buffer freed after the call.
   */
  async function withStatement<T>(sql: string, use: (entry: CachedStatement) => Promise<T>): Promise<T> {
    const entry = await cachedStatement(sql);
    preparingWrites = entry.writes;
    try {
      return await use(entry);
    } finally {
      preparingWrites = null;
      module._sqlite3_reset(entry.stmt);
      module._sqlite3_clear_bindings(entry.stmt);
    }
  }

  async function finalizeCached(): Promise<void> {
    const entries = [...cache.values()];
    cache.clear();
    for (const entry of entries) await sqlite3.finalize(entry.stmt);
  }

  async function totalChanges(): Promise<number> {
    const rows = await queryNow('SELECT total_changes() AS n');
    return Number(rows[0]?.['n'] ?? 0);
  }

  /**
   * Statements step through the module's own sqlite3_step and sqlite3_reset, not wa-sqlite's
   * async wrappers: both builds Lockstep loads (Node, and the OPFS worker's access-handle pool)
   * are the synchronous one, so a promise per row bought nothing and cost ~1.5 µs a row (a
   * 100k-row insert 335 → 190 ms). A step that failed is read back through the wrapper's reset,
   * which throws it with SQLite's message.
   */
  async function stepFailed(stmt: number, rc: number, sql: string): Promise<never> {
    await sqlite3.reset(stmt);
    throw new SqliteError(rc, `statement failed (code ${rc})`, sql);
  }

  async function execNow(sql: string): Promise<void> {
    checkSqlText(sql);
    try {
      await sqlite3.exec(db, sql);
    } catch (error) {
      throw fail(error, sql);
    }
  }

  async function runNow(sql: string, params: readonly SqlValue[]): Promise<{ changes: number }> {
    return runManyNow(sql, [params]);
  }

  async function queryNow<T extends SqlRow>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    try {
      return await withStatement(sql, async ({ stmt }) => {
        bindAll(stmt, params, sql, sqlite3.bind_parameter_count(stmt));
        const rows: T[] = [];
        let rc = module._sqlite3_step(stmt);
        // The names after the first step: a re-preparation (a schema change) may have changed them.
        const names = sqlite3.column_names(stmt);
        for (; rc === SQLite.SQLITE_ROW; rc = module._sqlite3_step(stmt)) {
          const row: SqlRow = {};
          for (let i = 0; i < names.length; i++) row[names[i] as string] = readColumn(stmt, i);
          rows.push(row as T);
        }
        if (rc !== SQLite.SQLITE_DONE) await stepFailed(stmt, rc, sql);
        return rows;
      });
    } catch (error) {
      throw fail(error, sql);
    }
  }

  // The bulk path: one prepare, then bind/step/reset per row, no per-row arrays or closures.
  async function runManyNow(sql: string, paramRows: readonly (readonly SqlValue[])[]): Promise<{ changes: number }> {
    const arena: TextArena = { ptr: 0, bytes: 0 };
    try {
      const kind = changeKind(sql);
      const before = kind === 'unknown' ? await totalChanges() : 0;
      let changes = await withStatement(sql, async ({ stmt }) => {
        const count = sqlite3.bind_parameter_count(stmt);
        let sum = 0;
        for (let r = 0; r < paramRows.length; r++) {
          bindRow(stmt, paramRows[r] as readonly SqlValue[], sql, count, arena);
          // The module's own step and reset (see stepFailed).
          let rc: number;
          while ((rc = module._sqlite3_step(stmt)) === SQLite.SQLITE_ROW) {
            // Rows of a DML ... RETURNING are not part of runMany()'s answer.
          }
          if (rc !== SQLite.SQLITE_DONE) await stepFailed(stmt, rc, sql);
          if (kind === 'dml') sum += sqlite3.changes(db);
          module._sqlite3_reset(stmt);
        }
        return sum;
      });
      if (kind === 'unknown') changes = (await totalChanges()) - before;
      return { changes };
    } catch (error) {
      throw fail(error, sql);
    } finally {
      // withStatement cleared the bindings that pointed into the arena.
      if (arena.ptr !== 0) module._sqlite3_free(arena.ptr);
    }
  }

  function statements(isOpen: () => boolean, run: <T>(task: () => Promise<T>) => Promise<T>): SqliteStatements {
    const guard = <T>(task: () => Promise<T>): Promise<T> => (isOpen() ? run(task) : Promise.reject(closedError()));
    return {
      exec: (sql) => guard(() => execNow(sql)),
      run: (sql, params = []) => guard(() => runNow(sql, params)),
      query: <T extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = []) => guard(() => queryNow<T>(sql, params)),
      runMany: (sql, paramRows) => guard(() => runManyNow(sql, paramRows)),
    };
  }

  async function transactionNow<T>(fn: (tx: SqliteStatements) => Promise<T>): Promise<T> {
    await execNow('BEGIN IMMEDIATE');
    // The transaction's own statements are serialised too, in case fn issues them concurrently.
    const inner = new SerialQueue();
    let active = true;
    // Not `!closed`: close() called meanwhile waits for this transaction, which must still finish.
    const tx = statements(() => active, (task) => inner.push(task));
    try {
      const result = await fn(tx);
      await inner.push(() => execNow('COMMIT'));
      active = false;
      settle(true);
      return result;
    } catch (error) {
      active = false;
      // Some errors (SQLITE_FULL, a failed COMMIT of a deferred FK…) may have ended it already.
      await inner.push(async () => {
        if (!sqlite3.get_autocommit(db)) await execNow('ROLLBACK').catch(() => undefined);
      });
      settle(false);
      throw error;
    } finally {
      active = false;
    }
  }

  // First in the queue, so every later call runs with enforcement on; if it cannot be turned on,
  // every call fails rather than running without the cascades the client relies on.
  let openError: unknown;
  void queue.push(async () => {
    try {
      sqlite3.set_authorizer(db, authorize, null);
      await execNow('PRAGMA foreign_keys = ON');
      await execNow(`PRAGMA cache_size = -${Math.max(64, Math.floor(options.cacheSizeKiB ?? DEFAULT_CACHE_KIB))}`);
      const rows = await queryNow('PRAGMA foreign_keys');
      if (rows[0]?.['foreign_keys'] !== 1) throw new SqliteError(SQLITE_CODES.ERROR, 'this SQLite build cannot enforce foreign keys');
    } catch (error) {
      openError = error;
    }
  });
  const afterOpen = <T>(task: () => Promise<T>) => (): Promise<T> => (openError === undefined ? task() : Promise.reject(openError));
  // A call outside transaction() may commit by itself (autocommit), or end a transaction the app
  // opened with its own BEGIN: either way its writes are reported once it returns.
  const settled = <T>(task: () => Promise<T>) => async (): Promise<T> => {
    try {
      return await task();
    } finally {
      settleIfAutocommit();
    }
  };
  const outer = statements(() => !closed, (task) => queue.push(afterOpen(settled(task))));

  async function tablesReadNow(sql: string): Promise<string[]> {
    const found = new Set<string>();
    reading = found;
    try {
      const stmt = await prepare(sql);
      await sqlite3.finalize(stmt);
    } catch (error) {
      throw fail(error, sql);
    } finally {
      reading = null;
    }
    return [...found];
  }

  return {
    ...outer,
    transaction: <T>(fn: (tx: SqliteStatements) => Promise<T>) =>
      closed ? Promise.reject(closedError()) : queue.push(afterOpen(() => transactionNow(fn))),
    tablesRead: (sql) => (closed ? Promise.reject(closedError()) : queue.push(afterOpen(() => tablesReadNow(sql)))),
    onCommit: (listener) => {
      commitListeners.add(listener);
      return () => void commitListeners.delete(listener);
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await queue.push(async () => {
        try {
          await finalizeCached();
          await sqlite3.close(db);
        } catch (error) {
          throw fail(error);
        } finally {
          await options.onClose?.();
        }
      });
    },
  };
}
