/**
 * Pool factories for the two drivers the core supports. Pools are bounded and created once per
 * container (Lambda reuses them across warm invocations).
 */
import pg from 'pg';
import { type PoolLike } from './port.js';

export type DbDriver = 'pg' | 'neon';

export interface PoolOptions {
  readonly connectionString: string;
  readonly max: number;
  readonly driver: DbDriver;
  /** Neon driver only: a ws:// proxy (host:port/path) that forwards to plain TCP PostgreSQL. */
  readonly neonWsProxy?: string;
}

// Keep bigint and numeric as exact decimal strings (contract §4); node-postgres does that by
// default for int8 (20) and numeric (1700). Timestamps stay text so nothing is lost to Date.
const TIMESTAMPTZ_OID = 1184;
const TIMESTAMP_OID = 1114;

export async function createPool(options: PoolOptions): Promise<PoolLike> {
  if (options.driver === 'neon') return createNeonPool(options);
  const types = {
    getTypeParser: (oid: number, format?: string) =>
      oid === TIMESTAMPTZ_OID || oid === TIMESTAMP_OID ? (v: string) => v : pg.types.getTypeParser(oid, format as 'text'),
  };
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    types,
  });
  // An idle client dropped by the server (restart, pooler recycle) must not crash the process.
  pool.on('error', () => {});
  return pool as unknown as PoolLike;
}

async function createNeonPool(options: PoolOptions): Promise<PoolLike> {
  const neon = await import('@neondatabase/serverless');
  if (typeof WebSocket === 'undefined') {
    const ws = await import('ws');
    neon.neonConfig.webSocketConstructor = ws.default;
  }
  if (options.neonWsProxy) {
    const proxy = options.neonWsProxy;
    neon.neonConfig.wsProxy = () => proxy;
    neon.neonConfig.useSecureWebSocket = false;
    neon.neonConfig.pipelineConnect = false;
    neon.neonConfig.pipelineTLS = false;
  }
  const pool = new neon.Pool({
    connectionString: options.connectionString,
    max: options.max,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
  });
  pool.on('error', () => {});
  return pool as unknown as PoolLike;
}
