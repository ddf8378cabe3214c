/**
 * HTTP transport of the client: bearer token from the app's provider, the Sync-Source-ID
 * header, JSON in and out, typed errors, and bounded retries with exponential backoff and full
 * jitter on network failures, 429 and 5xx, honouring Retry-After.
 *
 * Every endpoint is safe to retry: chunks are idempotent for the same chunk, commit answers the
 * same again, and a repeated create only leaves an unused session that expires. The one 503 that
 * is not retried here is `commit_outcome_unknown`: the push protocol answers it by starting over
 * from session create with the frozen bundle (docs/protocol.md §10.2).
 */
import type * as z from 'zod/mini';
import { PROTOCOL_HEADER, type ProtocolVersion } from '../core/protocol/version.js';
import { isServerErrorCode, type ServerErrorCode, type TransportErrorCode } from './errors.js';

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = Object.freeze({ maxAttempts: 6, baseDelayMs: 200, maxDelayMs: 10_000 });

/**
 * The app's credential provider, called before every request. After the server refused the token
 * it gave (401), it is called once more with `{ refresh: true }`: a provider that caches tokens
 * returns a fresh one then, and the request is tried again with it. A provider that throws fails
 * the request with `authentication_failed`.
 */
export type TokenProvider = (request?: { readonly refresh: boolean }) => string | Promise<string>;

export interface TransportConfig {
  /** Origin of the sync API, e.g. `https://api.example.com` (no trailing slash). */
  readonly baseUrl: string;
  readonly getToken: TokenProvider;
  readonly retry?: RetryPolicy;
  readonly fetch?: typeof fetch;
  /** Random source for jitter, injectable for tests. */
  readonly random?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/** A failure answered by the server (`code` from the body) or a transport failure. */
export class SyncHttpError extends Error {
  override readonly name = 'SyncHttpError';
  constructor(
    /** The server's error code, or a transport failure (`network_error`, `invalid_response`, `aborted`). */
    readonly code: ServerErrorCode | TransportErrorCode,
    readonly status: number,
    message: string,
    readonly body: Record<string, unknown> = {},
    readonly retryAfterMs?: number,
    /** The app's token provider failed (no request was sent). */
    readonly fromProvider = false,
  ) {
    super(message);
  }

  /** Whether waiting and trying again can succeed. */
  get retriable(): boolean {
    if (this.code === 'commit_outcome_unknown' || this.code === 'aborted') return false;
    return this.code === 'network_error' || this.status === 429 || this.status >= 500;
  }
}

/** Delay before attempt `attempt` (1 = the first retry): full jitter, capped, at least Retry-After. */
export function backoffDelayMs(policy: RetryPolicy, attempt: number, random: () => number, retryAfterMs?: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  const jittered = Math.floor(random() * ceiling);
  return Math.max(jittered, retryAfterMs ?? 0);
}

function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds, 300) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.min(date - Date.now(), 300_000));
}

export interface RequestOptions<T> {
  readonly body?: unknown;
  /** The body as JSON text already, sent as it is (instead of `body`): a chunk measured as text is not serialized twice. */
  readonly bodyJson?: string;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  /** Validates the answer; a mismatch is `invalid_response`. */
  readonly schema?: z.ZodMiniType<T>;
  readonly retry?: boolean;
  readonly signal?: AbortSignal;
  /** Extra request headers (`cache-control: no-cache` asks for a fresh answer). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The protocol of this request, when not the transport's (a bundle frozen under another one). */
  readonly protocol?: ProtocolVersion;
}

/** What a request aborted by its caller fails with. */
export function abortedError(): SyncHttpError {
  return new SyncHttpError('aborted', 0, 'the request was aborted');
}

export class Transport {
  private readonly policy: RetryPolicy;
  private readonly doFetch: typeof fetch;
  private readonly random: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  /**
   * The protocol requests speak (docs/protocol.md §9): 1 until the client learnt from capabilities
   * that the server serves 2. Sent as Sync-Protocol-Version from 2 on.
   */
  protocol: ProtocolVersion = 1;
  /** Round trips the server reported (x-lockstep-round-trips), summed; for diagnostics. */
  serverRoundTrips = 0;
  requests = 0;
  /** Token refreshes started, and the last one: under way, or its answer (see refreshedAfter). */
  private refreshes = 0;
  private refreshing: Promise<string> | null = null;

