/**
 * The SQLite port under Node, for tests and benchmarks: wa-sqlite's synchronous build with its
 * wasm read from node_modules (no fetch under Node). Imported by path, never from index.ts, so
 * browser bundles do not pull in node:fs.
 *
 * Each database gets its own wa-sqlite module instance. Sharing one across connections is not
 * safe: the SQLiteAPI keeps out-parameters (the new statement or db handle) in one scratch
 * word per module and reads it after an `await`, so a prepare on another connection in that gap
 * hands back the wrong statement. The compiled wasm is cached, so a new instance costs an
 * instantiation (a few milliseconds), not a compilation.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import SQLiteESMFactory from 'wa-sqlite/dist/wa-sqlite.mjs';
import * as SQLite from 'wa-sqlite';
import { NodeFileVfs } from './node-file-vfs.js';
import { type SqliteDb } from './port.js';
import { createWaSqliteDb, type WaSqliteModule } from './wa-sqlite-db.js';

let compiled: Promise<WebAssembly.Module> | undefined;

function compiledWasm(): Promise<WebAssembly.Module> {
  compiled ??= (async () => {
    const require = createRequire(import.meta.url);
    return WebAssembly.compile(readFileSync(require.resolve('wa-sqlite/dist/wa-sqlite.wasm')));
  })();
  // A failed compile (e.g. a missing wasm) is not cached: the next call tries again.
  compiled.catch(() => {
    compiled = undefined;
  });
  return compiled;
}

/** A fresh wa-sqlite module over the cached compiled wasm. */
async function newModule(): Promise<WaSqliteModule> {
  const wasm = await compiledWasm();
  let failed: (error: unknown) => void = () => undefined;
  const instantiationFailed = new Promise<never>((_, reject) => (failed = reject));
  // Emscripten's hook: hand it an instance of the cached module instead of fetching the wasm.
  const instantiateWasm = (imports: WebAssembly.Imports, receive: (instance: WebAssembly.Instance) => void): object => {
    WebAssembly.instantiate(wasm, imports).then(receive, failed);
    return {};
  };
  return (await Promise.race([SQLiteESMFactory({ instantiateWasm }), instantiationFailed])) as WaSqliteModule;
}

export interface NodeSqliteOptions {
  /** A database file on disk (created if missing); without it, a fresh in-memory database. */
  path?: string;
  /**
   * With `path`: false skips the flush to the disk at each commit (NodeFileVfs). The database
   * survives a killed process all the same, not a power cut. Default true.
   */
  durable?: boolean;
}

/**
 * Opens a database with foreign keys on (see createWaSqliteDb). In memory it is ':memory:' on
 * wa-sqlite's default VFS (SQLite's own in-memory pager, the fastest choice); with `path` it is a
 * real file, so closing and reopening the same path finds the data again.
 */
export async function openNodeSqlite(options: NodeSqliteOptions = {}): Promise<SqliteDb> {
  const module = await newModule();
  const sqlite3 = SQLite.Factory(module);
  const flags = SQLite.SQLITE_OPEN_CREATE | SQLite.SQLITE_OPEN_READWRITE;
  let db: number;
  if (options.path === undefined) {
    db = await sqlite3.open_v2(':memory:', flags);
  } else {
    const vfs = new NodeFileVfs(options.durable ?? true);
    sqlite3.vfs_register(vfs, false);
    db = await sqlite3.open_v2(vfs.alias(resolve(options.path)), flags, vfs.name);
  }
  return createWaSqliteDb(sqlite3, db, { module });
}
