/** The demo's sync worker: OPFS SQLite with the demo tables, shared by the tabs of one user. */
import { hostSyncWorker } from '../../client-web/browser/worker-host.js';
import { DEMO_WORKER_OPTIONS } from './worker-options.js';

hostSyncWorker(DEMO_WORKER_OPTIONS);
