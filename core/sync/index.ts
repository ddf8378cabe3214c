/** The sync engine's operations, one folder per concept (each with the SQL of its managed functions). */
export { loadCatalog, readLayoutState, evaluateLayout, THIS_BUILD, type BuildRange, type Catalog, type CatalogTable, type LayoutEvaluation } from './catalog/catalog.js';
export { namesUnknownSchema, validateRows, type StagedRow, type RowProblem, type ValidatedChunk } from './push/rows.js';
export { unwrap, rawText, type Actor, type SyncContext, type RawJson } from './context.js';
export { connect } from './connect/connect.js';
export { createAndStage, createPushSession, uploadChunk, deletePushSession } from './push/push.js';
export { commitPush, type CommitOutcome, type Violation } from './push/commit.js';
export { committedBundleRows } from './read/committed-rows.js';
export { pull, watch, type PullParams } from './read/pull.js';
export { createSnapshotWithPage, snapshotPage, deleteSnapshot } from './snapshot/snapshot.js';
export { capabilities, health, status, flushPendingCounters, FEATURES, type Health } from './meta/meta.js';
export { PendingCounters } from './meta/counters.js';
export { serverWrite, type ServerWriteOptions, type ServerWriteResult } from './push/server-write.js';
export { runMaintenance, type MaintenanceTotals } from './maintenance/maintenance.js';
export { userStatus, MAX_SOURCES_PER_STATUS } from './status/user-status.js';
