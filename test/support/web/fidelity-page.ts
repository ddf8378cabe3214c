/**
 * The page of the value-fidelity fixture: `openDevice(dbName, token)` connects a sync worker
 * (fidelity-worker.ts) per device database; the scenario's writes, refusals and reads run here, in
 * the page, so no value crosses into the test as anything but its encoding (value-fidelity.ts).
 */
import { connectSyncWorker, type WorkerSyncClient } from '../../../client-web/browser/worker-client.js';
import { encodeRows, FIDELITY_READS, refusedWrites, writeFidelityRows, type EncodedValue } from '../value-fidelity.js';

export interface FidelityGlobals {
  devices: Record<string, WorkerSyncClient>;
  openDevice(dbName: string, token: string): void;
  writeRows(dbName: string): Promise<void>;
  /** Each refused write's outcome: its error code and message, or 'stored' when it was not refused. */
  tryRefused(dbName: string): Promise<{ readonly code: string; readonly message: string }[]>;
  read(dbName: string): Promise<{ vals: Record<string, EncodedValue>[]; ukeys: Record<string, EncodedValue>[] }>;
}

const g = globalThis as unknown as FidelityGlobals;
g.devices = {};
g.openDevice = (dbName, token) => {
  g.devices[dbName] = connectSyncWorker(new Worker('/fidelity-worker.js', { type: 'module', name: `fidelity-${dbName}` }), { dbName, baseUrl: location.origin, token });
};
g.writeRows = async (dbName) => {
  const device = g.devices[dbName] as WorkerSyncClient;
  await writeFidelityRows((sql, params) => device.run(sql, params));
};
g.tryRefused = async (dbName) => {
  const device = g.devices[dbName] as WorkerSyncClient;
  const outcomes: { code: string; message: string }[] = [];
  for (const w of refusedWrites()) {
    outcomes.push(await device.run(w.sql, w.params).then(
      () => ({ code: 'stored', message: '' }),
      (e: unknown) => ({ code: String((e as { code?: unknown }).code), message: String((e as Error).message) }),
    ));
  }
  return outcomes;
};
g.read = async (dbName) => {
  const device = g.devices[dbName] as WorkerSyncClient;
  return { vals: encodeRows(await device.query(FIDELITY_READS.vals)), ukeys: encodeRows(await device.query(FIDELITY_READS.ukeys)) };
};
