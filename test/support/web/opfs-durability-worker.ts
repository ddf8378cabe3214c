/**
 * A dedicated worker for test/opfs-durability.web.test.ts. `write`: opens the OPFS database, commits
 * `committed` rows (each its own transaction), then starts one more transaction that inserts a row
 * and never ends; answers once that row is written, so the page can end the worker in the middle of
 * it (as a closed tab or a crash does: no close, the browser releases the access handles).
 * `journalMode` opens it in that mode (a database an earlier adapter wrote: `delete`).
 * `flushes`: counts the sync access handles' flush() calls of one small commit, when it returns
 * and, for `soon`, whether one follows (`flush` of the adapter: `soon` or `commit`).
 * `checkpoint`: commits a transaction of a few hundred pages, counts the sync access handles' read()
 * calls while SQLite checkpoints it into the database, closes and opens it again, and answers what it holds.
 * `bulk`: inserts 20,000 rows many rows a statement (insertValues) in one transaction and counts the
 * sync access handles' write() calls made before its COMMIT (a statement journal that spilled to a
 * temporary file), then answers what the table holds.
 * `read`: opens the database again (in the default mode) and answers what it holds, its journal and locking modes and
 * SQLite's integrity check.
 */
import { openOpfsSqlite } from '../../../client-web/sqlite/opfs.js';
import { insertValues } from '../../../client-web/sqlite/insert-values.js';
import type { SqliteDb } from '../../../client-web/sqlite/port.js';

export type DurabilityJob =
  | { readonly step: 'write'; readonly name: string; readonly committed: number; readonly journalMode?: 'wal' | 'delete' }
  | { readonly step: 'read'; readonly name: string }
  | { readonly step: 'flushes'; readonly name: string; readonly flush: 'soon' | 'commit' }
  | { readonly step: 'checkpoint'; readonly name: string }
  | { readonly step: 'bulk'; readonly name: string };

/** `bulk`: the OPFS writes made before the COMMIT, and the rows after it. */
export interface BulkAnswer {
  readonly writesBeforeCommit: number;
  readonly rows: number;
  readonly integrity: string;
}

/** `checkpoint`: the frames SQLite copied, the OPFS reads that took, and the database opened again. */
export interface CheckpointAnswer {
  readonly framesCopied: number;
  readonly reads: number;
  readonly rows: number;
  readonly integrity: string;
}

/** `flushes`: the files' flushes when a one-row COMMIT returned, and whether one followed later. */
export interface FlushAnswer {
  readonly atCommit: number;
  readonly later: boolean;
}

export interface DurabilityAnswer {
  readonly journalMode: string;
  readonly lockingMode: string;
  readonly synchronous: number;
  readonly titles: string[];
  readonly integrity: string;
}

const scope = globalThis as unknown as { onmessage: ((event: MessageEvent<DurabilityJob>) => unknown) | null; postMessage(message: unknown): void };

