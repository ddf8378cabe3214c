/**
 * The SQLite port in the browser, for a dedicated Web Worker: wa-sqlite's synchronous build over
 * AccessHandlePoolVFS, which keeps the database in a pool of OPFS files opened once with
 * createSyncAccessHandle (a worker-only API), with its contiguous writes combined (opfs-vfs.ts).
 * No Asyncify build is needed: every VFS call is synchronous once the pool is ready.
 *
 * Bundling: the wa-sqlite module finds its wasm at `new URL('wa-sqlite.wasm', import.meta.url)`,
 * i.e. next to the bundled worker script. esbuild does not copy that asset, so the demo build
 * copies node_modules/wa-sqlite/dist/wa-sqlite.wasm next to the worker bundle (dev/build-demo.ts),
 * or passes `wasmUrl` where it serves the file from elsewhere. On the default path the module uses
 * WebAssembly.instantiateStreaming, so the server must answer with `Content-Type:
 * application/wasm` (its fallback does not work in a module worker); with `wasmUrl` this file
 * fetches the bytes itself and any content type works.
 *
 * Journal: the database runs in WAL mode with `locking_mode = EXCLUSIVE` (see `journalMode`).
 * Exactly one worker opens a database (the Web Lock and the exclusive access handles already see to
 * it), so the connection holds its lock for its life: SQLite keeps its page cache across
 * transactions instead of reading the header again before each one, and WAL needs no shared
 * memory (this VFS has none). A small commit appends its pages to the WAL in one write, where the
 * rollback journal created, wrote twice, flushed three times and deleted a journal file: six
 * flushes and some thirty sync access handle calls per one-row transaction, each a message to the
 * browser process when OPFS is in memory (a private window).
 *
 * Durability (`flush`): by default (`soon`) SQLite runs with `synchronous = NORMAL`: a COMMIT
 * returns once its WAL frames are written to the OPFS file (the VFS writes gathered bytes at the
 * end of every transaction), and the files are flushed (an fsync, 1-5 ms on a busy disk)
 * `WAL_FLUSH_DELAY_MS` later, off the way of the app's write and of the sync that follows it. So a
 * transaction the app saw committed survives a reload, a closed or crashed tab and a browser crash
 * (the bytes are the operating system's once written; a private window's OPFS lives in the browser
 * process); only an operating-system crash or a power loss within those milliseconds can roll back
 * the last transactions, and never corrupts the database: WAL frames are checksummed, recovery
 * stops at the last whole commit, and the database file changes only in checkpoints of flushed
 * frames. The sync protocol takes such a rollback as it takes a restored backup: a push the server
 * already has is answered `already_committed`, a lost checkpoint pulls again, a reused source
 * bundle id is refused and recovered by rotating the source, local changes kept. `commit` flushes
 * before every COMMIT returns (`synchronous = FULL`), a power loss then loses nothing committed.
 * With the rollback journal it is always `commit` (NORMAL there can corrupt on a power loss).
 */
import SQLiteESMFactory from 'wa-sqlite/dist/wa-sqlite.mjs';
import * as SQLite from 'wa-sqlite';
import { CombiningAccessHandlePoolVFS } from './opfs-vfs.js';
import { type SqliteDb } from './port.js';
import { createWaSqliteDb, SqliteError, SQLITE_CODES, type WaSqliteModule } from './wa-sqlite-db.js';

export interface OpfsSqliteOptions {
  /** Where to fetch wa-sqlite.wasm; default: next to the wa-sqlite module (see above). */
  wasmUrl?: string | URL;
  /**
   * `wal` (the default, see above) or `delete`: SQLite's rollback journal, which this adapter
   * used before it had the option (still with the exclusive lock). A database once opened in WAL
   * mode stays in it (the mode is in its header), and the earlier adapter cannot open it: pass
   * `delete` for a database an earlier version of the app must still open, or to measure.
   */
  journalMode?: 'wal' | 'delete';
  /**
   * When a WAL commit reaches the disk (see above): `soon` (the default), a few milliseconds after
   * COMMIT returns; `commit`, before it returns (a flush per commit on the app's and the sync's way).
   */
  flush?: 'soon' | 'commit';
}

