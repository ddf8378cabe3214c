/**
 * The local gateway's body reader when the client's connection is cut: a request whose body had
 * arrived whole (`complete`) but was not read yet gets neither 'end' nor another 'close' once its
 * socket is destroyed. The reader must fail it at once (ECONNRESET, the gateway's "client went
 * away"), not wait: a handler waiting there held the gateway's close() for the whole request
 * deadline (26 s in test/restarts.pg.test.ts, about one run in four).
 */
import { createServer, request, type IncomingMessage } from 'node:http';
import { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { readBody } from '../dev/gateway.js';

const servers: Array<{ close(): void }> = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** The server side of one POST whose whole body has arrived, unread, then its socket destroyed. */
async function cutAfterWholeBody(): Promise<IncomingMessage> {
  const arrived = new Promise<IncomingMessage>((resolve) => {
    const server = createServer((req) => {
      // The cut reports 'aborted' as an error too; the gateway's reader listens for it.
      req.on('error', () => undefined);
      // The parser marks the message complete as soon as its last byte is parsed, read or not.
      const check = (): void => {
        if (req.complete) resolve(req);
        else setImmediate(check);
      };
      check();
    });
    servers.push(server);
    server.listen(0, '127.0.0.1', () => {
      const client = request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', method: 'POST', path: '/', headers: { 'content-type': 'application/json' } });
      client.on('error', () => undefined);
      client.end('{"rows":[]}');
    });
  });
  const req = await arrived;
  req.socket.destroy();
  // Not events.once: it rejects on the 'aborted' error the cut also emits.
  if (!req.closed) await new Promise((resolve) => req.once('close', resolve));
  return req;
}

describe('gateway body reader', () => {
  it('a body that arrived whole but unread fails at once when the connection is cut, never waits', async () => {
    const req = await cutAfterWholeBody();
    expect(req.complete).toBe(true);
    // Every event of the request has fired by now: what has not settled by the next turn never will.
    const outcome = await Promise.race([
      readBody(req, 1024).then(() => 'resolved', (error: { code?: string }) => error.code),
      new Promise<string>((resolve) => setImmediate(() => resolve('still waiting'))),
    ]);
    expect(outcome).toBe('ECONNRESET');
  });
});
