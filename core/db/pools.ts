/**
 * Pool factories for the two drivers the core supports. Pools are bounded and created once per
 * container (Lambda reuses them across warm invocations).
 *
 * Timeouts (issue 17 item 3): the pool bounds the wait for a connection (`connectTimeoutMs`,
 * limits.dbConnectTimeoutMs); the wait for an answer is bounded by the Db port itself
 * (core/db/port.ts: limits.queryTimeoutMs and the request's deadline), the same for both drivers,
 * since the Neon driver ignores a per-query `query_timeout`. TCP keepalive lets node-postgres
 * notice a peer that vanished while its connection sat idle in the pool.
 */
import { defaultLimits } from '../limits.js';
import { type PoolLike } from './port.js';

export type DbDriver = 'pg' | 'neon';

export interface PoolOptions {
  readonly connectionString: string;
  readonly max: number;
  readonly driver: DbDriver;
  /**
   * Neon driver only: a WebSocket-to-TCP proxy (`host:port/path`, no scheme, plain ws) in front of
   * an ordinary PostgreSQL; the driver appends `?address=<db host>:<db port>`.
   */
  readonly neonWsProxy?: string;
  /** Wait for a connection or a free pool slot; default `defaultLimits.dbConnectTimeoutMs`. */
  readonly connectTimeoutMs?: number;
  /** Idle connections close after this; default `defaultLimits.dbIdleTimeoutMs`. */
  readonly idleTimeoutMs?: number;
}

// Keep bigint and numeric as exact decimal strings (docs/protocol.md §4.2); node-postgres does that by
// default for int8 (20) and numeric (1700). Timestamps stay text so nothing is lost to Date.
const TIMESTAMPTZ_OID = 1184;
const TIMESTAMP_OID = 1114;

type GetTypeParser = (oid: number, format: 'text') => (value: string) => unknown;

/** The driver's own parsers, except timestamps, which stay text. Both drivers take this shape. */
function textTimestamps(base: GetTypeParser): { getTypeParser: (oid: number, format?: string) => (value: string) => unknown } {
  return {
    getTypeParser: (oid: number, format?: string) => (oid === TIMESTAMPTZ_OID || oid === TIMESTAMP_OID ? (v: string) => v : base(oid, (format ?? 'text') as 'text')),
  };
}

export async function createPool(options: PoolOptions): Promise<PoolLike> {
  return options.driver === 'neon' ? createNeonPool(options) : createPgPool(options);
}

// Both drivers are imported lazily: a Lambda bundle that runs on the Neon driver never evaluates
// node-postgres at cold start, and the local runtime never loads the WebSocket driver.
async function createPgPool(options: PoolOptions): Promise<PoolLike> {
  const { default: pg } = await import('pg');
  const types = textTimestamps(pg.types.getTypeParser);
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max,
    idleTimeoutMillis: options.idleTimeoutMs ?? defaultLimits.dbIdleTimeoutMs,
    connectionTimeoutMillis: options.connectTimeoutMs ?? defaultLimits.dbConnectTimeoutMs,
    keepAlive: true,
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
    // A string makes the driver connect to ws://<proxy>?address=<host>:<port>, the address
    // convention of Neon's wsproxy, so one proxy can front any PostgreSQL host.
    neon.neonConfig.wsProxy = options.neonWsProxy;
    neon.neonConfig.useSecureWebSocket = false;
    neon.neonConfig.pipelineConnect = false;
    neon.neonConfig.pipelineTLS = false;
  }
  const pool = new neon.Pool({
    connectionString: options.connectionString,
    max: options.max,
    idleTimeoutMillis: options.idleTimeoutMs ?? defaultLimits.dbIdleTimeoutMs,
    connectionTimeoutMillis: options.connectTimeoutMs ?? defaultLimits.dbConnectTimeoutMs,
    types: textTimestamps(neon.types.getTypeParser),
  });
  pool.on('error', () => {});
  return pool as unknown as PoolLike;
}
