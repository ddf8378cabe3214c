/**
 * A dedicated worker for test/opfs-durability.web.test.ts. `write`: opens the OPFS database, commits
 * `committed` rows (each its own transaction), then starts one more transaction that inserts a row
 * and never ends; answers once that row is written, so the page can end the worker in the middle of
 * it (as a closed tab or a crash does: no close, the browser releases the access handles).
 * `journalMode` opens it in that mode (a database an earlier adapter wrote: `delete`).
 * `read`: opens the database again (in the default mode) and answers what it holds, its journal and locking modes and
 * SQLite's integrity check.
 */
import { openOpfsSqlite } from '../../../client-web/sqlite/opfs.js';
import type { SqliteDb } from '../../../client-web/sqlite/port.js';

export type DurabilityJob =
  | { readonly step: 'write'; readonly name: string; readonly committed: number; readonly journalMode?: 'wal' | 'delete' }
  | { readonly step: 'read'; readonly name: string };

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

scope.onmessage = async (event) => {
  const job = event.data;
  try {
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
