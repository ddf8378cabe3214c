/**
 * Where the time of a write → other browser goes (bench/browser-latency.ts measures it; this
 * explains it), outside `npm run bench`: the demo app in two chromium contexts of one user, with
 * the sync worker built from bench/lib/trace-worker.ts, so every SQL call (with its OPFS flushes,
 * reads and writes), fetch, WebSocket message and postMessage of both workers, and every message
 * between each page and its worker, lands on one timeline per write, relative to the click.
 *
 *   npx tsx bench/profile-browser-latency.ts [writes=8] [printed=3]
 *
 * Prints the timelines of the last `printed` writes and, over all writes, the medians of each
 * kind of event's time and OPFS calls, and of the hops of a write (click → A's push request
 * starts → it reaches Node → its answer leaves → B's socket message → B renders). The gateway's
 * side is on the same timeline: when each request reached Node and its body was read, every
 * PostgreSQL query, every WebSocket message sent, and every moment Node's event loop was more than
 * 3 ms late (busy, or not given a CPU: on a loaded machine the largest item of all).
 * PERSISTENT=1: profiles on disk; DEV_SHM=1: without --disable-dev-shm-usage.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import pg from 'pg';
import { WebSocket } from 'ws';
import { buildDemo } from '../dev/build-demo.js';
import { addAndSelectList, buildBrowserWorker, clickAddTodo, RECORD_PAGE_SCRIPT, signIn, startDemoDatabase, waitForRowScript } from './lib/demo-page.js';
import { startBenchServer } from './lib/server.js';
import type { TraceEvent } from './lib/worker-trace.js';

const writes = Number(process.argv[2] ?? 8);
const printed = Number(process.argv[3] ?? 3);
const ROOT = resolve(import.meta.dirname, '..');
const epoch = () => performance.timeOrigin + performance.now();

async function drain(page: Page): Promise<TraceEvent[]> {
  const own = (await page.evaluate('globalThis.__pageTrace.splice(0)')) as TraceEvent[];
  const worker = page.workers()[0];
  const inWorker = worker ? ((await worker.evaluate('globalThis.__trace.splice(0)')) as TraceEvent[]) : [];
  return [...own, ...inWorker];
}

function fmtIo(e: TraceEvent): string {
  const io = e.io;
  if (!io || io.flush + io.read + io.write + io.truncate + io.getSize === 0) return '';
  return ` [opfs ${io.ms.toFixed(1)} ms: flush ${io.flush} (${io.flushMs.toFixed(1)} ms) w ${io.write} r ${io.read} t ${io.truncate} s ${io.getSize}]`;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.floor((s.length - 1) / 2)] as number);
};

async function main(): Promise<void> {
  const server = await startBenchServer();
  const outDir = mkdtempSync(join(tmpdir(), 'lockstep-profile-latency-'));
  await buildDemo(outDir, { react: 'production' });
  // The traced worker replaces the demo's.
  await buildBrowserWorker(ROOT, join(ROOT, 'bench/lib/trace-worker.ts'), outDir, {
    'process.env.NODE_ENV': '"production"',
    LOCKSTEP_TRACE_JOURNAL: JSON.stringify(process.env['JOURNAL'] ?? ''),
  });
  const served: (TraceEvent & { who: string })[] = [];
  // When each request reached Node and when its answer was handed to the socket.
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (this: http.Server, event: string, ...args: unknown[]) {
    if (event === 'request') {
      const [req, res] = args as [http.IncomingMessage, http.ServerResponse];
      const start = epoch();
      if (req.url?.startsWith('/sync/')) req.once('end', () => served.push({ kind: 'node', what: `${req.method} ${req.url?.replace(/[0-9a-f-]{36}/g, ':id').replace(/\?.*/, '')} body read (${req.headers['content-length'] ?? 0} B)`, start: epoch(), end: epoch(), who: 'S' }));
      if (req.url?.startsWith('/sync/')) res.on('finish', () => served.push({ kind: 'node', what: `${req.method} ${req.url?.replace(/[0-9a-f-]{36}/g, ':id').replace(/\?.*/, '')} (arrived → answer sent)`, start, end: epoch(), who: 'S' }));
    }
    return (emit as (this: http.Server, event: string, ...rest: unknown[]) => boolean).call(this, event, ...args);
  } as typeof emit;
  // The gateway's side: every PostgreSQL query and every WebSocket message sent, on the same clock.
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as string | { text?: string } | undefined;
    const text = (typeof config === 'string' ? config : config?.text ?? '?').replace(/\s+/g, ' ').trim().slice(0, 80);
    const start = epoch();
    const result = (query as (...a: unknown[]) => unknown).apply(this, args);
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(() => served.push({ kind: 'pg', what: text, start, end: epoch(), who: 'S' }), () => undefined);
    }
    return result;
  } as typeof query;
  const wsSend = WebSocket.prototype.send;
  WebSocket.prototype.send = function (this: WebSocket, data: unknown, ...rest: unknown[]) {
    if (typeof data === 'string') served.push({ kind: 'ws-send', what: data.slice(0, 60), start: epoch(), end: epoch(), who: 'S' });
    return (wsSend as (this: WebSocket, ...a: unknown[]) => void).call(this, data, ...rest);
  } as typeof wsSend;
  const server2 = await startDemoDatabase(server, 'profile_latency', outDir, {
    feed: true,
    intercept: async (event, next) => {
      const start = epoch();
      const result = await next();
      if (event.rawPath.startsWith('/sync/')) {
        served.push({ kind: 'server', what: `${event.requestContext.http.method} ${event.rawPath.replace(/[0-9a-f-]{36}/g, ':id')} (handler)`, start, end: epoch(), who: 'S' });
      }
      return result;
    },
  });
  const launch = { executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', ...(process.env['DEV_SHM'] === '1' ? [] : ['--disable-dev-shm-usage'])] };
  // PERSISTENT=1: each device is a browser with a profile on disk (OPFS in files), as a person's
  // browser is; otherwise two contexts of one browser, which keep OPFS in memory (incognito-like).
  const persistent = process.env['PERSISTENT'] === '1';
  const browser = persistent ? null : await chromium.launch(launch);
  const profiles: string[] = [];
  const contexts: BrowserContext[] = [];
  const perKind = new Map<string, number[]>();
  const add = (key: string, value: number) => perKind.set(key, [...(perKind.get(key) ?? []), value]);
  try {
    const open = async () => {
      const options = { baseURL: server2.url, viewport: { width: 1100, height: 800 } };
      let context: BrowserContext;
      if (browser) context = await browser.newContext(options);
      else {
        const dir = mkdtempSync(join(process.env['PROFILE_DIR'] ?? tmpdir(), 'lockstep-profile-browser-'));
        profiles.push(dir);
        context = await chromium.launchPersistentContext(dir, { ...launch, ...options });
      }
      contexts.push(context);
      await context.addInitScript(RECORD_PAGE_SCRIPT);
      const page = await context.newPage();
      await page.goto('/');
      await signIn(page, 'profile-user');
      return page;
    };
    const a = await open();
    const b = await open();
    await addAndSelectList(a, b, 'Profile', [b, a]);
    await new Promise((r) => setTimeout(r, 500));
    for (let i = -2; i < writes; i++) {
      const title = `profile ${i}`;
      await drain(a);
      await drain(b);
      served.length = 0;
      // Node's event loop: a 1 ms timer that fires late says the loop was busy (or not scheduled).
      let tick = epoch();
      const lag = setInterval(() => {
        const t = epoch();
        if (t - tick > 3) served.push({ kind: 'node-lag', what: `event loop late by ${(t - tick - 1).toFixed(1)} ms`, start: tick, end: t, who: 'S' });
        tick = t;
      }, 1);
      await b.evaluate(waitForRowScript(title));
      const clicked = await clickAddTodo(a, title);
      const rendered = (await b.evaluate('globalThis.__rendered')) as number;
      clearInterval(lag);
      await new Promise((r) => setTimeout(r, 400));
      if (i < 0) continue;
      const events = [
        ...(await drain(a)).map((e) => ({ ...e, who: 'A' })),
        ...(await drain(b)).map((e) => ({ ...e, who: 'B' })),
        { kind: 'mark', what: 'ROW RENDERED ON B', start: rendered, end: rendered, who: 'B' },
        ...served.splice(0),
      ].sort((x, y) => x.start - y.start);
      add('total', rendered - clicked);
      // The hops of the commit phase: A's worker, the request's way to Node, the server, B's socket.
      const pushFetch = events.find((e) => e.who === 'A' && e.kind === 'fetch' && e.what.startsWith('POST /sync/push-sessions'));
      const arrived = events.find((e) => e.kind === 'node' && e.what.startsWith('POST /sync/push-sessions (arrived'));
      const toB = events.find((e) => e.who === 'B' && e.kind === 'ws');
      if (pushFetch && arrived && toB) {
        add('hop: click → A fetch starts', pushFetch.start - clicked);
        add('hop: A fetch starts → request at Node', arrived.start - pushFetch.start);
        add('hop: request at Node → answer sent', arrived.end - arrived.start);
        add('hop: answer sent → B socket message', toB.start - arrived.end);
        add('hop: B socket message → rendered', rendered - toB.start);
      }
      for (const e of events) {
        if (e.kind === 'sql' || e.kind === 'tx' || e.kind === 'fetch' || e.kind === 'server' || e.kind === 'pg') {
          const key = `${e.who} ${e.kind} ${e.what.replace(/ → .*$/, '').replace(/'[^']*'/g, "'…'").slice(0, 70)}`;
          add(key, e.end - e.start);
          if (e.io) add(`${key} flushes`, e.io.flush);
        }
      }
      if (i >= writes - printed) {
        console.log(`\n── write ${i}: ${(rendered - clicked).toFixed(1)} ms click → rendered on B`);
        for (const e of events) {
          if (e.start < clicked - 1 || e.start > rendered + 300) continue;
          const at = (e.start - clicked).toFixed(1).padStart(7);
          const dur = e.end > e.start ? ` (${(e.end - e.start).toFixed(1)} ms)` : '';
          console.log(`${at} ${e.who} ${e.kind.padEnd(8)} ${e.what}${dur}${fmtIo(e)}`);
        }
      }
    }
    console.log('\n── medians over the writes (ms, or counts for flushes)');
    for (const [key, values] of [...perKind.entries()].sort((x, y) => x[0].localeCompare(y[0]))) {
      console.log(`${median(values).toFixed(1).padStart(8)} ×${String(values.length).padStart(3)}  ${key}`);
    }
  } finally {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    for (const dir of profiles) rmSync(dir, { recursive: true, force: true });
    await server2.close();
    await server.close();
    rmSync(outDir, { recursive: true, force: true });
  }
}

await main();
