/**
 * Configuration from the environment, with the same names in Lambda and locally (contract §8).
 */
import { z } from 'zod';
import { limitsFromEnv, type Limits } from './limits.js';
import { type DbDriver } from './db/pools.js';

export interface RegisteredTableDecl {
  readonly schema: string;
  readonly table: string;
  readonly keyColumn: string;
}

export interface Config {
  readonly databaseUrl: string;
  readonly tables: readonly RegisteredTableDecl[];
  readonly appName: string;
  /** SYNC_MAX_SCHEMA_VERSION: bootstrap refuses schema changes beyond it; unlimited when unset. */
  readonly maxSchemaVersion: number | undefined;
  readonly userIdClaim: string;
  readonly dbDriver: DbDriver;
  readonly dbPoolMax: number;
  readonly neonWsProxy: string | undefined;
  readonly limits: Limits;
  /**
   * SYNC_WS_ENDPOINT (AWS): the WebSocket API's management endpoint,
   * `https://{api-id}.execute-api.{region}.amazonaws.com/{stage}`; commits post notifications there.
   */
  readonly wsEndpoint: string | undefined;
  /** AWS_REGION, for signing the management API posts. */
  readonly awsRegion: string | undefined;
  /**
   * Verifying bearer tokens where no API Gateway authorizer does it (the WebSocket `$connect`, the
   * local gateway): SYNC_JWT_ISSUER and SYNC_JWT_AUDIENCE (checked when set), and the key:
   * SYNC_JWKS_URL (default: the issuer's `/.well-known/jwks.json`) or SYNC_JWT_SECRET (HS256).
   */
  readonly jwt: { readonly issuer: string | undefined; readonly audience: string | undefined; readonly jwksUrl: string | undefined; readonly secret: string | undefined };
  /** SYNC_ADMIN_TOKEN: locally, the bearer token of the operator routes (/syncx/users/…). */
  readonly adminToken: string | undefined;
  /**
   * SYNC_LISTEN_DATABASE_URL: a direct (not transaction-pooled) URL for the one LISTEN connection of
   * a long-running process; `off` disables it. Defaults to DATABASE_URL outside Lambda.
   */
  readonly listenUrl: string | undefined;
}

const identifier = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/** Parses `SYNC_TABLES`: comma-separated `schema.table:key_column` entries. */
export function parseTables(spec: string): RegisteredTableDecl[] {
  const out: RegisteredTableDecl[] = [];
  for (const entry of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const match = /^([^.:]+)\.([^.:]+):([^.:]+)$/.exec(entry);
    if (!match) throw new Error(`SYNC_TABLES entry "${entry}" must look like schema.table:key_column`);
    const [, schema, table, keyColumn] = match as unknown as [string, string, string, string];
    for (const part of [schema, table, keyColumn]) {
      if (!identifier.test(part)) throw new Error(`SYNC_TABLES entry "${entry}": "${part}" is not a plain identifier`);
    }
    if (schema === 'sync') throw new Error('SYNC_TABLES may not register tables of the reserved schema "sync"');
    if (out.some((t) => t.schema === schema && t.table === table)) throw new Error(`SYNC_TABLES lists ${schema}.${table} twice`);
    out.push({ schema, table, keyColumn });
  }
  if (out.length === 0) throw new Error('SYNC_TABLES is empty');
  return out;
}

const envSchema = z.object({
  DATABASE_URL: z.string().min(1, 'DATABASE_URL is required'),
  SYNC_TABLES: z.string().min(1, 'SYNC_TABLES is required'),
  SYNC_APP_NAME: z.string().default('lockstep'),
  SYNC_MAX_SCHEMA_VERSION: z.coerce.number().int().positive().optional(),
  SYNC_USER_ID_CLAIM: z.string().default('sub'),
  SYNC_DB_DRIVER: z.enum(['pg', 'neon']).optional(),
  SYNC_DB_POOL_MAX: z.coerce.number().int().positive().default(4),
  SYNC_NEON_WS_PROXY: z.string().optional(),
  SYNC_WS_ENDPOINT: z.string().optional(),
  AWS_REGION: z.string().optional(),
  SYNC_JWT_ISSUER: z.string().optional(),
  SYNC_JWT_AUDIENCE: z.string().optional(),
  SYNC_JWKS_URL: z.string().optional(),
  SYNC_JWT_SECRET: z.string().optional(),
  SYNC_ADMIN_TOKEN: z.union([z.literal(''), z.string().min(16, 'SYNC_ADMIN_TOKEN needs at least 16 characters')]).optional(),
  SYNC_LISTEN_DATABASE_URL: z.string().optional(),
});

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  const e = parsed.data;
  // In Lambda the Neon driver is the default; locally node-postgres.
  const inLambda = Boolean(env['AWS_LAMBDA_FUNCTION_NAME']);
  return {
    databaseUrl: e.DATABASE_URL,
    tables: parseTables(e.SYNC_TABLES),
    appName: e.SYNC_APP_NAME,
    maxSchemaVersion: e.SYNC_MAX_SCHEMA_VERSION,
    userIdClaim: e.SYNC_USER_ID_CLAIM,
    dbDriver: e.SYNC_DB_DRIVER ?? (inLambda ? 'neon' : 'pg'),
    dbPoolMax: e.SYNC_DB_POOL_MAX,
    neonWsProxy: e.SYNC_NEON_WS_PROXY,
    limits: limitsFromEnv(env),
    wsEndpoint: e.SYNC_WS_ENDPOINT || undefined,
    awsRegion: e.AWS_REGION,
    jwt: { issuer: e.SYNC_JWT_ISSUER || undefined, audience: e.SYNC_JWT_AUDIENCE || undefined, jwksUrl: e.SYNC_JWKS_URL || undefined, secret: e.SYNC_JWT_SECRET || undefined },
    adminToken: e.SYNC_ADMIN_TOKEN || undefined,
    listenUrl: e.SYNC_LISTEN_DATABASE_URL === 'off' ? undefined : (e.SYNC_LISTEN_DATABASE_URL ?? (inLambda ? undefined : e.DATABASE_URL)),
  };
}
