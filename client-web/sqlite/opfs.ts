/**
 * The SQLite port in the browser, for a dedicated Web Worker: wa-sqlite's synchronous build over
 * AccessHandlePoolVFS, which keeps the database in a pool of OPFS files opened once with
 * createSyncAccessHandle (a worker-only API). No Asyncify build is needed: every VFS call is
 * synchronous once the pool is ready.
 *
 * Bundling: the wa-sqlite module finds its wasm at `new URL('wa-sqlite.wasm', import.meta.url)`,
 * i.e. next to the bundled worker script. esbuild does not copy that asset, so the demo build
 * copies node_modules/wa-sqlite/dist/wa-sqlite.wasm next to the worker bundle (dev/build-demo.ts),
 * or passes `wasmUrl` where it serves the file from elsewhere. On the default path the module uses
 * WebAssembly.instantiateStreaming, so the server must answer with `Content-Type:
 * application/wasm` (its fallback does not work in a module worker); with `wasmUrl` this file
 * fetches the bytes itself and any content type works.
 */
import SQLiteESMFactory from 'wa-sqlite/dist/wa-sqlite.mjs';
import * as SQLite from 'wa-sqlite';
import { AccessHandlePoolVFS } from 'wa-sqlite/src/examples/AccessHandlePoolVFS.js';
import { type SqliteDb } from './port.js';
import { createWaSqliteDb, SqliteError, SQLITE_CODES, type WaSqliteModule } from './wa-sqlite-db.js';

export interface OpfsSqliteOptions {
  /** Where to fetch wa-sqlite.wasm; default: next to the wa-sqlite module (see above). */
  wasmUrl?: string | URL;
}

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

  const vfs = new AccessHandlePoolVFS(`lockstep/${name}`);
  try {
    // Rejects when OPFS or createSyncAccessHandle is unavailable (not a dedicated worker), or
    // when another tab's worker already holds the directory's access handles.
    await vfs.isReady;
    sqlite3.vfs_register(vfs, false);
    // A short path inside the VFS: the wa-sqlite 1.0 glue allots 64 bytes for VFS paths.
    const db = await sqlite3.open_v2('/lockstep.sqlite3', SQLite.SQLITE_OPEN_CREATE | SQLite.SQLITE_OPEN_READWRITE, vfs.name);
    return createWaSqliteDb(sqlite3, db, { module, onClose: () => vfs.close() });
  } catch (error) {
    await vfs.close().catch(() => undefined);
    if (error instanceof SQLite.SQLiteError && typeof error.code === 'number') {
      throw new SqliteError(error.code, `cannot open OPFS database ${name}: ${error.message}`, undefined, { cause: error });
    }
    throw error;
  }
}
