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
 * - A read that fails (AccessDenied, a KMS refusal, throttling, no route to the service) never
 *   stops a container that holds a connection string: it keeps serving on it, logs
 *   `database_secret_read_failed` as a JSON line, and tries again after `retryAfterFailureMs`
 *   (issue 25 item 5). A container that holds none answers `503 service_unavailable` with
 *   `Retry-After` and reason `database_secret_unavailable`, and calls the service no more often
 *   than that either.
 *
 * Accepted secret shapes: JSON with a `DATABASE_URL` key (this template's), JSON in the shape RDS
 * rotation keeps (`username`, `password`, `host`, `port`, `dbname`), the `{username, password}`
 * alone that RDS keeps for a password it manages (the host then comes from DATABASE_HOST: the RDS
 * Proxy endpoint), or the URL itself. DATABASE_HOST, when set, is where the functions connect
 * whatever the secret says; the structured shapes require TLS (`sslmode=verify-full` unless
 * DATABASE_SSLMODE says otherwise).
 */
import { AwsClient } from 'aws4fetch';
import { SyncError } from '../errors.js';
import { logEvent } from '../log.js';
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
  /** After a failed read, how long the next one waits (the cached string serves meanwhile). */
  readonly retryAfterFailureMs: number;
  /** Where to connect instead of the secret's host (DATABASE_HOST, DATABASE_NAME, DATABASE_SSLMODE). */
  readonly target?: SecretTarget | undefined;
  /** Called after every read, with whether it changed the password (for logs and metrics). */
  readonly onRead?: (event: { readonly changed: boolean; readonly reason: 'first' | 'expired' | 'auth_failed' }) => void;
  /** Called once per failed read, with AWS's exception name (`network` without an answer). */
  readonly onReadFailed?: (event: { readonly type: string; readonly servingCached: boolean }) => void;
}

/** Where the functions connect, when the deployment says rather than the secret. */
export interface SecretTarget {
  /** `host` or `host:port`: an RDS Proxy endpoint. */
  readonly host?: string | undefined;
  readonly dbname?: string | undefined;
  /** TLS for the structured shapes; `verify-full` (certificate and host checked) by default. */
  readonly sslmode?: string | undefined;
}

/** The TLS mode a structured secret gets unless DATABASE_SSLMODE says otherwise. */
export const DEFAULT_SECRET_SSLMODE = 'verify-full';

