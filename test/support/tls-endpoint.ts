/**
 * A TLS-only PostgreSQL endpoint in front of the test server (which speaks no TLS), standing in
 * for an RDS Proxy that requires TLS: it answers a client's SSLRequest with `S`, completes the
 * handshake with a self-signed certificate for 127.0.0.1 (made by openssl), and relays the
 * decrypted stream to the server. A client that starts without TLS is cut off. A client trusts
 * the certificate through NODE_EXTRA_CA_CERTS=`certFile`, so `sslmode=verify-full` holds.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TLSSocket } from 'node:tls';

export interface TlsEndpoint {
  /** `127.0.0.1:port`. */
  readonly host: string;
  readonly certFile: string;
  /** Connections that completed a TLS handshake. */
  tlsSessions(): number;
  /** Connections that tried to start in the clear (refused). */
  plainAttempts(): number;
  close(): Promise<void>;
}

const SSL_REQUEST_CODE = 80877103;

export async function startTlsEndpoint(upstreamHost: string, upstreamPort: number): Promise<TlsEndpoint> {
  const dir = mkdtempSync(join(tmpdir(), 'lockstep-tls-'));
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1'], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`openssl could not make a certificate: ${made.stderr}`);
  const key = readFileSync(keyFile);
  const cert = readFileSync(certFile);
  let sessions = 0;
  let plain = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    client.once('readable', () => {
      const head = client.read(8) as Buffer | null;
      if (!head || head.readInt32BE(0) !== 8 || head.readInt32BE(4) !== SSL_REQUEST_CODE) {
        plain++;
        client.destroy();
        return;
      }
      client.write('S');
      const secure = new TLSSocket(client, { isServer: true, key, cert });
      secure.on('secure', () => sessions++);
      secure.on('error', () => client.destroy());
      const upstream = connect(upstreamPort, upstreamHost);
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      upstream.on('error', () => secure.destroy());
      secure.pipe(upstream).pipe(secure);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    host: `127.0.0.1:${port}`,
    certFile,
    tlsSessions: () => sessions,
    plainAttempts: () => plain,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
