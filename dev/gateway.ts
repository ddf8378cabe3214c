/**
 * The local gateway: HTTP → the same API Gateway HTTP API (payload v2) event Lambda receives →
 * the handler of the matching function. It verifies the bearer token itself (HS256 with
 * SYNC_JWT_SECRET, or a JWKS URL) and passes the claims as the JWT authorizer would, so what runs
 * locally is exactly what runs in Lambda.
 */
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type Duplex } from 'node:stream';
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { createRemoteJWKSet, jwtVerify, SignJWT, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { LAMBDA_PAYLOAD_BYTES_MAX } from '../core/limits.js';
import { serializedOver } from '../core/protocol/wire-bytes.js';
import { attachWebSockets, type GatewaySockets } from './gateway-ws.js';
import { functionRoutes, createHandler, type LambdaHandler, type Route, type Runtime, type HttpApiEvent } from '../functions/index.js';
import { runMaintenance } from '../core/sync/index.js';
import { errorRegistry, type ErrorCode } from '../core/errors.js';

export interface GatewayAuth {
  readonly secret?: string | undefined;
  readonly jwksUrl?: string | undefined;
  /** SYNC_JWT_ISSUER: the `iss` every token must carry; required with a JWKS. */
  readonly issuer?: string | undefined;
  /** SYNC_JWT_AUDIENCE: an `aud` every token must carry; required with a JWKS. */
  readonly audience?: string | undefined;
}

export interface GatewayOptions {
  readonly runtime: Runtime;
  readonly auth: GatewayAuth;
  readonly host?: string;
  readonly port?: number;
  /** Serves these files for non-API paths (the demo app). */
  readonly staticDir?: string | undefined;
  /** Enables POST /dev/token {user_id} → a signed HS256 token. Local development only. */
  readonly devTokens?: boolean;
  /**
   * The bearer token of operator routes (/syncx/operator/*), standing in for the IAM signature
   * API Gateway checks in AWS; without one those routes answer 403.
   */
  readonly operatorToken?: string | undefined;
  /**
   * Lambda's invoke limit, as the gateway enforces it on the event and the result (default
   * LAMBDA_PAYLOAD_BYTES_MAX). Above it API Gateway answers itself, without a Lockstep body: 413
   * for the request, 502 for the result. Tests lower it to reach those answers cheaply.
   */
  readonly invokeLimitBytes?: number;
  /** Wraps every handler call; tests use it to inject faults. */
  readonly intercept?: (event: HttpApiEvent, next: () => Promise<unknown>) => Promise<unknown>;
  /**
   * Runs maintenance every `maintenance_interval_seconds`, as Lambda's schedule does in AWS
   * (expired sessions stop counting against the per-user caps only once it removes them).
   */
  readonly maintenance?: boolean;
}

export interface Gateway {
  readonly url: string;
  readonly server: Server;
  /** The WebSockets of `GET /sync/ws` (push notifications). */
  readonly sockets: GatewaySockets;
  /**
   * Stops serving: cuts every connection (aborting the work of its request) and resolves once all
   * that work has returned, so the runtime's pool may be ended right after.
   */
  close(): Promise<void>;
}

interface Group {
  readonly routes: readonly Route[];
  readonly handler: LambdaHandler;
}

const CORS_HEADERS: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, sync-source-id, sync-protocol-version',
  'access-control-expose-headers': 'x-lockstep-round-trips, retry-after, sync-protocol-version',
  'access-control-max-age': '600',
};

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.webmanifest': 'application/manifest+json',
};

function send(res: ServerResponse, status: number, body: string | Buffer | undefined, headers: Record<string, string> = {}): void {
  // A length, as API Gateway sends: a client can tell the bytes on the wire from the decoded body.
  const length = body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) };
  res.writeHead(status, { ...CORS_HEADERS, ...headers, ...length });
  res.end(body);
}

function sendError(res: ServerResponse, status: number, error: ErrorCode, message: string): void {
  send(res, status, JSON.stringify({ error, message }), { 'content-type': 'application/json' });
}

/**
 * Answers without reading the body the client is still sending, and discards the rest as it
 * arrives (never buffered, so an unauthenticated upload holds no memory); past DRAIN_MAX_BYTES
 * the connection is dropped. Draining instead of closing at once lets the client read the answer.
 */
