/**
 * The client's SQLite port and its wa-sqlite adapter. The openers are imported by path so a
 * browser bundle never pulls node:fs: './sqlite/opfs.js' (worker) and './sqlite/node.js' (tests,
 * benchmarks).
 */
export { type SqlRow, type SqlValue, type SqliteDb, type SqliteStatements } from './port.js';
export { createWaSqliteDb, SqliteError, SQLITE_CODES, type WaSqliteDbOptions, type WaSqliteModule } from './wa-sqlite-db.js';
