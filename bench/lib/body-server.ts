/**
 * A plain HTTP server that answers every GET with one prepared body: the transfer part of a
 * floor (a PostgreSQL read, its rows as one HTTP body, one wa-sqlite insert), with nothing of
 * Lockstep's in between. Same process and loopback as the bench gateway, fetch's default
 * Accept-Encoding answered uncompressed.
 */
import { createServer, type Server } from 'node:http';

export interface BodyServer {
  readonly url: string;
  /** The body the next requests get. */
  set(body: string): void;
  close(): Promise<void>;
}

export async function startBodyServer(): Promise<BodyServer> {
  let body = Buffer.alloc(0);
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.byteLength });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/`,
    set: (text) => {
      body = Buffer.from(text);
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
