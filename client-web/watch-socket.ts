/**
 * `watch: 'websocket'`: the client's wake-up from push notifications (protocol §5.9). One socket to
 * `GET /sync/ws` (the local gateway) or the API Gateway WebSocket API (AWS), opened on the first
 * `watch()` and kept; the server sends `{"type":"changed","latest_bundle_seq":n}` after each
 * commit of the user. `wait` answers like the long poll does, so callers have one loop:
 *
 *   closed ──open──▶ open ──message n > checkpoint──▶ changed
 *     ▲  │            │ └──────────wait ends──────────▶ unchanged
 *     │  │ refused     └──closed─────────────────────▶ changed (re-check: commits may have been missed)
 *     │  └──────────▶ failed: long polls for `retryAfterFailureMs`, then try again
 *
 * A freshly opened socket first answers "changed": commits made before it opened were not
 * announced on it, so the caller syncs once to be sure. A keepalive ping goes out every few
 * minutes (API Gateway drops a connection after 10 idle minutes), carrying the highest bundle
 * seq the device has heard of: a server that finds the user past it answers "changed", so a
 * notification that never arrived is made up for within one ping interval.
 */
import { WS_PATH, WS_PROTOCOL_PARAM, WS_SOURCE_PARAM, WS_TOKEN_PARAM, type PingMessage } from '../core/protocol/notify.js';
import { type ProtocolVersion } from '../core/protocol/version.js';
import { type NotifiedPage } from './notified-pages.js';
import { NotifiedChange } from './wire.js';
import { type WatchResult } from './api.js';
import { type ClientContext } from './context.js';
import { type TokenProvider } from './transport.js';

/**
 * A socket event handler, compared bivariantly in its parameter (as methods are): the browser's
 * `WebSocket` declares `(this: WebSocket, ev: MessageEvent) => any` and the `ws` package's
 * `(event: WebSocket.MessageEvent) => void`, and both must fit the little the client reads.
 */
export type WebSocketHandler<E> = { bivarianceHack(event: E): void }['bivarianceHack'];

/** What the client needs of a WebSocket; the browser's and the `ws` package's both fit. */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: WebSocketHandler<unknown> | null;
  onmessage: WebSocketHandler<{ readonly data: unknown }> | null;
  onclose: WebSocketHandler<unknown> | null;
  onerror: WebSocketHandler<unknown> | null;
  send(data: string): void;
  close(): void;
}

/**
 * Opens a WebSocket (`webSocket` in the client's config): `(url) => new WebSocket(url)` with the
 * platform's `WebSocket` or the `ws` package's.
 */
export type WebSocketFactory = (url: string) => WebSocketLike;

export interface SocketWatchOptions {
  /** `ws(s)://host/sync/ws` locally, or the WebSocket API's `wss://…/{stage}` in AWS. */
  readonly url: string;
  readonly getToken: TokenProvider;
  readonly sourceId: () => string;
  readonly connect: WebSocketFactory;
  readonly pingIntervalMs?: number;
  /** After a refused or failed socket, long polls are used this long before the next try. */
  readonly retryAfterFailureMs?: number;
  readonly openTimeoutMs?: number;
  readonly now?: () => number;
  /** The protocol pull pages are asked in (the client's); without it, notifications carry none. */
  readonly protocol?: () => ProtocolVersion;
  /** Receives the pull page a notification carries (protocol §5.9). */
  readonly onPage?: (page: NotifiedPage) => void;
}

