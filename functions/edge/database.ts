/**
 * The database pool of a Lambda function, from its configuration: DATABASE_URL as it is, or the
 * connection string and a rotating password from Secrets Manager (DATABASE_SECRET_ID,
 * core/db/secret.ts). Shared by the request runtime and the bootstrap function.
 */
import { type Config } from '../../core/config.js';
import { createPool, type PoolLike } from '../../core/db/index.js';
import { logEvent } from '../../core/log.js';
import { databaseSecretFromEnv, SecretPool, type DatabaseSecret } from '../../core/db/secret.js';

export interface Database {
  readonly pool: PoolLike;
  /** Present when the credentials come from Secrets Manager. */
  readonly secret: DatabaseSecret | undefined;
}

/**
 * `onSecretReadFailed`: a failed read of the secret (the runtime counts DatabaseSecretReadFailures,
 * which the template alarms on; the secret module logs the line itself).
 */
export async function openDatabase(config: Config, max: number, env: Record<string, string | undefined> = process.env, onSecretReadFailed?: () => void): Promise<Database> {
  const secret = databaseSecretFromEnv(env, config.limits.secretRefreshSeconds * 1000, ({ changed, reason }) =>
    logEvent('info', 'database_secret_read', { reason, password_changed: changed }), config.limits.secretRetryAfterFailureSeconds * 1000, onSecretReadFailed);
  const open = (connectionString: string) => createPool({
    connectionString,
    max,
    driver: config.dbDriver,
    connectTimeoutMs: config.limits.dbConnectTimeoutMs,
    idleTimeoutMs: config.limits.dbIdleTimeoutMs,
    ...(config.neonWsProxy ? { neonWsProxy: config.neonWsProxy } : {}),
  });
  if (!secret) return { pool: await open(config.databaseUrl), secret };
  // Read at start, not awaited: an unreadable secret is logged once here, and requests answer a
  // typed 503 with Retry-After (core/db/secret.ts) instead of failing the container's start.
  void secret.connectionString().catch(() => undefined);
  return { pool: new SecretPool(secret, open), secret };
}

/**
 * A database error's consequence for the credentials: class 28 (invalid password, invalid
 * authorization) means they no longer work. The next connection reads the secret again, and the
 * structured line `database_authentication_failed` feeds the template's metric filter and alarm
 * (with DATABASE_URL alone nobody could fix it but an operator: the alarm is how one hears).
 */
export function noteDatabaseError(error: unknown, secret: DatabaseSecret | undefined): void {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('28')) return;
  secret?.authenticationFailed();
  logEvent('error', 'database_authentication_failed', { code, secret: secret ? 'reread' : 'none' });
}
