/**
 * What the React bindings need of a client: the in-process client (`openClient`, SyncClient) and a
 * tab's proxy of the sync worker (`connectSyncWorker`, WorkerSyncClient) both have it.
 */
import { type ConflictRecord, type LiveQuery, type LiveQueryResult, type QuarantinedRow, type StartOptions, type SyncStatus } from '../api.js';
import { type SqlRow, type SqlValue } from '../sqlite/port.js';

export interface BindableClient {
  liveQuery<T extends SqlRow = SqlRow>(sql: string, params?: readonly SqlValue[], listener?: (result: LiveQueryResult<T>) => void): LiveQuery<T>;
  onStatus(listener: (status: SyncStatus) => void): () => void;
  start(options?: Omit<StartOptions, 'environment'>): void | Promise<void>;
  stop(): Promise<void>;
  close(): Promise<void>;
  requestSync(): void | Promise<void>;
  quarantined(): Promise<QuarantinedRow[]>;
  requeueQuarantined(id: number, fix?: Readonly<Record<string, SqlValue>>): Promise<void>;
  dropQuarantined(id: number): Promise<void>;
  conflicts(): Promise<ConflictRecord[]>;
  dismissConflicts(ids?: readonly number[]): Promise<void>;
}
