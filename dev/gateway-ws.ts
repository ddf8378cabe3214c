/**
 * `GET /sync/ws` on the local gateway: the same push notifications as the API Gateway WebSocket
 * API, so the client has one code path (protocol §5.9). Authenticated like `$connect` in AWS
 * (`?token=<JWT>&source_id=<source>`, or the Authorization and Sync-Source-ID headers for clients
 * that can send them), and fed by the process's commit feed: one LISTEN connection hears every
 * commit of the database (pushes, server writes, other processes), and each signal goes straight
 * to that user's sockets, without a query per commit or per socket. A socket lives no longer than
 * its token: it is closed (1008, "token expired") at the token's `exp`.
 */
import { type IncomingMessage, type Server } from 'node:http';
import { type Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { type JWTPayload } from 'jose';
import { sql } from '../core/db/index.js';
import { isStorableUserId, SOURCE_ID_HEADER, SOURCE_ID_PATTERN, WS_PATH, WS_PROTOCOL_PARAM, WS_SOURCE_PARAM, WS_TOKEN_PARAM, type ChangedMessage } from '../core/protocol/index.js';
import { type ProtocolVersion } from '../core/protocol/version.js';
import { NOTIFY_LAYOUT_VERSION } from '../core/sync/notify/connections.js';
import { type Runtime } from '../functions/index.js';

export interface GatewaySockets {
  /** Open sockets (tests, status). */
  count(): number;
  close(): void;
}

/** A socket that answered no ping within this long is dropped (a vanished client). */
const PING_INTERVAL_MS = 30_000;

function refuse(socket: Duplex, status: number, error: string, message: string): void {
  const body = JSON.stringify({ error, message });
  socket.end(`HTTP/1.1 ${status} ${error}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

export function attachWebSockets(server: Server, runtime: Runtime, verify: (authorization: string | undefined) => Promise<JWTPayload | null>): GatewaySockets {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  const perUser = new Map<string, number>();
  const alive = new WeakSet<WebSocket>();

  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== WS_PATH) return refuse(socket, 404, 'route_not_found', `no WebSocket at ${url.pathname}`);
    const token = url.searchParams.get(WS_TOKEN_PARAM);
    const claims = await verify(token ? `Bearer ${token}` : req.headers.authorization);
    const userId = claims?.[runtime.config.userIdClaim];
    // The HTTP routes' user id check (core/protocol/user-id.ts): no id one entrance refuses gets in by another.
    if (!isStorableUserId(userId)) return refuse(socket, 401, 'authentication_failed', 'a valid token is required');
    const sourceId = url.searchParams.get(WS_SOURCE_PARAM) ?? req.headers[SOURCE_ID_HEADER];
    if (typeof sourceId !== 'string' || !SOURCE_ID_PATTERN.test(sourceId)) return refuse(socket, 400, 'invalid_request', `${WS_SOURCE_PARAM} must be 1-128 characters of [A-Za-z0-9._:-]`);
    const feed = runtime.feed;
    // Without the feed (no direct database URL) there is nothing to push: the client falls back to long polls.
    if (!feed?.listening) return refuse(socket, 503, 'service_unavailable', 'push notifications are not available on this server; use long polls');
    const layout = (await runtime.catalog()).layoutVersion;
    if (layout < NOTIFY_LAYOUT_VERSION) return refuse(socket, 503, 'service_unavailable', `push notifications need sync layout ${NOTIFY_LAYOUT_VERSION}: run bootstrap`);
    const open = perUser.get(userId) ?? 0;
    if (open >= runtime.config.limits.maxWsConnectionsPerUser) return refuse(socket, 429, 'rate_limited', 'too many WebSocket connections for this user');
    // The place is taken now (so concurrent upgrades cannot pass the cap together) and given back
    // by the socket's close, unless the handshake completes and the WebSocket owns it: a request
    // ws refuses (no Sec-WebSocket-Key, a wrong version) never calls back, and used to keep it.
    perUser.set(userId, open + 1);
    let served = false;
    socket.once('close', () => {
      if (!served) release(userId);
    });
    // The protocol the socket's pull pages are rendered in (§5.9); none asked, none sent.
    const asked = url.searchParams.get(WS_PROTOCOL_PARAM);
    const protocol: ProtocolVersion | undefined = asked === '1' ? 1 : asked === '2' ? 2 : undefined;
    wss.handleUpgrade(req, socket, head, (ws) => {
      served = true;
      serve(ws, userId, sourceId, typeof claims?.exp === 'number' ? claims.exp : undefined, protocol);
    });
  }

  function release(userId: string): void {
    const left = (perUser.get(userId) ?? 1) - 1;
    if (left > 0) perUser.set(userId, left);
    else perUser.delete(userId);
  }

  /**
   * `sourceId`: the device the socket was opened for. `exp`: the token's expiry (seconds since the
   * epoch); the socket is closed then (1008, "token expired"). `protocol`: the socket takes pull
   * pages with its notifications, in that protocol (not of the device's own pushes).
   */
  function serve(ws: WebSocket, userId: string, sourceId: string, exp: number | undefined, protocol: ProtocolVersion | undefined): void {
    let expiry: NodeJS.Timeout | undefined;
    if (exp !== undefined) {
      // Timers hold at most 2^31-1 ms (~24.8 days); a later expiry is checked again then.
      const arm = (): void => {
        const left = exp * 1000 - Date.now();
        if (left <= 0) ws.close(1008, 'token expired');
        else expiry = setTimeout(arm, Math.min(left, 2 ** 31 - 1));
      };
      arm();
    }
    const feed = runtime.feed;
    let lastSent = -1;
    /** The highest bundle whose page is being read for this socket: its plain signal waits for it. */
    let reading = -1;
    /**
     * `page`: the raw JSON of the bundle's pull page, spliced in as it came from PostgreSQL. A page
     * still goes after a plain message of the same bundle (PostgreSQL's signal can beat this
     * process's own announcement): a device that has not pulled yet uses it.
     */
    const send = (latest: number, page?: string | null) => {
      if (latest < lastSent || (latest === lastSent && !page) || ws.readyState !== ws.OPEN) return;
      lastSent = latest;
      const message: ChangedMessage = { type: 'changed', latest_bundle_seq: latest };
      const text = JSON.stringify(message);
      ws.send(page ? `${text.slice(0, -1)},"pull":${page}}` : text);
    };
    const unsubscribe = feed?.subscribe(userId, (seq, page, committedBy) => {
      // The device whose push this was has the rows (its answer, its replay): it is told plainly,
      // after the others' pages are on their way to be read (PostgreSQL's repeat waits for it).
      if (seq !== null && page && protocol && committedBy === sourceId) {
        reading = Math.max(reading, seq);
        setImmediate(() => send(seq));
        return;
      }
      if (seq !== null && page && protocol) {
        reading = Math.max(reading, seq);
        void page(protocol).then((text) => send(seq, text), () => send(seq));
        return;
      }
      // PostgreSQL's repeat of a commit whose page is on its way: the page's message announces it.
      if (seq !== null && seq <= reading && protocol) return;
      if (seq !== null) return send(seq);
      // The feed reconnected and may have missed commits: one point read tells.
      runtime.db
        .query<{ latest: string }>(sql`SELECT latest_bundle_seq AS latest FROM sync.user_state WHERE user_id = ${userId}`)
        .then(([row]) => row && send(Number(row.latest)), () => undefined);
    });
    alive.add(ws);
    ws.on('pong', () => alive.add(ws));
    ws.on('message', () => alive.add(ws));
    ws.on('error', () => ws.terminate());
    ws.on('close', () => {
      clearTimeout(expiry);
      unsubscribe?.();
      release(userId);
    });
  }

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    upgrade(req, socket, head).catch(() => refuse(socket, 500, 'internal_error', 'gateway error'));
  };
  server.on('upgrade', onUpgrade);
  const pinger = setInterval(() => {
    for (const ws of wss.clients) {
      if (!alive.has(ws)) ws.terminate();
      else {
        alive.delete(ws);
        ws.ping();
      }
    }
  }, PING_INTERVAL_MS);
  pinger.unref();
  return {
    count: () => wss.clients.size,
    close() {
      clearInterval(pinger);
      server.off('upgrade', onUpgrade);
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    },
  };
}
