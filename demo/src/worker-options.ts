/** How the demo's sync worker runs (worker.ts); shared with the latency profile (bench/profile-browser-latency.ts). */
import type { WorkerHostOptions } from '../../client-web/browser/worker-host.js';
import { DEMO_TABLES, LOCAL_SCHEMA_SQL } from './local-schema.js';

export const DEMO_WORKER_OPTIONS: WorkerHostOptions = {
  schemaSql: LOCAL_SCHEMA_SQL,
  tables: DEMO_TABLES,
  // Push notifications (a WebSocket; long polls by themselves while no socket can be had): other
  // devices' changes arrive within tens of milliseconds, and a closed socket (the server went away)
  // makes the loop check at once, so the badge turns to "server unreachable" without a write.
  watch: 'websocket',
  // A refused change is set aside (the quarantine notice lists it), and the rest syncs.
  onRejected: 'quarantine',
  // The client's sync loop retries with its own backoff, so a request that fails twice is
  // reported at once instead of retried for half a minute while offline.
  retry: { maxAttempts: 2, baseDelayMs: 200, maxDelayMs: 1000 },
  // Snapshot pages of the server's largest size (5,000 rows): a fresh device writes each page
  // straight into its tables and the lists re-render once per page, so 20,000 rows in four steps
  // took 1.24 s where ten steps of 2,000 took 1.73 s (bench/README.md, issue 27).
  pageRows: 5000,
};
