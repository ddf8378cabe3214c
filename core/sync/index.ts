/** The sync engine's operations, one module per concept. */
export { loadCatalog, type Catalog, type CatalogTable } from './catalog.js';
export { validateRows, type StagedRow, type RowProblem } from './rows.js';
export { unwrap, type Actor, type SyncContext, type RawJson } from './context.js';
export { connect } from './connect.js';
export { createPushSession, uploadChunk, commitPush, deletePushSession, committedBundleRows, type CommitOutcome, type Violation } from './push.js';
export { pull, watch, type PullParams } from './pull.js';
export { createSnapshot, snapshotPage, deleteSnapshot } from './snapshot.js';
export { capabilities, health, status, FEATURES, type Health } from './meta.js';
export { serverWrite, type ServerWriteOptions, type ServerWriteResult } from './server-write.js';
export { runMaintenance, type MaintenanceTotals } from './maintenance.js';