function refuseUnread(req: IncomingMessage, res: ServerResponse, status: number, error: ErrorCode, message: string): void {
  let seen = 0;
  req.on('data', (chunk: Buffer) => {
    seen += chunk.byteLength;
    if (seen > DRAIN_MAX_BYTES) req.destroy();
  });
  req.on('error', () => undefined);
  req.resume();
  sendError(res, status, error, message);
}

/**
 * A request Node's parser refused before any handler saw it: an oversized header is a typed 431,
 * anything else malformed a typed 400 (Node's own answers carry no body), a timeout or a reset
 * just closes.
 */
function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (!socket.writable || error.code === 'ECONNRESET' || error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    socket.destroy();
    return;
  }
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const status = tooLarge ? errorRegistry.request_headers_too_large.status : errorRegistry.invalid_request.status;
  const body = JSON.stringify(tooLarge
    ? { error: 'request_headers_too_large', message: 'the request headers are too large' }
    : { error: 'invalid_request', message: 'the request is not valid HTTP' });
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
    `connection: close\r\n\r\n${body}`);
}

/**
 * Past this many body bytes the gateway stops draining and drops the connection, as API Gateway
 * does with payloads over its own limit (10 MB).
 */
const DRAIN_MAX_BYTES = 10 * 1024 * 1024;

