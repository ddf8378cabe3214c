/**
 * The SQLite port under Node, for tests and benchmarks: wa-sqlite's synchronous build with its
 * wasm read from node_modules (no fetch under Node). Imported by path, never from index.ts, so
 * browser bundles do not pull in node:fs.
 *
 * One wa-sqlite module is shared by every database this process opens: the build is
 * synchronous, so calls on different connections cannot interleave inside SQLite, and one
 * instance saves compiling the wasm per client (the conformance suite opens several at once).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import SQLiteESMFactory from 'wa-sqlite/dist/wa-sqlite.mjs';
import * as SQLite from 'wa-sqlite';
import { NodeFileVfs } from './node-file-vfs.js';
import { type SqliteDb } from './port.js';
import { createWaSqliteDb, type WaSqliteModule } from './wa-sqlite-db.js';

interface NodeSqlite {
  sqlite3: SQLiteAPI;
  module: WaSqliteModule;
  vfs: NodeFileVfs;
}

let shared: Promise<NodeSqlite> | undefined;

function nodeSqlite(): Promise<NodeSqlite> {
  shared ??= (async () => {
    const require = createRequire(import.meta.url);
    const wasmBinary = readFileSync(require.resolve('wa-sqlite/dist/wa-sqlite.wasm'));
    const module = (await SQLiteESMFactory({ wasmBinary })) as WaSqliteModule;
    const sqlite3 = SQLite.Factory(module);
    const vfs = new NodeFileVfs();
    sqlite3.vfs_register(vfs, false);
    return { sqlite3, module, vfs };
  })();
  // A failed start (e.g. a missing wasm) is not cached: the next call tries again.
  shared.catch(() => {
    shared = undefined;
  });
  return shared;
}

export interface NodeSqliteOptions {
  /** A database file on disk (created if missing); without it, a fresh in-memory database. */
  path?: string;
}

/**
 * Opens a database with foreign keys on (see createWaSqliteDb). In memory it is ':memory:' on
 * wa-sqlite's default VFS (SQLite's own in-memory pager, the fastest choice); with `path` it is a
 * real file, so closing and reopening the same path finds the data again.
 */
export async function openNodeSqlite(options: NodeSqliteOptions = {}): Promise<SqliteDb> {
  const { sqlite3, module, vfs } = await nodeSqlite();
  const flags = SQLite.SQLITE_OPEN_CREATE | SQLite.SQLITE_OPEN_READWRITE;
  const db =
    options.path === undefined
      ? await sqlite3.open_v2(':memory:', flags)
      : await sqlite3.open_v2(vfs.alias(resolve(options.path)), flags, vfs.name);
  return createWaSqliteDb(sqlite3, db, { module });
}
