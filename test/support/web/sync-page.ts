/**
 * The page of the worker-client fixture: `openDevice(dbName, token)` connects a sync worker
 * (sync-worker.ts, served as /lockstep-worker.js: paths under /sync are the API's) and keeps the
 * proxy as `client`, and every status event in `statuses`, for the test to drive with
 * page.evaluate.
 */
import { connectSyncWorker, type WorkerSyncClient } from '../../../client-web/browser/worker-client.js';
import type { SyncStatus } from '../../../client-web/api.js';

export interface FixtureGlobals {
  client: WorkerSyncClient;
  statuses: SyncStatus[];
  openDevice(dbName: string, token: string): void;
}

const g = globalThis as unknown as FixtureGlobals;
g.statuses = [];
g.openDevice = (dbName, token) => {
  g.client = connectSyncWorker(new Worker('/lockstep-worker.js', { type: 'module', name: 'lockstep-sync' }), { dbName, baseUrl: location.origin, token });
  g.client.on('status', (status) => g.statuses.push(status));
};
