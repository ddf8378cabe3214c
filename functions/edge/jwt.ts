/**
 * Bearer token verification where no API Gateway authorizer does it: the WebSocket API's
 * `$connect` (API Gateway WebSocket APIs have no JWT authorizer) and the local gateway's socket.
 * The same rules as the HTTP API's JWT authorizer: signature by the issuer's keys (JWKS), issuer
 * and audience when configured, `exp` required.
 *
 * A JWKS that cannot be fetched is not a bad token (issue 25 item 3: from a VPC without a route
 * out every `$connect` answered 401, so every device fell back to long polls, the expensive mode,
 * and nothing alarmed). The last good JWKS keeps serving; without one the verifier throws a 503
 * (`service_unavailable`, reason `jwks_unavailable`, Retry-After) and reports it (`onUnavailable`:
 * the ws function counts JwksUnavailable, which the template alarms on). A token whose key the
 * JWKS lacks fetches it again (a key rotation), at most once per `jwksRetryAfterFailureSeconds`.
 */
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { type Config } from '../../core/config.js';
import { SyncError } from '../../core/errors.js';
import { type Limits } from '../../core/limits.js';
import { logEvent } from '../../core/log.js';

/** Null for a token that is not valid; throws SyncError 503 when validity cannot be told. */
export type TokenVerifier = (token: string) => Promise<JWTPayload | null>;

export type JwksLimits = Pick<Limits, 'jwksTimeoutMs' | 'jwksRefreshSeconds' | 'jwksRetryAfterFailureSeconds'>;

export interface VerifierOptions {
  readonly limits: JwksLimits;
  /** A JWKS fetch failed (`servingCached`: the last good JWKS answered instead). */
  readonly onUnavailable?: (event: { readonly servingCached: boolean }) => void;
  readonly fetch?: typeof fetch;
}

/** The JWKS of one URL: fetched, cached, refetched for rotation, the last good one kept. */
class RemoteKeys {
  private keys: { readonly get: JWTVerifyGetKey; readonly at: number } | undefined;
  private fetching: Promise<JWTVerifyGetKey> | undefined;
  private failedUntil = 0;
  private lastTry = 0;

  constructor(private readonly url: string, private readonly options: VerifierOptions) {}

  /**
   * The key set: cached, or fetched when due. `fresh`: the token names a key the cached set
   * lacks, so fetch again (a rotation), unless a fetch just ran. While fetches fail the last
   * good set serves, but a token it cannot check is a 503, never a 401.
   */
  async get(fresh = false): Promise<JWTVerifyGetKey> {
    const now = Date.now();
    const due = !this.keys || now - this.keys.at > this.options.limits.jwksRefreshSeconds * 1000;
    if (this.keys && !due && !fresh) return this.keys.get;
    if (now < this.failedUntil) {
      if (this.keys && !fresh) return this.keys.get;
      throw this.unavailable();
    }
    if (fresh && this.keys && now - this.lastTry < this.options.limits.jwksRetryAfterFailureSeconds * 1000) return this.keys.get;
    try {
      return await (this.fetching ??= this.fetchKeys().finally(() => {
        this.fetching = undefined;
      }));
    } catch {
      if (this.keys && !fresh) return this.keys.get;
      throw this.unavailable();
    }
  }

  private async fetchKeys(): Promise<JWTVerifyGetKey> {
    this.lastTry = Date.now();
    try {
      const response = await (this.options.fetch ?? fetch)(this.url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(this.options.limits.jwksTimeoutMs) });
      if (!response.ok) throw new Error(`answered ${response.status}`);
      const get = createLocalJWKSet((await response.json()) as JSONWebKeySet);
      this.keys = { get, at: Date.now() };
      this.failedUntil = 0;
      return get;
    } catch (error) {
      this.failedUntil = Date.now() + this.options.limits.jwksRetryAfterFailureSeconds * 1000;
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      logEvent(this.keys ? 'warn' : 'error', 'jwks_unavailable', {
        url: this.url,
        problem: `${(error as Error).message}${cause ? ` (${cause})` : ''}`,
        serving_cached: this.keys !== undefined,
        retry_in_ms: this.options.limits.jwksRetryAfterFailureSeconds * 1000,
      });
      this.options.onUnavailable?.({ servingCached: this.keys !== undefined });
      throw error;
    }
  }

  private unavailable(): SyncError {
    const retryAfterSeconds = Math.max(1, Math.ceil((this.failedUntil - Date.now()) / 1000));
    return new SyncError('service_unavailable', 'the token issuer\'s keys (JWKS) cannot be fetched now: retry later', { reason: 'jwks_unavailable' }, retryAfterSeconds);
  }
}

/** The verifier the configuration describes, or null when it names no key. */
export function tokenVerifier(jwt: Config['jwt'], options: VerifierOptions): TokenVerifier | null {
  const jwksUrl = jwt.jwksUrl ?? (jwt.issuer ? `${jwt.issuer.replace(/\/+$/, '')}/.well-known/jwks.json` : undefined);
  const claims = { ...(jwt.issuer ? { issuer: jwt.issuer } : {}), ...(jwt.audience ? { audience: jwt.audience.split(',').map((a) => a.trim()) } : {}), requiredClaims: ['exp'] };
  if (jwksUrl) {
    const keys = new RemoteKeys(jwksUrl, options);
    return async (token) => {
      const get = await keys.get();
      try {
        return (await jwtVerify(token, get, claims)).payload;
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'ERR_JWKS_NO_MATCHING_KEY') return null;
      }
      // A key the cached JWKS lacks: the issuer may have rotated; fetch it again and retry once.
      try {
        return (await jwtVerify(token, await keys.get(true), claims)).payload;
      } catch (error) {
        if (error instanceof SyncError) throw error;
        return null;
      }
    };
  }
  if (!jwt.secret) return null;
  const secret = new TextEncoder().encode(jwt.secret);
  return async (token) => {
    try {
      return (await jwtVerify(token, secret, { ...claims, algorithms: ['HS256'] })).payload;
    } catch {
      return null;
    }
  };
}
