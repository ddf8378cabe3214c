/**
 * The worker of bench/profile-opfs-modes.ts: opens an OPFS database with the given pragmas and
 * times small write transactions, small reads and one bulk insert, counting the sync access
 * handle calls of each (worker-trace.ts).
 */
import SQLiteESMFactory from 'wa-sqlite/dist/wa-sqlite.mjs';
import * as SQLite from 'wa-sqlite';
import { AccessHandlePoolVFS } from 'wa-sqlite/src/examples/AccessHandlePoolVFS.js';
import { createWaSqliteDb, type WaSqliteModule } from '../../client-web/sqlite/wa-sqlite-db.js';
import { CombiningAccessHandlePoolVFS } from '../../client-web/sqlite/opfs-vfs.js';
import type { SqliteDb } from '../../client-web/sqlite/port.js';
import { installTrace, tracedDb } from './worker-trace.js';

/** As client-web/sqlite/opfs.ts opens a database, with the pragmas under test instead of its own. */
async function open(name: string, pragmas: string, combine: boolean): Promise<SqliteDb> {
  const module = (await SQLiteESMFactory()) as WaSqliteModule;
  const sqlite3 = SQLite.Factory(module);
  const vfs = combine ? new CombiningAccessHandlePoolVFS(`lockstep/${name}`) : new AccessHandlePoolVFS(`lockstep/${name}`);
  await vfs.isReady;
  sqlite3.vfs_register(vfs, false);
  const db = await sqlite3.open_v2('/lockstep.sqlite3', SQLite.SQLITE_OPEN_CREATE | SQLite.SQLITE_OPEN_READWRITE, vfs.name);
  if (pragmas) await sqlite3.exec(db, pragmas);
  return createWaSqliteDb(sqlite3, db, { module, onClose: () => vfs.close() });
}

installTrace();

interface Job {
  readonly name: string;
  readonly pragmas: string;
  readonly combine: boolean;
  readonly small: number;
  readonly bulk: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS todos (id TEXT PRIMARY KEY, list_id TEXT NOT NULL, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0,
  position INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS todos_by_list ON todos (list_id, position);
CREATE TABLE IF NOT EXISTS dirty (tbl TEXT NOT NULL, key NOT NULL, state INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (tbl, key));
CREATE TRIGGER IF NOT EXISTS todos_ins AFTER INSERT ON todos BEGIN INSERT OR REPLACE INTO dirty (tbl, key) VALUES ('todos', NEW.id); END;
`;

self.addEventListener('message', (event: MessageEvent<Job>) => {
  void (async () => {
    const job = event.data;
    const events = (globalThis as unknown as { __trace: { kind: string; start: number; end: number; io?: Record<string, number> }[] }).__trace;
    const db = tracedDb(await open(`modes-${job.name}`, job.pragmas, job.combine));
    await db.exec(SCHEMA);
    const mode = await db.query('PRAGMA journal_mode');
    events.length = 0;
    for (let i = 0; i < job.small; i++) {
      await db.transaction(async (tx) => {
        await tx.run('INSERT INTO todos (id, list_id, title, position, updated_at) VALUES (?, ?, ?, ?, ?)', [crypto.randomUUID(), 'list-1', `todo ${i}`, i, new Date().toISOString()]);
      });
      await db.query('SELECT count(*) AS n FROM todos WHERE list_id = ?', ['list-1']);
    }
    const small = events.filter((e) => e.kind === 'tx').map((e) => ({ ms: e.end - e.start, io: e.io }));
    const reads = events.filter((e) => e.kind === 'sql' && !('' + (e as unknown as { what: string }).what).startsWith('  tx.')).map((e) => ({ ms: e.end - e.start, io: e.io }));
    events.length = 0;
    const rows = Array.from({ length: job.bulk }, (_, i) => [crypto.randomUUID(), `list-${i % 20}`, `bulk ${i} ${'x'.repeat(40)}`, i, new Date().toISOString()]);
    const t0 = performance.now();
    await db.transaction(async (tx) => {
      await tx.runMany('INSERT INTO todos (id, list_id, title, position, updated_at) VALUES (?, ?, ?, ?, ?)', rows);
    });
    const bulkMs = performance.now() - t0;
    const bulk = events.find((e) => e.kind === 'tx')?.io;
    await db.close();
    postMessage({ mode, small, reads, bulkMs, bulk });
  })().catch((error: unknown) => postMessage({ error: String(error) }));
});