/** The WAL file is truncated to this after a checkpoint (a hydration's one transaction can make it large). */
const WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024;
/** With `flush: 'soon'`, how long after a commit the files are flushed (later commits share the flush). */
const WAL_FLUSH_DELAY_MS = 10;

const databaseNamePattern = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * Opens (creating if needed) the database `name`, stored in the OPFS directory
 * `lockstep/<name>`, with foreign keys on (see createWaSqliteDb).
 *
 * AccessHandlePoolVFS registers under one fixed VFS name and holds exclusive access handles on
 * its directory, so each call gets its own wa-sqlite module and VFS; close() releases the
 * handles, after which the same name can be opened again (e.g. by the next worker).
 */
export async function openOpfsSqlite(name: string, options: OpfsSqliteOptions = {}): Promise<SqliteDb> {
  if (!databaseNamePattern.test(name)) {
    throw new SqliteError(SQLITE_CODES.MISUSE, `database name must match ${databaseNamePattern.source}: ${JSON.stringify(name)}`);
  }
  const config: { wasmBinary?: ArrayBuffer } = {};
  if (options.wasmUrl !== undefined) {
    const response = await fetch(options.wasmUrl);
    if (!response.ok) throw new Error(`cannot fetch ${String(options.wasmUrl)}: HTTP ${response.status}`);
    config.wasmBinary = await response.arrayBuffer();
  }
  const module = (await SQLiteESMFactory(config)) as WaSqliteModule;
  const sqlite3 = SQLite.Factory(module);

  const vfs = new CombiningAccessHandlePoolVFS(`lockstep/${name}`);
  try {
    // Rejects when OPFS or createSyncAccessHandle is unavailable (not a dedicated worker), or
    // when another tab's worker already holds the directory's access handles.
    await vfs.isReady;
    sqlite3.vfs_register(vfs, false);
    // A short path inside the VFS: the wa-sqlite 1.0 glue allots 64 bytes for VFS paths.
    const db = await sqlite3.open_v2('/lockstep.sqlite3', SQLite.SQLITE_OPEN_CREATE | SQLite.SQLITE_OPEN_READWRITE, vfs.name);
    let soon = false;
    try {
      // Exclusive first: WAL without shared memory needs it before the WAL is first touched.
      await sqlite3.exec(db, 'PRAGMA locking_mode = EXCLUSIVE');
      await sqlite3.exec(db, `PRAGMA journal_mode = ${options.journalMode === 'delete' ? 'DELETE' : 'WAL'}`);
      await sqlite3.exec(db, `PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
      const mode: unknown[] = [];
      await sqlite3.exec(db, 'PRAGMA journal_mode', (row) => void mode.push(row[0]));
      soon = mode[0] === 'wal' && options.flush !== 'commit';
      await sqlite3.exec(db, `PRAGMA synchronous = ${soon ? 'NORMAL' : 'FULL'}`);
      // Temporary files in memory: the statement journal of a statement that writes many rows (an
      // insert of many rows a statement, insert-values.ts), and the apply's scratch tables. On
      // OPFS a journal past 64 KiB went to a pooled access handle, every write a call to the
      // browser process: 20,000 hydrated rows took 950 ms to write instead of 500. Neither outlives
      // the connection, and a scratch table holds one page's rows at a time.
      await sqlite3.exec(db, 'PRAGMA temp_store = MEMORY');
    } catch (error) {
      await sqlite3.close(db).catch(() => undefined);
      throw error;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const connection = createWaSqliteDb(sqlite3, db, {
      module,
      onClose: async () => {
        clearTimeout(timer);
        await vfs.close();
      },
    });
    // One flush for the commits of the last few milliseconds, once the worker is free.
    if (soon) {
      connection.onCommit(() => {
        timer ??= setTimeout(() => {
          timer = undefined;
          vfs.flushFiles();
        }, WAL_FLUSH_DELAY_MS);
      });
    }
    return connection;
  } catch (error) {
    await vfs.close().catch(() => undefined);
    if (error instanceof SQLite.SQLiteError && typeof error.code === 'number') {
      throw new SqliteError(error.code, `cannot open OPFS database ${name}: ${error.message}`, undefined, { cause: error });
    }
    throw error;
  }
}