/** The socket URL a base URL implies: its origin with ws(s) and the gateway's path. */
export function defaultSocketUrl(baseUrl: string): string {
  const url = new URL(baseUrl.replace(/\/+$/, '') + WS_PATH);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

/** The platform's WebSocket, when it has one (browsers, Node 22+). */
export function platformWebSocket(): WebSocketFactory | undefined {
  const ctor = (globalThis as { WebSocket?: new (url: string) => WebSocketLike }).WebSocket;
  return ctor ? (url) => new ctor(url) : undefined;
}

const OPEN = 1;

export class SocketWatch {
  private socket: WebSocketLike | null = null;
  private opening: Promise<boolean> | null = null;
  private latestSeen = 0;
  /** The highest checkpoint a wait was asked from: the device has that bundle already. */
  private checkpointSeen = 0;
  private fresh = false;
  private failedUntil = 0;
  private pinger: ReturnType<typeof setInterval> | undefined;
  private readonly listeners = new Set<(event: 'message' | 'closed') => void>();
  private closed = false;

  constructor(private readonly options: SocketWatchOptions) {}

  /**
   * Waits until the server announces a bundle past `checkpoint`, or `timeoutMs` passes, or
   * `signal` aborts. Null: no socket could be had, use a long poll instead.
   */
  async wait(checkpoint: number, timeoutMs: number, signal?: AbortSignal): Promise<WatchResult | null> {
    return (await this.waitAnnounced(checkpoint, timeoutMs, signal))?.result ?? null;
  }

  /**
   * `wait`, saying whether a `changed` answer is an announcement of a bundle (a message), or a
   * re-check that names none: a freshly opened or a lost socket, which may have missed some.
   */
  async waitAnnounced(checkpoint: number, timeoutMs: number, signal?: AbortSignal): Promise<{ result: WatchResult; announced: boolean } | null> {
    const now = this.options.now ?? Date.now;
    this.checkpointSeen = Math.max(this.checkpointSeen, checkpoint);
    if (this.closed || now() < this.failedUntil) return null;
    if (!(await this.ensureOpen())) {
      this.failedUntil = now() + (this.options.retryAfterFailureMs ?? 30_000);
      return null;
    }
    const latest = () => Math.max(this.latestSeen, checkpoint);
    if (this.fresh) {
      this.fresh = false;
      return { result: { changed: true, latestBundleSeq: latest() }, announced: false };
    }
    if (this.latestSeen > checkpoint) return { result: { changed: true, latestBundleSeq: this.latestSeen }, announced: true };
    return new Promise((resolve) => {
      const finish = (result: WatchResult, announced: boolean) => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        signal?.removeEventListener('abort', onAbort);
        resolve({ result, announced });
      };
      const unchanged = () => finish({ changed: false, latestBundleSeq: latest() }, false);
      const onAbort = unchanged;
      const listener = (event: 'message' | 'closed') => {
        // A lost socket may have missed announcements: the caller checks by syncing.
        if (event === 'closed') finish({ changed: true, latestBundleSeq: latest() }, false);
        else if (this.latestSeen > checkpoint) finish({ changed: true, latestBundleSeq: this.latestSeen }, true);
      };
      const timer = setTimeout(unchanged, timeoutMs);
      this.listeners.add(listener);
      if (signal?.aborted) unchanged();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Closes the socket for good (the client closes). */
  close(): void {
    this.closed = true;
    this.drop();
  }

  private ensureOpen(): Promise<boolean> {
    if (this.socket?.readyState === OPEN) return Promise.resolve(true);
    this.opening ??= this.open().finally(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private async open(): Promise<boolean> {
    const url = new URL(this.options.url);
    url.searchParams.set(WS_TOKEN_PARAM, await this.options.getToken());
    url.searchParams.set(WS_SOURCE_PARAM, this.options.sourceId());
    if (this.options.protocol && this.options.onPage) url.searchParams.set(WS_PROTOCOL_PARAM, String(this.options.protocol()));
    let socket: WebSocketLike;
    try {
      socket = this.options.connect(url.toString());
    } catch {
      return false;
    }
    return new Promise<boolean>((resolve) => {
      let settled = false;
      // A socket that neither opens nor fails (a proxy holding the upgrade) counts as failed.
      const timeout = setTimeout(() => {
        if (settled) return;
        settled = true;
        socket.close();
        resolve(false);
      }, this.options.openTimeoutMs ?? 10_000);
      socket.onopen = () => {
        clearTimeout(timeout);
        if (settled) return;
        settled = true;
        this.socket = socket;
        this.fresh = true;
        const every = this.options.pingIntervalMs ?? 240_000;
        this.pinger = setInterval(() => {
          const ping: PingMessage = { type: 'ping', latest_bundle_seq: Math.max(this.latestSeen, this.checkpointSeen) };
          if (socket.readyState === OPEN) socket.send(JSON.stringify(ping));
        }, every);
        resolve(true);
      };
      socket.onmessage = (event) => {
        // A socket closed for good (the client closed, or its attachment changed) brings nothing more.
        if (this.closed || this.socket !== socket) return;
        let parsed: ReturnType<typeof NotifiedChange.safeParse>;
        try {
          parsed = NotifiedChange.safeParse(JSON.parse(String(event.data)));
        } catch {
          return;
        }
        if (!parsed.success) return;
        if (parsed.data.pull) this.options.onPage?.(parsed.data.pull);
        this.latestSeen = Math.max(this.latestSeen, parsed.data.latest_bundle_seq);
        for (const listener of [...this.listeners]) listener('message');
      };
      socket.onerror = () => undefined;
      socket.onclose = () => {
        clearTimeout(timeout);
        if (!settled) {
          settled = true;
          resolve(false);
          return;
        }
        if (this.socket === socket) this.drop();
        for (const listener of [...this.listeners]) listener('closed');
      };
    });
  }

  private drop(): void {
    clearInterval(this.pinger);
    const socket = this.socket;
    this.socket = null;
    if (socket && socket.readyState <= OPEN) socket.close();
  }
}

/** The socket watch of a client, or null when the platform has no WebSocket and none was given. */
export function socketWatchFor(ctx: ClientContext): SocketWatch | null {
  const connect = ctx.config.webSocket ?? platformWebSocket();
  if (!connect) return null;
  return new SocketWatch({
    url: ctx.config.webSocketUrl ?? defaultSocketUrl(ctx.config.baseUrl),
    getToken: ctx.config.getToken,
    sourceId: () => ctx.sourceRef.current,
    connect,
    protocol: () => ctx.transport.protocol,
    onPage: (page) => ctx.notified.offer(page),
  });
}
