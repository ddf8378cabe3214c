/**
 * A local stand-in for Neon's WebSocket proxy: each WebSocket connection opens one TCP socket to
 * the PostgreSQL named by `?address=host:port` and pipes bytes both ways, so
 * `@neondatabase/serverless` can talk to the embedded server exactly as it talks to Neon.
 */
import { connect, type Socket } from 'node:net';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';

export interface WsForwarder {
  /** The value for SYNC_NEON_WS_PROXY / `neonWsProxy`: `127.0.0.1:<port>/v2`. */
  readonly proxy: string;
  /** WebSocket connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

function pipe(ws: WebSocket, socket: Socket): void {
  // The driver may send its startup message before the TCP side is up; queue until connected.
  const pending: Buffer[] = [];
  let open = false;
  socket.on('connect', () => {
    open = true;
    for (const chunk of pending.splice(0)) socket.write(chunk);
  });
  ws.on('message', (data) => {
    const chunk = toBuffer(data);
    if (open) socket.write(chunk);
    else pending.push(chunk);
  });
  socket.on('data', (chunk) => ws.send(chunk, { binary: true }));
  socket.on('close', () => ws.close());
  socket.on('error', () => ws.terminate());
  ws.on('close', () => socket.end());
  ws.on('error', () => socket.destroy());
}

/**
 * Starts the forwarder on a free loopback port. It connects only to loopback addresses and to
 * the `host:port` pairs in `allow` (an external `DATABASE_URL` server), never anywhere else.
 */
export async function startWsForwarder(options: { allow?: readonly string[] } = {}): Promise<WsForwarder> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  let accepted = 0;
  server.on('connection', (ws, req) => {
    const address = new URL(req.url ?? '/', 'http://localhost').searchParams.get('address') ?? '';
    const match = /^(.+):(\d{1,5})$/.exec(address);
    const host = match?.[1] === 'localhost' ? '127.0.0.1' : match?.[1];
    if (!match || !host || !(host === '127.0.0.1' || options.allow?.includes(address))) {
      ws.close(1008, 'address must be a loopback or allowed host:port');
      return;
    }
    accepted++;
    pipe(ws, connect(Number(match[2]), host));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    proxy: `127.0.0.1:${port}/v2`,
    connections: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of server.clients) client.terminate();
        server.close(() => resolve());
      }),
  };
}
