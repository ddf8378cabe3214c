/**
 * A fault-injecting HTTP proxy for convergence tests: in front of the local gateway it drops
 * requests (never forwarded), drops responses (forwarded, then the client connection is cut),
 * duplicates requests (forwarded twice, the second answer returned) and answers 503 without
 * forwarding. Faults are drawn from a seeded generator so a failing run can be replayed.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface FaultRates {
  readonly dropRequest: number;
  readonly dropResponse: number;
  readonly duplicate: number;
  readonly unavailable: number;
}

export const NO_FAULTS: FaultRates = Object.freeze({ dropRequest: 0, dropResponse: 0, duplicate: 0, unavailable: 0 });

export interface FaultProxy {
  readonly url: string;
  rates: FaultRates;
  readonly counts: Record<keyof FaultRates | 'forwarded', number>;
  close(): Promise<void>;
}

/** mulberry32: small, fast, seedable. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function forward(target: URL, req: IncomingMessage, body: Buffer): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
    const out = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...headers, 'content-length': String(body.byteLength) } },
      (res) => {
        readAll(res).then(
          (b) => {
            const h: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string' && k !== 'connection' && k !== 'transfer-encoding') h[k] = v;
            resolve({ status: res.statusCode ?? 502, headers: h, body: b });
          },
          reject,
        );
      },
    );
    out.on('error', reject);
    out.end(body);
  });
}

export async function startFaultProxy(targetUrl: string, seed: number, rates: FaultRates = NO_FAULTS): Promise<FaultProxy> {
  const target = new URL(targetUrl);
  const random = seededRandom(seed);
  const counts = { dropRequest: 0, dropResponse: 0, duplicate: 0, unavailable: 0, forwarded: 0 };
  const proxy: { rates: FaultRates } = { rates };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readAll(req);
    const r = random();
    const { dropRequest, dropResponse, duplicate, unavailable } = proxy.rates;
    if (r < dropRequest) {
      counts.dropRequest++;
      req.socket.destroy();
      return;
    }
    if (r < dropRequest + unavailable) {
      counts.unavailable++;
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
      res.end(JSON.stringify({ error: 'service_unavailable', message: 'injected fault' }));
      return;
    }
    let answer = await forward(target, req, body);
    counts.forwarded++;
    if (r < dropRequest + unavailable + duplicate) {
      counts.duplicate++;
      answer = await forward(target, req, body);
    } else if (r < dropRequest + unavailable + duplicate + dropResponse) {
      counts.dropResponse++;
      req.socket.destroy();
      return;
    }
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => req.socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    get rates() {
      return proxy.rates;
    },
    set rates(value: FaultRates) {
      proxy.rates = value;
    },
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
