/**
 * Per-container state: configuration, one bounded pool, and the cached catalog. Nothing about a
 * request lives here; Lambda reuses it across warm invocations.
 */
import { loadConfig, type Config } from '../../core/config.js';
import { Db, createPool, type PoolLike } from '../../core/db/index.js';
import { loadCatalog, type Catalog } from '../../core/sync/index.js';

export interface Runtime {
  readonly config: Config;
  /** The container's database handle; `forRequest()` gives each request its own counter. */
  readonly db: Db;
  /** The registered-table catalog, loaded once; a failed load is retried by the next request. */
  catalog(): Promise<Catalog>;
}

export function createRuntime(config: Config, pool: PoolLike): Runtime {
  const db = new Db(pool, { statementTimeoutMs: config.limits.statementTimeoutMs, lockTimeoutMs: config.limits.lockTimeoutMs });
  let cached: Promise<Catalog> | undefined;
  return {
    config,
    db,
    catalog() {
      cached ??= loadCatalog(db).catch((error: unknown) => {
        cached = undefined;
        throw error;
      });
      return cached;
    },
  };
}

let fromEnv: Promise<Runtime> | undefined;

/** The runtime Lambda handlers use: configuration from the environment, created on first use. */
export function runtimeFromEnv(): Promise<Runtime> {
  fromEnv ??= (async () => {
    const config = loadConfig();
    const pool = await createPool({
      connectionString: config.databaseUrl,
      max: config.dbPoolMax,
      driver: config.dbDriver,
      connectTimeoutMs: config.limits.dbConnectTimeoutMs,
      idleTimeoutMs: config.limits.dbIdleTimeoutMs,
      ...(config.neonWsProxy ? { neonWsProxy: config.neonWsProxy } : {}),
    });
    return createRuntime(config, pool);
  })().catch((error: unknown) => {
    fromEnv = undefined;
    throw error;
  });
  return fromEnv;
}
