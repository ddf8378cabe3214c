/**
 * Configuration from the environment, with the same names in Lambda and locally (the README's Configuration table).
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

/** A required variable; missing or empty, it is reported with what it should hold. */
const required = (what: string) => z.string({ error: `required: ${what}` }).min(1, `required: ${what}`);

const envSchema = z.object({
  DATABASE_URL: required('a PostgreSQL connection string, e.g. postgres://user:password@host:5432/db'),
  SYNC_TABLES: required('the registered tables, comma-separated schema.table:key_column, e.g. app.todos:id,app.lists:id'),
  SYNC_APP_NAME: z.string().default('lockstep'),
  SYNC_MAX_SCHEMA_VERSION: z.coerce.number().int().positive().optional(),
  SYNC_USER_ID_CLAIM: z.string().default('sub'),
  SYNC_DB_DRIVER: z.enum(['pg', 'neon']).optional(),
  SYNC_DB_POOL_MAX: z.coerce.number().int().positive().default(4),
  SYNC_NEON_WS_PROXY: z.string().optional(),
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
  };
}
