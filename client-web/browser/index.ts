/**
 * Running the client in a dedicated Web Worker shared by the tabs of one origin. Import the host
 * from `worker-host.js` in the worker entry and the proxy from `worker-client.js` on the main
 * thread, so neither bundle pulls in the other side.
 */
export { hostSyncWorker, type WorkerHostOptions } from './worker-host.js';
export { connectSyncWorker, WorkerCallError, type WorkerClientEvents, type WorkerSyncClient } from './worker-client.js';
export { WorkerErrorCode, type HostEvent, type SqlStatement, type WireError, type WorkerOpenConfig, type WorkerRole, type WorkerStartOptions } from './protocol.js';
