/**
 * The page of the worker-client fixture: `openDevice(dbName, token)` connects a sync worker
 * (sync-worker.ts, served as /lockstep-worker.js: paths under /sync are the API's) and keeps the
 * proxy as `client`, and every status event in `statuses`, for the test to drive with
 * page.evaluate. With `refresh`, the page answers the worker's token refreshes (counted in
 * `refreshes`) with `refresh.token`, or fails them with `refresh.fail`.
 */
import { connectSyncWorker, type WorkerSyncClient } from '../../../client-web/browser/worker-client.js';
import type { SyncStatus } from '../../../client-web/api.js';

export interface FixtureGlobals {
  client: WorkerSyncClient;
  statuses: SyncStatus[];
  refreshes: number;
  openDevice(dbName: string, token: string, refresh?: { token?: string; fail?: string }): void;
}

const g = globalThis as unknown as FixtureGlobals;
g.statuses = [];
g.refreshes = 0;
g.openDevice = (dbName, token, refresh) => {
  const refreshToken = () => {
    g.refreshes++;
    if (refresh?.fail) throw new Error(refresh.fail);
    return refresh?.token ?? token;
  };
  g.client = connectSyncWorker(new Worker('/lockstep-worker.js', { type: 'module', name: 'lockstep-sync' }), { dbName, baseUrl: location.origin, token },
    refresh ? { refreshToken } : {});
  g.client.on('status', (status) => g.statuses.push(status));
};