/** A secret's value as a connection string, pointed at `target` when it names a host. */
export function connectionStringOf(secretString: string, target: SecretTarget = {}): string {
  const text = secretString.trim();
  let url: URL;
  let structured = false;
  if (/^postgres(ql)?:\/\//.test(text)) url = new URL(text);
  else {
    let value: Record<string, unknown>;
    try {
      value = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new Error('the database secret is neither a postgres:// URL nor JSON');
    }
    if (typeof value['DATABASE_URL'] === 'string') url = new URL(value['DATABASE_URL']);
    else {
      const { username, password, host, port, dbname } = value;
      const where = target.host ?? (typeof host === 'string' ? host : undefined);
      if (typeof username !== 'string' || typeof password !== 'string' || where === undefined) {
        throw new Error('the database secret holds neither DATABASE_URL nor username and password with a host (in the secret, or DATABASE_HOST)');
      }
      url = new URL(`postgres://${where}`);
      url.username = username;
      url.password = password;
      if (port !== undefined && !target.host) url.port = String(port);
      url.pathname = `/${typeof dbname === 'string' ? dbname : 'postgres'}`;
      structured = true;
    }
  }
  if (target.host) {
    const at = new URL(`postgres://${target.host}`);
    url.hostname = at.hostname;
    url.port = at.port;
  }
  if (target.dbname) url.pathname = `/${target.dbname}`;
  // RDS's shapes (and every secret pointed at a host the deployment names): TLS, always.
  if ((structured || target.host) && !url.searchParams.has('sslmode')) url.searchParams.set('sslmode', target.sslmode ?? DEFAULT_SECRET_SSLMODE);
  return url.toString();
}

/** Why a GetSecretValue failed, from AWS's answer: the exception's name, or `network`. */
function failureType(error: unknown): string {
  const type = (error as { awsType?: unknown }).awsType;
  return typeof type === 'string' && type ? type.replace(/^.*#/, '') : 'network';
}

export class DatabaseSecret {
  private readonly client: AwsClient;
  private readonly endpoint: string;
  private current: { url: string; readAt: number } | undefined;
  private reading: Promise<string> | undefined;
  private stale: 'expired' | 'auth_failed' | undefined;
  /** After a failed read: no other read before this (epoch ms), and what failed. */
  private failed: { until: number; type: string; message: string } | undefined;

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

  /**
   * The connection string: cached, read again when expired or after an authentication failure.
   * A read that fails leaves the cached string serving; without one it is a typed 503.
   */
  async connectionString(): Promise<string> {
    const current = this.current;
    if (current && !this.stale && Date.now() - current.readAt < this.options.ttlMs) return current.url;
    if (current && !this.stale) this.stale = 'expired';
    if (this.failed && Date.now() < this.failed.until) {
      if (current) return current.url;
      throw this.unavailable();
    }
    try {
      return await this.read();
    } catch (error) {
      if (current) return current.url;
      if (error instanceof SyncError) throw error;
      throw this.unavailable();
    }
  }

  /** The 503 of a container that has no connection string and cannot read one now. */
  private unavailable(): SyncError {
    const failed = this.failed;
    const retryAfterSeconds = Math.max(1, Math.ceil(((failed?.until ?? Date.now()) - Date.now()) / 1000));
    return new SyncError('service_unavailable', `the database credentials cannot be read from Secrets Manager (${failed?.type ?? 'unknown'}): retry later`, {
      reason: 'database_secret_unavailable',
    }, retryAfterSeconds);
  }

  /** A connection was refused for its credentials: the next use reads the secret again. */
  authenticationFailed(): void {
    this.stale = 'auth_failed';
  }

  private read(): Promise<string> {
    this.reading ??= (async () => {
      const reason = this.current ? (this.stale ?? 'expired') : 'first';
      try {
        const response = await this.client.fetch(this.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'secretsmanager.GetSecretValue' },
          body: JSON.stringify({ SecretId: this.options.secretId }),
        });
        const body = (await response.json().catch(() => ({}))) as { SecretString?: unknown; __type?: unknown; message?: unknown; Message?: unknown };
        if (!response.ok || typeof body.SecretString !== 'string') {
          throw Object.assign(new Error(`GetSecretValue of the database secret failed: ${response.status} ${String(body.__type ?? '')} ${String(body.message ?? body.Message ?? '')}`.trim()), {
            code: 'ESECRET',
            status: response.status,
            awsType: String(body.__type ?? `http_${response.status}`),
          });
        }
        const url = connectionStringOf(body.SecretString, this.options.target);
        const changed = this.current !== undefined && this.current.url !== url;
        this.current = { url, readAt: Date.now() };
        this.stale = undefined;
        this.failed = undefined;
        this.options.onRead?.({ changed, reason });
        return url;
      } catch (error) {
        // Once per failed read, however many requests waited on it: a JSON line that a metric
        // filter can count (the template's DatabaseSecretReadFailures).
        this.failed = { until: Date.now() + this.options.retryAfterFailureMs, type: failureType(error), message: (error as Error).message };
        logEvent(this.current ? 'warn' : 'error', 'database_secret_read_failed', {
          reason,
          type: this.failed.type,
          status: (error as { status?: unknown }).status ?? null,
          message: this.failed.message,
          serving_cached: this.current !== undefined,
          retry_in_ms: this.options.retryAfterFailureMs,
        });
        this.options.onReadFailed?.({ type: this.failed.type, servingCached: this.current !== undefined });
        throw error;
      }
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
export function databaseSecretFromEnv(env: Record<string, string | undefined>, ttlMs: number, onRead?: SecretSourceOptions['onRead'], retryAfterFailureMs = 30_000,
  onReadFailed?: SecretSourceOptions['onReadFailed']): DatabaseSecret | undefined {
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
    retryAfterFailureMs,
    target: { host: env['DATABASE_HOST'] || undefined, dbname: env['DATABASE_NAME'] || undefined, sslmode: env['DATABASE_SSLMODE'] || undefined },
    ...(onRead ? { onRead } : {}),
    ...(onReadFailed ? { onReadFailed } : {}),
  });
}
