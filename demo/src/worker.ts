/** The demo's sync worker: OPFS SQLite with the demo tables, shared by the tabs of one user. */
import { hostSyncWorker } from '../../client-web/browser/worker-host.js';
import { openOpfsSqlite } from '../../client-web/sqlite/opfs.js';
import { DEMO_TABLES, LOCAL_SCHEMA_SQL } from './local-schema.js';

/**
 * Page cache of the connection, in KiB (SQLite's negative cache_size). SQLite's default of 2 MiB
 * spills during the one transaction that applies a hydration, and every spill is OPFS I/O: with
 * 32 MiB, applying 20,000 rows took about a quarter of the time in chromium.
 */
const CACHE_KIB = 32 * 1024;

hostSyncWorker({
  schemaSql: LOCAL_SCHEMA_SQL,
  tables: DEMO_TABLES,
  watch: 'long-poll',
  openDb: async (name) => {
    const db = await openOpfsSqlite(name);
    await db.exec(`PRAGMA cache_size = -${CACHE_KIB}`);
    return db;
  },
  // The app loops on its own (debounced writes, `online` events, watch), so a request that
  // fails twice is reported at once instead of retried for half a minute while offline.
  retry: { maxAttempts: 2, baseDelayMs: 200, maxDelayMs: 1000 },
  // Snapshot pages of 2,000 rows: a hydration of 20,000 rows moves the progress bar in ten steps
  // (the server's largest page, 5,000, would give four) at about the same total time.
  pageRows: 2000,
});
