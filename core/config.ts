/**
 * Configuration from the environment, with the same names in Lambda and locally (the README's Configuration table).
 */
import { limitsFromEnv, type Limits } from './limits.js';
import { type DbDriver } from './db/pools.js';

export interface RegisteredTableDecl {
  readonly schema: string;
  readonly table: string;
  readonly keyColumn: string;
}

export interface Config {
  /** DATABASE_URL; empty when the URL comes from Secrets Manager (DATABASE_SECRET_ID) at runtime. */
  readonly databaseUrl: string;
  /** DATABASE_SECRET_ID: the secret holding the connection string, read at runtime (core/db/secret.ts). */
  readonly databaseSecretId: string | undefined;
  readonly tables: readonly RegisteredTableDecl[];
  readonly appName: string;
  /** SYNC_MAX_SCHEMA_VERSION: bootstrap refuses schema changes beyond it; unlimited when unset. */
  readonly maxSchemaVersion: number | undefined;
  readonly userIdClaim: string;
  readonly dbDriver: DbDriver;
  readonly dbPoolMax: number;
  readonly neonWsProxy: string | undefined;
  /**
   * SYNC_ROLE_TIMEOUTS (default off): `on` makes bootstrap install the role's statement, lock,
   * idle-in-transaction and client-check settings in this database (core/bootstrap/bounds.ts),
   * for a role that runs nothing but Lockstep. Off, bootstrap removes the ones an earlier release
   * installed: they bound every session of the role, the application's own migrations too.
   */
  readonly roleTimeouts: boolean;
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

/**
 * Reads the environment by hand rather than with a schema library: the bootstrap and maintenance
 * bundles need nothing else of one, and this keeps them small (one schema library is tens of KB
 * of every bundle that loads it).
 */
function readEnv(env: Record<string, string | undefined>) {
  const problems: string[] = [];
  const text = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value === '' ? undefined : value;
  };
  /** A required variable; missing or empty, it is reported with what it should hold. */
  const required = (name: string, what: string): string => {
    const value = text(name);
    if (value === undefined) problems.push(`${name}: required: ${what}`);
    return value ?? '';
  };
  const positiveInt = (name: string): number | undefined => {
    const value = text(name);
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n <= 0) problems.push(`${name}: must be a positive integer, got ${value}`);
    return n;
  };
  const oneOf = <T extends string>(name: string, allowed: readonly T[]): T | undefined => {
    const value = text(name);
    if (value === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(value)) problems.push(`${name}: must be one of ${allowed.join(', ')}, got ${value}`);
    return value as T;
  };
  const data = {
    DATABASE_SECRET_ID: text('DATABASE_SECRET_ID'),
    DATABASE_URL: text('DATABASE_SECRET_ID') === undefined
      ? required('DATABASE_URL', 'a PostgreSQL connection string, e.g. postgres://user:password@host:5432/db (or DATABASE_SECRET_ID, a Secrets Manager secret holding it)')
      : (text('DATABASE_URL') ?? ''),
    SYNC_TABLES: required('SYNC_TABLES', 'the registered tables, comma-separated schema.table:key_column, e.g. app.todos:id,app.lists:id'),
    SYNC_APP_NAME: env['SYNC_APP_NAME'] ?? 'lockstep',
    SYNC_MAX_SCHEMA_VERSION: positiveInt('SYNC_MAX_SCHEMA_VERSION'),
    SYNC_USER_ID_CLAIM: env['SYNC_USER_ID_CLAIM'] ?? 'sub',
    SYNC_DB_DRIVER: oneOf('SYNC_DB_DRIVER', ['pg', 'neon'] as const),
    SYNC_DB_POOL_MAX: positiveInt('SYNC_DB_POOL_MAX') ?? 4,
    SYNC_NEON_WS_PROXY: env['SYNC_NEON_WS_PROXY'],
    SYNC_ROLE_TIMEOUTS: oneOf('SYNC_ROLE_TIMEOUTS', ['on', 'off'] as const) ?? 'off',
    SYNC_WS_ENDPOINT: text('SYNC_WS_ENDPOINT'),
    AWS_REGION: text('AWS_REGION'),
    SYNC_JWT_ISSUER: text('SYNC_JWT_ISSUER'),
    SYNC_JWT_AUDIENCE: text('SYNC_JWT_AUDIENCE'),
    SYNC_JWKS_URL: text('SYNC_JWKS_URL'),
    SYNC_JWT_SECRET: text('SYNC_JWT_SECRET'),
    SYNC_LISTEN_DATABASE_URL: text('SYNC_LISTEN_DATABASE_URL'),
  };
  return problems.length ? { success: false as const, problems } : { success: true as const, data };
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = readEnv(env);
  if (!parsed.success) throw new Error(`invalid configuration: ${parsed.problems.join('; ')}`);
  const e = parsed.data;
  // In Lambda the Neon driver is the default; locally node-postgres.
  const inLambda = Boolean(env['AWS_LAMBDA_FUNCTION_NAME']);
  return {
    databaseUrl: e.DATABASE_URL,
    databaseSecretId: e.DATABASE_SECRET_ID,
    tables: parseTables(e.SYNC_TABLES),
    appName: e.SYNC_APP_NAME,
    maxSchemaVersion: e.SYNC_MAX_SCHEMA_VERSION,
    userIdClaim: e.SYNC_USER_ID_CLAIM,
    dbDriver: e.SYNC_DB_DRIVER ?? (inLambda ? 'neon' : 'pg'),
    dbPoolMax: e.SYNC_DB_POOL_MAX,
    neonWsProxy: e.SYNC_NEON_WS_PROXY,
    roleTimeouts: e.SYNC_ROLE_TIMEOUTS === 'on',
    limits: limitsFromEnv(env),
    wsEndpoint: e.SYNC_WS_ENDPOINT,
    awsRegion: e.AWS_REGION,
    jwt: { issuer: e.SYNC_JWT_ISSUER, audience: e.SYNC_JWT_AUDIENCE, jwksUrl: e.SYNC_JWKS_URL, secret: e.SYNC_JWT_SECRET },
    listenUrl: e.SYNC_LISTEN_DATABASE_URL === 'off' ? undefined : (e.SYNC_LISTEN_DATABASE_URL ?? (inLambda || !e.DATABASE_URL ? undefined : e.DATABASE_URL)),
  };
}
