/** The demo's sync worker with a timeline (worker-trace.ts), for bench/profile-browser-latency.ts. */
import { hostSyncWorker } from '../../client-web/browser/worker-host.js';
import { openOpfsSqlite } from '../../client-web/sqlite/opfs.js';
import { DEMO_WORKER_OPTIONS } from '../../demo/src/worker-options.js';
import { installTrace, tracedDb } from './worker-trace.js';

/** Set by the build (bench/profile-browser-latency.ts): the OPFS journal mode to trace, or '' for the default. */
declare const LOCKSTEP_TRACE_JOURNAL: '' | 'wal' | 'delete';
installTrace();
hostSyncWorker({ ...DEMO_WORKER_OPTIONS, openDb: async (name) => tracedDb(await openOpfsSqlite(name, LOCKSTEP_TRACE_JOURNAL ? { journalMode: LOCKSTEP_TRACE_JOURNAL } : {})) });
