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
 * Journal: the database runs in WAL mode with `locking_mode = EXCLUSIVE` and `synchronous = FULL`
 * (see `journalMode`). Exactly one worker opens a database (the Web Lock and the exclusive access
 * handles already see to it), so the connection holds its lock for its life: SQLite keeps its page
 * cache across transactions instead of reading the header again before each one, and WAL needs no
 * shared memory (this VFS has none). A small commit then appends its pages to the WAL and flushes
 * it once, where the rollback journal created, wrote twice, flushed three times and deleted a
 * journal file: six flushes and some thirty sync access handle calls per one-row transaction,
 * each a message to the browser process when OPFS is in memory (a private window).
 * Durability is unchanged: a COMMIT returns only after the WAL is flushed, so a transaction the
 * app saw committed survives a reload, a killed tab, a browser crash and a power loss; one that
 * did not commit leaves frames that recovery ignores, and the database file itself changes only
 * in checkpoints of flushed frames, which a crash interrupts safely (the next open replays them).
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
}

/** The WAL file is truncated to this after a checkpoint (a hydration's one transaction can make it large). */
const WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024;

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
    try {
      // Exclusive first: WAL without shared memory needs it before the WAL is first touched.
      await sqlite3.exec(db, 'PRAGMA locking_mode = EXCLUSIVE');
      await sqlite3.exec(db, `PRAGMA journal_mode = ${options.journalMode === 'delete' ? 'DELETE' : 'WAL'}`);
      await sqlite3.exec(db, `PRAGMA synchronous = FULL; PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    } catch (error) {
      await sqlite3.close(db).catch(() => undefined);
      throw error;
    }
    return createWaSqliteDb(sqlite3, db, { module, onClose: () => vfs.close() });
  } catch (error) {
    await vfs.close().catch(() => undefined);
    if (error instanceof SQLite.SQLiteError && typeof error.code === 'number') {
      throw new SqliteError(error.code, `cannot open OPFS database ${name}: ${error.message}`, undefined, { cause: error });
    }
    throw error;
  }
}
