/**
 * A TCP proxy in front of PostgreSQL for outage tests: it forwards bytes both ways until told to
 * `cut()` (every connection reset, new ones refused: the database is gone) or to `blackHole()`
 * (connections stay open and new ones are accepted, but no byte moves in either direction: a
 * silently dropped network path, which no socket error reveals). `restore()` forwards again for
 * new connections.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type ProxyMode = 'forward' | 'cut' | 'black-hole';

export interface TcpProxy {
  /** `postgres://…` of the target with the proxy's host and port. */
  readonly url: string;
  mode(): ProxyMode;
  cut(): void;
  blackHole(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  let mode: ProxyMode = 'forward';
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };
  const server: Server = createServer((client) => {
    track(client);
    if (mode === 'cut') {
      client.destroy();
      return;
    }
    if (mode === 'black-hole') return; // accepted, never answered
    const upstream = connect(Number(target.port || 5432), target.hostname);
    track(upstream);
    // Bytes move only while forwarding; a black hole swallows them without closing anything.
    client.on('data', (d: Buffer) => {
      if (mode === 'forward') upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (mode === 'forward') client.write(d);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      if (mode !== 'black-hole') client.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const url = new URL(targetUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    mode: () => mode,
    cut() {
      mode = 'cut';
      for (const s of sockets) s.destroy();
    },
    blackHole() {
      mode = 'black-hole';
    },
    restore() {
      mode = 'forward';
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