/** The previous worker's access handles go a moment after it ended: retry the open briefly. */
async function open(name: string, journalMode?: 'wal' | 'delete'): Promise<SqliteDb> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await openOpfsSqlite(name, journalMode ? { journalMode } : {});
    } catch (error) {
      if (attempt >= 50) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function describe(db: SqliteDb): Promise<DurabilityAnswer> {
  const [journal] = await db.query<{ journal_mode: string }>('PRAGMA journal_mode');
  const [locking] = await db.query<{ locking_mode: string }>('PRAGMA locking_mode');
  const [sync] = await db.query<{ synchronous: number }>('PRAGMA synchronous');
  const rows = await db.query<{ title: string }>('SELECT title FROM notes ORDER BY id');
  const [check] = await db.query<{ integrity_check: string }>('PRAGMA integrity_check');
  return {
    journalMode: String(journal?.journal_mode),
    lockingMode: String(locking?.locking_mode),
    synchronous: Number(sync?.synchronous),
    titles: rows.map((r) => r.title),
    integrity: String(check?.integrity_check),
  };
}

/** Every call of one sync access handle method in this worker, counted from now on. */
function countCalls(method: 'flush' | 'read' | 'write'): { readonly count: number } {
  const counter = { count: 0 };
  const proto = (globalThis as unknown as { FileSystemSyncAccessHandle: { prototype: Record<string, (...args: unknown[]) => unknown> } }).FileSystemSyncAccessHandle.prototype;
  const original = proto[method] as (...args: unknown[]) => unknown;
  proto[method] = function (this: unknown, ...args: unknown[]) {
    counter.count++;
    return original.apply(this, args);
  };
  return counter;
}

async function flushes(name: string, flush: 'soon' | 'commit'): Promise<FlushAnswer> {
  const db = await openOpfsSqlite(name, { flush });
  await db.exec('CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL)');
  // Past the flush of the setup's own commits.
  await new Promise((r) => setTimeout(r, 200));
  const counter = countCalls('flush');
  await db.transaction((tx) => tx.run('INSERT INTO notes (title) VALUES (?)', ['flushed?']));
  const atCommit = counter.count;
  // A flush at commit needs none after it; a later one comes within milliseconds (5 s: a loaded machine).
  const deadline = Date.now() + (flush === 'soon' ? 5000 : 0);
  while (counter.count === atCommit && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await db.close();
  return { atCommit, later: counter.count > atCommit };
}

async function checkpoint(name: string): Promise<CheckpointAnswer> {
  let db = await open(name);
  await db.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL); CREATE INDEX notes_by_title ON notes (title)');
  await db.transaction((tx) => tx.runMany('INSERT INTO notes (title) VALUES (?)', Array.from({ length: 2000 }, (_, i) => [`${(i * 7919) % 2000} ${'x'.repeat(200)}`])));
  const counter = countCalls('read');
  const [copied] = await db.query<{ checkpointed: number }>('PRAGMA wal_checkpoint(PASSIVE)');
  const reads = counter.count;
  await db.close();
  db = await open(name);
  const [n] = await db.query<{ n: number }>('SELECT count(*) AS n FROM notes');
  const [check] = await db.query<{ integrity_check: string }>('PRAGMA integrity_check');
  await db.close();
  return { framesCopied: Number(copied?.checkpointed), reads, rows: Number(n?.n), integrity: String(check?.integrity_check) };
}

async function bulk(name: string): Promise<BulkAnswer> {
  const db = await open(name);
  // A text key and a second index: a statement of many rows needs a statement journal (it may
  // fail on a constraint half way), and these rows dirty far more than its 64 KiB in memory.
  await db.exec('CREATE TABLE notes (id TEXT PRIMARY KEY, title TEXT NOT NULL); CREATE INDEX notes_by_title ON notes (title)');
  const rows = Array.from({ length: 20_000 }, (_, i) => [`k${(i * 7919) % 20_000}`, `${(i * 104_729) % 20_000} ${'x'.repeat(100)}`]);
  let writesBeforeCommit = -1;
  await db.transaction(async (tx) => {
    const counter = countCalls('write');
    await insertValues(tx, 'INSERT INTO notes (id, title)', '(?, ?)', rows);
    writesBeforeCommit = counter.count;
  });
  const [n] = await db.query<{ n: number }>('SELECT count(*) AS n FROM notes');
  const [check] = await db.query<{ integrity_check: string }>('PRAGMA integrity_check');
  await db.close();
  return { writesBeforeCommit, rows: Number(n?.n), integrity: String(check?.integrity_check) };
}

scope.onmessage = async (event) => {
  const job = event.data;
  try {
    if (job.step === 'flushes') return scope.postMessage(await flushes(job.name, job.flush));
    if (job.step === 'checkpoint') return scope.postMessage(await checkpoint(job.name));
    if (job.step === 'bulk') return scope.postMessage(await bulk(job.name));
    const db = await open(job.name, job.step === 'write' ? job.journalMode : undefined);
    if (job.step === 'read') return scope.postMessage(await describe(db));
    await db.exec('CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL)');
    for (let i = 0; i < job.committed; i++) await db.transaction((tx) => tx.run('INSERT INTO notes (title) VALUES (?)', [`committed ${i}`]));
    const answer = await describe(db);
    void db.transaction(async (tx) => {
      // Enough rows that some pages leave the cache for the WAL before the end that never comes.
      await tx.runMany('INSERT INTO notes (title) VALUES (?)', Array.from({ length: 2000 }, (_, i) => [`uncommitted ${i} ${'x'.repeat(200)}`]));
      scope.postMessage(answer);
      await new Promise(() => undefined);
    });
  } catch (error) {
    scope.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
};