  constructor(
    private readonly config: TransportConfig,
    /** The current source id; read on every request because rotation changes it. */
    private readonly sourceId: () => string,
  ) {
    this.policy = config.retry ?? defaultRetryPolicy;
    this.doFetch = config.fetch ?? ((input, init) => fetch(input, init));
    this.random = config.random ?? Math.random;
    this.sleep = config.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  async request<T>(method: 'GET' | 'POST' | 'DELETE', path: string, options: RequestOptions<T> = {}): Promise<T> {
    const retry = options.retry ?? true;
    // A refused token is refreshed once per request (a second 401 is the answer), and the fresh
    // token is sent on every later attempt of it.
    let refreshed: string | undefined;
    for (let attempt = 1; ; attempt++) {
      let sent: string | undefined;
      const seen = this.refreshes;
      try {
        sent = refreshed ?? (await this.token(false));
        return await this.once(method, path, options, sent);
      } catch (error) {
        const e = error instanceof SyncHttpError ? error : new SyncHttpError('network_error', 0, String(error));
        if (options.signal?.aborted) throw abortedError();
        if (e.status === 401 && e.code === 'authentication_failed' && refreshed === undefined && sent !== undefined && !e.fromProvider) {
          refreshed = await this.refreshedAfter(seen);
          attempt--;
          continue;
        }
        if (!retry || !e.retriable || attempt >= this.policy.maxAttempts) throw e;
        await this.sleep(backoffDelayMs(this.policy, attempt, this.random, e.retryAfterMs));
      }
    }
  }

  /**
   * A fresh token for a request refused with the token it took when `seen` refreshes had started.
   * Requests refused together (an attach's connect and its snapshot create, pages asked for ahead)
   * share one provider call: a refresh started since the request took its token is its answer too
   * (its failure fails them all). A token taken after the last refresh gets a refresh of its own.
   */
  private refreshedAfter(seen: number): Promise<string> {
    if (this.refreshing && this.refreshes > seen) return this.refreshing;
    this.refreshes++;
    this.refreshing = this.token(true);
    return this.refreshing;
  }

  /** The bearer token; a provider that throws is the credential's failure, not the network's. */
  private async token(refresh: boolean): Promise<string> {
    try {
      return await (refresh ? this.config.getToken({ refresh: true }) : this.config.getToken());
    } catch (error) {
      throw new SyncHttpError('authentication_failed', 401, `the token provider failed: ${error instanceof Error ? error.message : String(error)}`, {}, undefined, true);
    }
  }

  private async once<T>(method: string, path: string, options: RequestOptions<T>, token: string): Promise<T> {
    const url = new URL(this.config.baseUrl + path);
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = {
      authorization: `Bearer ${token}`,
      'sync-source-id': this.sourceId(),
      ...options.headers,
    };
    const body = options.bodyJson ?? (options.body !== undefined ? JSON.stringify(options.body) : undefined);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const protocol = options.protocol ?? this.protocol;
    if (protocol !== 1) headers[PROTOCOL_HEADER] = String(protocol);
    let response: Response;
    try {
      this.requests++;
      response = await this.doFetch(url, {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      // An abort is the caller's decision, not an outage: it gets its own code.
      if (options.signal?.aborted) throw abortedError();
      throw new SyncHttpError('network_error', 0, `network error: ${error instanceof Error ? error.message : String(error)}`);
    }
    this.serverRoundTrips += Number(response.headers.get('x-lockstep-round-trips') ?? 0);
    const text = await response.text().catch(() => '');
    let json: unknown = undefined;
    if (text) {
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
    }
    if (!response.ok) {
      const body = (json && typeof json === 'object' ? json : {}) as Record<string, unknown>;
      const message = typeof body['message'] === 'string' ? body['message'] : `HTTP ${response.status}`;
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
      if (isServerErrorCode(body['error'])) throw new SyncHttpError(body['error'], response.status, message, body, retryAfterMs);
      // API Gateway answers a request over Lambda's invoke limit with its own 413 and no Lockstep
      // code: it means what ours means, so the caller splits the request either way.
      if (response.status === 413) throw new SyncHttpError('payload_too_large', 413, message, body, retryAfterMs);
      // Not the server's vocabulary (a proxy's error page, a newer server's code): keep the status,
      // which still tells retriable (5xx, 429) from not, and the body for diagnostics.
      const what = typeof body['error'] === 'string' ? `unknown error code ${body['error']}` : `HTTP ${response.status} without an error code`;
      throw new SyncHttpError('invalid_response', response.status, `${what}: ${message}`, body, retryAfterMs);
    }
    // An answer in another protocol than asked (a server older than the capabilities that said
    // otherwise) would be read wrong, and a push would be stored wrong: refused before use.
    if (protocol !== 1 && response.headers.get(PROTOCOL_HEADER) !== String(protocol)) {
      throw new SyncHttpError('invalid_response', response.status, `${method} ${path} was answered without Sync-Protocol-Version ${protocol}: the server does not speak it (reopen the client to read its capabilities again)`);
    }
    if (response.status === 204 || !options.schema) return json as T;
    const parsed = options.schema.safeParse(json);
    if (!parsed.success) {
      throw new SyncHttpError('invalid_response', response.status, `unexpected answer from ${method} ${path}: ${parsed.error.issues[0]?.message ?? ''}`);
    }
    return parsed.data;
  }
}
