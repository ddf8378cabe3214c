/**
 * The database credentials from AWS Secrets Manager, read at runtime (issue 17 item 4) instead of
 * a `{{resolve:secretsmanager:…}}` that CloudFormation copies into the environment once and never
 * again: a rotated password reaches every warm container without a redeploy.
 *
 * - The connection string is cached for `ttlMs` and read again at once after an authentication
 *   failure (SQLSTATE class 28): the first request after a rotation that needs a new connection
 *   may fail (503, Retry-After: the client retries), and the next one uses the new secret.
 * - `SecretPool` opens a pool for each connection string it sees and retires the previous one.
 * - GetSecretValue is one signed HTTPS call (aws4fetch signs it with the function's role
 *   credentials from the environment); `AWS_ENDPOINT_URL_SECRETS_MANAGER` points it elsewhere (a
 *   VPC endpoint, or a test's stand-in).
 *
 * Accepted secret shapes: JSON with a `DATABASE_URL` key (this template's), JSON in the shape RDS
 * rotation keeps (`username`, `password`, `host`, `port`, `dbname`), or the URL itself.
 */
import { AwsClient } from 'aws4fetch';
import { type PoolClientLike, type PoolLike, type QueryResultLike } from './port.js';

export interface SecretSourceOptions {
  readonly secretId: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
  /** The service endpoint; `https://secretsmanager.<region>.amazonaws.com` unless overridden. */
  readonly endpoint?: string | undefined;
  /** How long a read password is trusted before the next connection reads it again. */
  readonly ttlMs: number;
  /** Called after every read, with whether it changed the password (for logs and metrics). */
  readonly onRead?: (event: { readonly changed: boolean; readonly reason: 'first' | 'expired' | 'auth_failed' }) => void;
}

/** A secret's value as a connection string. */
export function connectionStringOf(secretString: string): string {
  const text = secretString.trim();
  if (/^postgres(ql)?:\/\//.test(text)) return text;
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new Error('the database secret is neither a postgres:// URL nor JSON');
  }
  if (typeof value['DATABASE_URL'] === 'string') return value['DATABASE_URL'];
  const { username, password, host, port, dbname } = value;
  if (typeof username !== 'string' || typeof password !== 'string' || typeof host !== 'string') {
    throw new Error('the database secret holds neither DATABASE_URL nor username, password and host');
  }
  const url = new URL(`postgres://${host}`);
  url.username = username;
  url.password = password;
  if (port !== undefined) url.port = String(port);
  url.pathname = `/${typeof dbname === 'string' ? dbname : 'postgres'}`;
  return url.toString();
}

export class DatabaseSecret {
  private readonly client: AwsClient;
  private readonly endpoint: string;
  private current: { url: string; readAt: number } | undefined;
  private reading: Promise<string> | undefined;
  private stale: 'expired' | 'auth_failed' | undefined;

  constructor(private readonly options: SecretSourceOptions) {
    this.client = new AwsClient({
      accessKeyId: options.accessKeyId,
      secretAccessKey: options.secretAccessKey,
      ...(options.sessionToken ? { sessionToken: options.sessionToken } : {}),
      service: 'secretsmanager',
      region: options.region,
      retries: 2,
    });
    this.endpoint = options.endpoint ?? `https://secretsmanager.${options.region}.amazonaws.com`;
  }

  /** The connection string: cached, read again when expired or after an authentication failure. */
  async connectionString(): Promise<string> {
    const current = this.current;
    if (current && !this.stale && Date.now() - current.readAt < this.options.ttlMs) return current.url;
    if (current && !this.stale) this.stale = 'expired';
    return this.read();
  }

  /** A connection was refused for its credentials: the next use reads the secret again. */
  authenticationFailed(): void {
    this.stale = 'auth_failed';
  }

  private read(): Promise<string> {
    this.reading ??= (async () => {
      const reason = this.current ? (this.stale ?? 'expired') : 'first';
      const response = await this.client.fetch(this.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'secretsmanager.GetSecretValue' },
        body: JSON.stringify({ SecretId: this.options.secretId }),
      });
      const body = (await response.json().catch(() => ({}))) as { SecretString?: unknown; __type?: unknown; message?: unknown; Message?: unknown };
      if (!response.ok || typeof body.SecretString !== 'string') {
        throw Object.assign(new Error(`GetSecretValue of the database secret failed: ${response.status} ${String(body.__type ?? '')} ${String(body.message ?? body.Message ?? '')}`.trim()), {
          code: 'ESECRET',
        });
      }
      const url = connectionStringOf(body.SecretString);
      const changed = this.current !== undefined && this.current.url !== url;
      this.current = { url, readAt: Date.now() };
      this.stale = undefined;
      this.options.onRead?.({ changed, reason });
      return url;
    })().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }
}

/**
 * A pool that follows the secret: each checkout asks the secret for the connection string
 * (cached; read again after `ttlMs` or an authentication failure), and when it changed, opens a
 * pool for the new one and closes the old one once its connections are back. Both drivers let
 * the connection string decide every connection parameter, so a new string needs a new pool.
 */
export class SecretPool implements PoolLike {
  private inner: { url: string; pool: PoolLike } | undefined;
  private opening: Promise<PoolLike> | undefined;

  constructor(private readonly secret: DatabaseSecret, private readonly open: (connectionString: string) => Promise<PoolLike>) {}

  private async pool(): Promise<PoolLike> {
    const url = await this.secret.connectionString();
    if (this.inner?.url === url) return this.inner.pool;
    this.opening ??= (async () => {
      const old = this.inner;
      const pool = await this.open(url);
      this.inner = { url, pool };
      // Connections checked out of the old pool finish their statements; end() waits for them.
      void old?.pool.end().catch(() => undefined);
      return pool;
    })().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  async connect(): Promise<PoolClientLike> {
    return (await this.pool()).connect();
  }

  async query(text: string, values?: unknown[]): Promise<QueryResultLike | QueryResultLike[]> {
    return (await this.pool()).query(text, values);
  }

  async end(): Promise<void> {
    await this.inner?.pool.end();
  }
}

/** The secret source the environment configures, or undefined without DATABASE_SECRET_ID. */
export function databaseSecretFromEnv(env: Record<string, string | undefined>, ttlMs: number, onRead?: SecretSourceOptions['onRead']): DatabaseSecret | undefined {
  const secretId = env['DATABASE_SECRET_ID'];
  if (!secretId) return undefined;
  const region = env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'];
  const accessKeyId = env['AWS_ACCESS_KEY_ID'];
  const secretAccessKey = env['AWS_SECRET_ACCESS_KEY'];
  if (!region || !accessKeyId || !secretAccessKey) {
    throw new Error('DATABASE_SECRET_ID is set but AWS_REGION and the role credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) are not');
  }
  return new DatabaseSecret({
    secretId,
    region,
    accessKeyId,
    secretAccessKey,
    sessionToken: env['AWS_SESSION_TOKEN'],
    endpoint: env['AWS_ENDPOINT_URL_SECRETS_MANAGER'] ?? env['AWS_ENDPOINT_URL'],
    ttlMs,
    ...(onRead ? { onRead } : {}),
  });
}