/**
 * Reads the body, refusing more than `limit` bytes without buffering the rest. An oversized body
 * is still drained (discarded) to its end before the 413 goes out: answering and closing while the
 * client is still uploading resets the connection, and the client never sees the 413.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too_large'> {
  return new Promise((resolve, reject) => {
    // Gone already (while its token was checked): its 'close' will not come again, and neither
    // will 'end', even when the whole body had arrived (complete) before the socket was cut.
    if (req.destroyed && !req.readableEnded) return reject(Object.assign(new Error('request aborted'), { code: 'ECONNRESET' }));
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size <= limit) chunks.push(chunk);
      else {
        chunks.length = 0;
        if (size > DRAIN_MAX_BYTES) req.destroy();
      }
    });
    req.on('end', () => resolve(size > limit ? 'too_large' : Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('close', () => {
      // Not `complete`: a body that arrived whole but was not read yet ends with no 'end' when the
      // socket is cut, and the handler would wait for it until the gateway's close gave up.
      if (!req.readableEnded) reject(Object.assign(new Error('request aborted'), { code: 'ECONNRESET' }));
    });
  });
}

function templateMatches(template: string, path: string): boolean {
  const want = template.split('/');
  const have = path.split('/');
  return want.length === have.length && want.every((w, i) => (w.startsWith('{') ? have[i] !== '' : w === have[i]));
}

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { runtime } = options;
  const groups: Group[] = Object.values(functionRoutes).map((routes) => ({ routes, handler: createHandler(routes, async () => runtime) }));
  const { issuer, audience } = options.auth;
  // A JWKS (Auth0, Cognito, …) signs tokens for every application of its tenant: without an
  // issuer and an audience to check, any of them would be accepted here.
  if (options.auth.jwksUrl && (!issuer || !audience)) {
    throw new Error('SYNC_JWKS_URL needs SYNC_JWT_ISSUER and SYNC_JWT_AUDIENCE: the tokens of other issuers and applications must not pass');
  }
  const secret = options.auth.secret ? new TextEncoder().encode(options.auth.secret) : undefined;
  const jwks: JWTVerifyGetKey | undefined = options.auth.jwksUrl ? createRemoteJWKSet(new URL(options.auth.jwksUrl)) : undefined;
  const claimName = runtime.config.userIdClaim;
  const invokeLimitBytes = options.invokeLimitBytes ?? LAMBDA_PAYLOAD_BYTES_MAX;
  // Every token expires (API Gateway's authorizer requires exp too); issuer and audience are
  // checked whenever they are configured.
  const checks = { requiredClaims: ['exp'], ...(issuer ? { issuer } : {}), ...(audience ? { audience } : {}) };

  async function verify(header: string | undefined): Promise<JWTPayload | null> {
    const match = /^Bearer\s+(\S+)$/i.exec(header ?? '');
    if (!match) return null;
    try {
      if (jwks) return (await jwtVerify(match[1] as string, jwks, checks)).payload;
      if (secret) return (await jwtVerify(match[1] as string, secret, { ...checks, algorithms: ['HS256'] })).payload;
    } catch {
      return null;
    }
    return null;
  }

  async function serveStatic(res: ServerResponse, path: string): Promise<void> {
    if (!options.staticDir) return sendError(res, 404, 'route_not_found', `no route for ${path}`);
    let decoded: string;
    try {
      decoded = decodeURIComponent(path);
    } catch {
      return sendError(res, 400, 'invalid_request', 'the path is not valid percent-encoded UTF-8');
    }
    const relative = normalize(decoded).replace(/^(\.\.[/\\])+/, '');
    let file = join(options.staticDir, relative);
    if (!file.startsWith(options.staticDir)) return sendError(res, 404, 'route_not_found', 'not found');
    const info = await stat(file).catch(() => null);
    if (!info || info.isDirectory()) file = join(options.staticDir, 'index.html');
    const body = await readFile(file).catch(() => null);
    if (!body) return sendError(res, 404, 'route_not_found', 'not found');
    send(res, 200, body, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-cache' });
  }

  async function mintDevToken(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req, 4096);
    let userId: unknown;
    try {
      userId = body === 'too_large' ? undefined : (JSON.parse(body.toString('utf8')) as { user_id?: unknown }).user_id;
    } catch {
      userId = undefined;
    }
    if (typeof userId !== 'string' || !/^[A-Za-z0-9._@-]{1,64}$/.test(userId) || !secret) {
      return sendError(res, 400, 'invalid_request', 'send {"user_id": "..."} (1-64 characters of [A-Za-z0-9._@-])');
    }
    const token = await new SignJWT({ [claimName]: userId }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('12h').sign(secret);
    send(res, 200, JSON.stringify({ token, user_id: userId }), { 'content-type': 'application/json' });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      return refuseUnread(req, res, 400, 'invalid_request', 'the request target is not a valid path');
    }
    const method = (req.method ?? 'GET').toUpperCase();
    if (method === 'OPTIONS') return send(res, 204, undefined);
    if (options.devTokens && method === 'POST' && url.pathname === '/dev/token') return mintDevToken(req, res);
    const group = groups.find((g) => g.routes.some((r) => templateMatches(r.path, url.pathname)));
    if (!group) {
      if (method === 'GET' && !url.pathname.startsWith('/sync')) return serveStatic(res, url.pathname);
      return sendError(res, 404, 'route_not_found', `no route for ${method} ${url.pathname}`);
    }
    const route = group.routes.find((r) => r.method === method && templateMatches(r.path, url.pathname));
    // The token first, before a byte of the body is read: an unauthenticated upload is refused as
    // it arrives, never buffered.
    let claims: JWTPayload | null = null;
    let operator = false;
    if (route?.auth === 'operator') {
      operator = options.operatorToken !== undefined && sameSecret(req.headers.authorization ?? '', `Bearer ${options.operatorToken}`);
      if (!operator) return refuseUnread(req, res, 403, 'forbidden', 'operator routes need the operator token (LOCKSTEP_OPERATOR_TOKEN) as a bearer token');
    } else if (route?.auth ?? true) {
      claims = await verify(req.headers.authorization);
      if (!claims || typeof claims[claimName] !== 'string') {
        return refuseUnread(req, res, 401, 'authentication_failed', 'a valid bearer token is required');
      }
    }
    const body = await readBody(req, runtime.config.limits.maxRequestBytes);
    if (body === 'too_large') {
      return sendError(res, 413, 'payload_too_large', `the request body exceeds max_request_bytes (${runtime.config.limits.maxRequestBytes} bytes)`);
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(',') : v;
    const query: Record<string, string> = {};
    url.searchParams.forEach((v, k) => {
      query[k] = query[k] === undefined ? v : `${query[k]},${v}`;
    });
    const now = new Date();
    const event: HttpApiEvent = {
      version: '2.0',
      routeKey: route ? `${route.method} ${route.path}` : '$default',
      rawPath: url.pathname,
      rawQueryString: url.search.slice(1),
      headers,
      ...(Object.keys(query).length ? { queryStringParameters: query } : {}),
      requestContext: {
        accountId: 'local',
        apiId: 'local',
        domainName: url.host,
        domainPrefix: 'local',
        http: { method, path: url.pathname, protocol: 'HTTP/1.1', sourceIp: req.socket.remoteAddress ?? '', userAgent: req.headers['user-agent'] ?? '' },
        requestId: randomUUID(),
        routeKey: route ? `${route.method} ${route.path}` : '$default',
        stage: '$default',
        time: now.toUTCString(),
        timeEpoch: now.getTime(),
        ...(claims ? { authorizer: { jwt: { claims: claims as Record<string, unknown>, scopes: [] } } } : {}),
        ...(operator ? { authorizer: { iam: { userArn: 'local-operator', accessKey: '', accountId: 'local' } } } : {}),
      },
      ...(body.byteLength ? { body: body.toString('utf8') } : {}),
      isBase64Encoded: false,
    } as HttpApiEvent;
    // API Gateway's own answers when Lambda refuses the event or the result (not Lockstep bodies).
    if (serializedOver(event, invokeLimitBytes)) return send(res, 413, JSON.stringify({ message: 'Request Entity Too Large' }), { 'content-type': 'application/json' });
    // A caller that goes away (an abandoned long poll) aborts the work done for it.
    const gone = new AbortController();
    if (res.destroyed) gone.abort();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    const invoke = () => group.handler(event, { signal: gone.signal });
    const result = (await (options.intercept ? options.intercept(event, invoke) : invoke())) as Awaited<ReturnType<LambdaHandler>>;
    if (serializedOver(result, invokeLimitBytes)) return send(res, 502, JSON.stringify({ message: 'Internal Server Error' }), { 'content-type': 'application/json' });
    // API Gateway decodes a base64 result (a compressed body) before it goes out; so does this.
    send(res, result.statusCode, result.isBase64Encoded && result.body !== undefined ? Buffer.from(result.body, 'base64') : result.body, result.headers);
  }

  // One run at a time; a run that fails (the database is down) is simply tried again next time.
  let maintaining = false;
  const limits = runtime.config.limits;
  const timer = options.maintenance
    ? setInterval(() => {
        if (maintaining) return;
        maintaining = true;
        track(runMaintenance(runtime.db.forRequest(), limits, limits.maintenanceIntervalSeconds * 1000)
          .catch(() => undefined)
          .finally(() => {
            maintaining = false;
          }));
      }, limits.maintenanceIntervalSeconds * 1000)
    : undefined;
  timer?.unref();

  // What runs for a request or the maintenance timer: close() waits for it, so whoever ends the
  // runtime's pool after close() never pulls it from under a handler still finishing (an aborted
  // long poll reads once more on its way out).
  const running = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    running.add(work);
    void work.finally(() => running.delete(work)).catch(() => undefined);
  };

  const server = createServer((req, res) => {
    track(handle(req, res).catch((error: unknown) => {
      // The client went away mid-request: nobody to answer, nothing to report.
      if (!req.readableEnded && (error as { code?: unknown }).code === 'ECONNRESET') return void res.destroy();
      console.error('gateway error', error);
      if (!res.headersSent) sendError(res, 500, 'internal_error', 'gateway error');
      else res.destroy();
    }));
  });
  server.on('clientError', answerClientError);
  server.keepAliveTimeout = 30_000;
  const sockets = attachWebSockets(server, runtime, verify);
  // A busy port is an error for the caller (npm start names the holder), not an unhandled 'error' event.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${port}`,
    server,
    sockets,
    close: async () => {
      sockets.close();
      clearInterval(timer);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Cut connections abort their requests' work; then wait until it has all returned, at most
      // as long as a request may take (every wait of a request is bounded by then).
      server.closeAllConnections();
      await closed;
      const bound = new Promise<void>((resolve) => setTimeout(resolve, limits.requestTimeoutMs).unref());
      const drained = (async () => {
        while (running.size) await Promise.allSettled([...running]);
      })();
      await Promise.race([drained, bound]);
    },
  };
}

/** Compares two secrets in time independent of where they differ. */
function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
