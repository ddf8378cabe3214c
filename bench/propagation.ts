/**
 * `npm run bench:propagation`: how long a write on one device takes to reach another device of the
 * same user (issue 17 item 5), through the real client's sync loop on both (wa-sqlite under Node)
 * and the local gateway over PostgreSQL 17:
 *
 *   device A: INSERT through client.db ─ debounce ─ push (create, chunk, commit)
 *   device B: woken by its watch ─ pull ─ apply ─ the row is in B's database
 *
 * Three ways for B to hear of the commit: push notifications (`watch: 'websocket'`, the commit feed
 * of a long-running server), long poll woken by the same feed, and long poll as Lambda serves it
 * (the server reads the user's latest bundle every `watch_poll_interval_ms`). Each figure is the
 * median of PROPAGATION_WRITES writes. A's debounce is the loop's default (25 ms), the earlier
 * default (300 ms), and 0 to see the path itself.
 */
import { cpus, loadavg } from 'node:os';
import WebSocket from 'ws';
import { type WebSocketFactory } from '../client-web/watch-socket.js';
import { internalErrors, startBenchServer, type BenchServer } from './lib/server.js';
import { nowMs, spread } from './lib/stats.js';
import { openBenchDevice, type BenchDevice } from './lib/web-client.js';

const WRITES = Number(process.env['PROPAGATION_WRITES'] ?? 15);
const connect: WebSocketFactory = (url) => new WebSocket(url) as unknown as ReturnType<WebSocketFactory>;

type Mode = 'websocket' | 'long-poll';

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

async function measure(server: BenchServer, mode: Mode, debounceMs: number, user: string): Promise<number[]> {
  const a = await openBenchDevice(server, user);
  const b = await openBenchDevice(server, user, undefined, { config: { watch: mode, webSocket: connect } });
  const devices: BenchDevice[] = [a, b];
  try {
    for (const d of devices) {
      const attached = await d.client.attach(user);
      if (attached.status !== 'attached') throw new Error(`attach answered ${JSON.stringify(attached)}`);
    }
    a.client.start({ userId: user, debounceMs, periodicMs: 0 });
    b.client.start({ userId: user, periodicMs: 0 });
    // Let B's watch settle (a fresh socket first answers "changed").
    await new Promise((r) => setTimeout(r, 1500));
    const total: number[] = [];
    for (let i = 0; i < WRITES; i++) {
      const id = crypto.randomUUID();
      const started = nowMs();
      await a.client.db.run('INSERT INTO notes (id, title, body, position, done, updated_at) VALUES (?, ?, ?, ?, 0, ?)',
        [id, `note ${i}`, 'propagation', i, new Date().toISOString()]);
      await until(`note ${i} on device B`, async () => (await b.db.query('SELECT 1 FROM notes WHERE id = ?', [id])).length === 1);
      total.push(nowMs() - started);
      await new Promise((r) => setTimeout(r, 300));
    }
    return total;
  } finally {
    for (const d of devices) {
      await d.client.stop().catch(() => undefined);
      await d.close().catch(() => undefined);
    }
  }
}

async function main(): Promise<void> {
  const rows: string[] = [];
  const line = (what: string, debounceMs: number, samples: number[], baseline?: number) => {
    const t = spread(samples);
    rows.push(`| ${what} | ${debounceMs} | ${t.median.toFixed(0)} | ${t.min.toFixed(0)}–${t.max.toFixed(0)} | ${baseline ? (baseline / t.median).toFixed(2) + '×' : '-'} |`);
    return t.median;
  };
  const withFeed = await startBenchServer({ feed: true });
  let lambdaPoll = 0;
  try {
    const lambda = await startBenchServer({ feed: false });
    try {
      lambdaPoll = line('long poll as in Lambda (the server reads every 250 ms)', 300, await measure(lambda, 'long-poll', 300, 'prop-lambda'));
      line('long poll as in Lambda (the server reads every 250 ms)', 25, await measure(lambda, 'long-poll', 25, 'prop-lambda25'), lambdaPoll);
    } finally {
      await lambda.close();
    }
    line('long poll woken by the commit feed', 300, await measure(withFeed, 'long-poll', 300, 'prop-poll'), lambdaPoll);
    line('push notification (WebSocket)', 300, await measure(withFeed, 'websocket', 300, 'prop-ws'), lambdaPoll);
    line('long poll woken by the commit feed', 25, await measure(withFeed, 'long-poll', 25, 'prop-poll25'), lambdaPoll);
    line('push notification (WebSocket)', 25, await measure(withFeed, 'websocket', 25, 'prop-ws25'), lambdaPoll);
    line('push notification (WebSocket)', 0, await measure(withFeed, 'websocket', 0, 'prop-ws0'), lambdaPoll);
  } finally {
    await withFeed.close();
  }
  console.log(`\nwrite on device A → row in device B's database, ${WRITES} writes each (ms; ratio = first line / this)\n`);
  console.log('| how B hears of it | A\'s debounce (ms) | median | min–max | ratio |\n|---|---:|---:|---:|---:|');
  for (const r of rows) console.log(r);
  console.log(`\nload average ${loadavg().map((x) => x.toFixed(2)).join(', ')} on ${cpus().length} CPUs`);
  // A 500 anywhere (logged with its stack as it happened) fails the run, whatever its figures.
  if (internalErrors().length) throw new Error(`${internalErrors().length} request(s) answered 500: ${internalErrors().join(', ')}`);
}

main().then(() => process.exit(0), (error: unknown) => {
  console.error(error);
  process.exit(1);
});
