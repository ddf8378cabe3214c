/** The core: configuration, limits, errors, database port, bootstrap and the sync engine. */
export { loadConfig, parseTables, type Config, type RegisteredTableDecl } from './config.js';
export { defaultLimits, limitsFromEnv, limitsToWire, type Limits } from './limits.js';
export {
  SyncError,
  errorRegistry,
  isErrorCode,
  assert,
  AssertionFailed,
  UnsupportedSchemaError,
  ManagedLayoutMismatchError,
  UnsupportedServerVersionError,
  type ErrorCode,
  type SchemaViolation,
} from './errors.js';
export { Db, createPool, sql, ident, raw, type Queryable, type PoolLike, type DbDriver } from './db/index.js';
export { bootstrap, type BootstrapResult } from './bootstrap/bootstrap.js';
export * as sync from './sync/index.js';
