/**
 * The page of the worker-client fixture: `openDevice(dbName, token)` connects a sync worker
 * (sync-worker.ts, served as /lockstep-worker.js: paths under /sync are the API's) and keeps the
 * proxy as `client`, every status event in `statuses` and the calls it posts to the worker in
 * `calls`, for the test to drive with page.evaluate. With `refresh`, the page answers the worker's token refreshes (counted in
 * `refreshes`) with `refresh.token`, or fails them with `refresh.fail`.
 */
import { connectSyncWorker, type WorkerSyncClient } from '../../../client-web/browser/worker-client.js';
import type { LiveQueryResult, SyncStatus } from '../../../client-web/api.js';
import type { ToWorker } from '../../../client-web/browser/protocol.js';
import type { SqlRow } from '../../../client-web/sqlite/port.js';

export interface FixtureGlobals {
  client: WorkerSyncClient;
  statuses: SyncStatus[];
  refreshes: number;
  /** The calls this page posted to its worker, by method. */
  calls: Record<string, number>;
  /** Every delivery of the live query `watchKinds()` started. */
  kindResults: LiveQueryResult<SqlRow>[];
  watchKinds(): void;
  openDevice(dbName: string, token: string, refresh?: { token?: string; fail?: string }): void;
}

const g = globalThis as unknown as FixtureGlobals;
g.statuses = [];
g.refreshes = 0;
g.calls = {};
g.kindResults = [];
g.watchKinds = () => void g.client.liveQuery('SELECT code, label FROM kinds ORDER BY code', [], (result) => g.kindResults.push(result));
g.openDevice = (dbName, token, refresh) => {
  const refreshToken = () => {
    g.refreshes++;
    if (refresh?.fail) throw new Error(refresh.fail);
    return refresh?.token ?? token;
  };
  const worker = new Worker('/lockstep-worker.js', { type: 'module', name: 'lockstep-sync' });
  const post = worker.postMessage.bind(worker);
  worker.postMessage = (message: ToWorker) => {
    if (message.t === 'call') g.calls[message.method] = (g.calls[message.method] ?? 0) + 1;
    post(message);
  };
  g.client = connectSyncWorker(worker, { dbName, baseUrl: location.origin, token }, refresh ? { refreshToken } : {});
  g.client.on('status', (status) => g.statuses.push(status));
};
