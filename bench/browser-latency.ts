/**
 * Write → other browser (issue 24 item 4): the demo app (React on the bindings, production build)
 * on two devices of one user, each with its own OPFS database and sync worker, against a gateway
 * with the commit feed (push notifications over WebSocket), as `npm start` serves it. Device A adds
 * a to-do by clicking "Add"; the clock stops when device B's page has rendered the row (a
 * MutationObserver in B). Goal: ≤ 50 ms median.
 *
 * Two kinds of device, measured one after the other:
 * - `profiles` (the figure with the target): two headless chromium browsers, each with its own
 *   profile on disk, as a person's browser is: OPFS is a file, a sync access handle call is a
 *   system call, and a flush is an fsync;
 * - `contexts`: two contexts of one browser, as the earlier runs measured: a context without a
 *   profile keeps OPFS in memory (as a private window does), and then every sync access handle
 *   call (read, write, flush) is a message to the browser process, about 0.1-1.5 ms each here.
 *
 * The phases of B's way to the row, from the gateway's view of the requests and sockets and B's page:
 * - commit: the click → the gateway sent B's socket the notification of A's commit (A's write, its
 *   freeze, the push: one request for such a small bundle, or create, chunk and commit from an
 *   older server; the server's commit);
 * - notify: that notification → B's pull request arrives (B's wake-up, its sync's push phase); 0
 *   when the notification carried the bundle's rows and B needed no pull (protocol §5.9);
 * - pull: B's pull request (the last before its page heard of the row) → its answer; 0 without one;
 * - apply: that answer (or the notification) → B's page hears that `todos` changed (the socket's
 *   delivery and B's wake-up when there was no pull, B's apply transaction, the worker's read of
 *   the page's live queries, sent with that news: client-web/live-prefetch.ts);
 * - render: that → the row in B's DOM (the hub's delivery of those rows, React's render).
 * Clocks: Node and chromium read the same system clock (`performance.timeOrigin + performance.now()`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type LaunchOptions } from 'playwright-core';
import { WebSocket, WebSocketServer } from 'ws';
import { buildDemo } from '../dev/build-demo.js';
import { type BenchContext, type Benchmark } from './lib/context.js';
import { type Recorder } from './lib/report.js';
import { addAndSelectList, clickAddTodo, signIn, startDemoDatabase, waitForRowScript } from './lib/demo-page.js';
import { percentile, spread } from './lib/stats.js';
import { findChromium, prepareChromium } from '../test/support/npm-chromium.js';

export const BROWSER_LATENCY_TARGET_MS = 50;

const epoch = () => performance.timeOrigin + performance.now();

/** One notification the gateway sent: to which source, of which bundle, with its rows or not. */
interface Sent {
  readonly source: string;
  readonly seq: number;
  readonly page: boolean;
  readonly at: number;
}

/**
 * Records every message the gateway's sockets send (the gateway runs in this process, on the same
 * `ws` module), with the source id each socket was opened for. Answers the records and the undo.
 */
function recordSocketSends(): { sent: Sent[]; restore(): void } {
  const sent: Sent[] = [];
  const sources = new WeakMap<object, string>();
  const handleUpgrade = WebSocketServer.prototype.handleUpgrade;
  const send = WebSocket.prototype.send;
  WebSocketServer.prototype.handleUpgrade = function (this: WebSocketServer, req, socket, head, callback) {
    const source = new URL(req.url ?? '/', 'http://localhost').searchParams.get('source_id') ?? '';
    return handleUpgrade.call(this, req, socket, head, (ws, request) => {
      sources.set(ws, source);
      callback(ws, request);
    });
  } as typeof handleUpgrade;
  WebSocket.prototype.send = function (this: WebSocket, data: unknown, ...rest: unknown[]) {
    const source = sources.get(this);
    if (source !== undefined && typeof data === 'string') {
      const seq = /"latest_bundle_seq":(\d+)/.exec(data)?.[1];
      if (seq) sent.push({ source, seq: Number(seq), page: data.includes('"pull":'), at: epoch() });
    }
    return (send as (this: WebSocket, ...args: unknown[]) => void).call(this, data, ...rest);
  } as typeof send;
  return {
    sent,
    restore() {
      WebSocketServer.prototype.handleUpgrade = handleUpgrade;
      WebSocket.prototype.send = send;
    },
  };
}

/** One request as the gateway saw it. */
interface Seen {
  readonly route: string;
  /** The request committed a bundle: a session's commit, or a create that carried its rows. */
  readonly commits: boolean;
  readonly source: string;
  readonly start: number;
  readonly end: number;
}

interface Phases {
  readonly total: number;
  /** B applied the rows its notification carried, without a pull. */
  readonly carried: boolean;
  readonly commit: number;
  /** Of `commit`: the server's time answering A's three push requests (create, chunk, commit). */
  readonly pushServer: number;
  readonly notify: number;
  readonly pull: number;
  readonly apply: number;
  readonly render: number;
}

/**
 * Records, in the page, when the sync worker tells it that `todos` changed. A script text, not a
 * function: tsx would wrap a function's inner names in helpers the page does not have.
 */
const RECORD_TABLE_EVENTS = `(() => {
  const seen = [];
  globalThis.__todosChanged = seen;
  const Original = globalThis.Worker;
  globalThis.Worker = class extends Original {
    constructor(url, options) {
      super(url, options);
      this.addEventListener('message', (event) => {
        const data = event.data;
        if (data && data.t === 'event' && data.event && data.event.type === 'tables' && data.event.tables.includes('todos')) {
          seen.push(performance.timeOrigin + performance.now());
        }
      });
    }
  };
})();`;

export const browserLatencyBenchmark: Benchmark = {
  name: 'browser-latency',
  async run(ctx, rec) {
    // The chromium npm test uses (an installed one, else @sparticuz/chromium's), so every run measures.
    const chromiumSource = findChromium();
    if (!chromiumSource) {
      rec.note('browser-latency: no chromium for this platform (the npm one is linux-x64; set CHROMIUM_PATH): nothing measured');
      return;
    }
    const chromiumEnv = prepareChromium(chromiumSource);
    const outDir = mkdtempSync(join(tmpdir(), 'lockstep-bench-latency-'));
    await buildDemo(outDir, { react: 'production' });
    const seen: Seen[] = [];
    const side = await startDemoDatabase(ctx.server, 'browser_latency', outDir, {
      feed: true,
      intercept: async (event, next) => {
        const start = epoch();
        const result = await next();
        const route = `${event.requestContext.http.method} ${event.rawPath.replace(/[0-9a-f-]{36}/g, ':id')}`;
        const commits = route.endsWith('/commit') || (route === 'POST /sync/push-sessions' && (event.body ?? '').includes('"rows"'));
        if (event.rawPath.startsWith('/sync/')) seen.push({ route, commits, source: String(event.headers['sync-source-id'] ?? ''), start, end: epoch() });
        return result;
      },
    });
    const launch: LaunchOptions = {
      executablePath: chromiumSource.executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage'],
      ...(Object.keys(chromiumEnv).length ? { env: chromiumEnv } : {}),
    };
    const sockets = recordSocketSends();
    try {
      for (const devices of ['profiles', 'contexts'] as const) {
        const runs = await measure(ctx, rec, devices, side.url, seen, sockets.sent, launch);
        report(ctx, rec, devices, runs);
      }
    } finally {
      sockets.restore();
      await side.close();
      rmSync(outDir, { recursive: true, force: true });
    }
  },
};

type Devices = 'profiles' | 'contexts';

/** Signs two devices of one user in, then times `ctx.runs(30)` writes on A to the row on B. */
async function measure(ctx: BenchContext, rec: Recorder, devices: Devices, url: string, seen: Seen[], sent: Sent[], launch: LaunchOptions): Promise<Phases[]> {
  const browser = devices === 'contexts' ? await chromium.launch(launch) : null;
  const profiles: string[] = [];
  const contexts: BrowserContext[] = [];
  try {
    const user = `latency-${devices}`;
    const open = async () => {
      const options = { baseURL: url, viewport: { width: 1100, height: 800 } };
      let context: BrowserContext;
      if (browser) context = await browser.newContext(options);
      else {
        const dir = mkdtempSync(join(tmpdir(), 'lockstep-bench-profile-'));
        profiles.push(dir);
        context = await chromium.launchPersistentContext(dir, { ...launch, ...options });
      }
      contexts.push(context);
      await context.addInitScript(RECORD_TABLE_EVENTS);
      const page = await context.newPage();
      await page.goto('/');
      await signIn(page, user);
      return page;
    };
    const a = await open();
    const b = await open();
    await addAndSelectList(a, b, 'Latency', [b]);
    await b.waitForFunction('document.querySelector(\'[data-testid="current-list"]\')?.textContent === "Latency"');

    const runs: Phases[] = [];
    const total = ctx.runs(30);
    for (let i = -3; i < total; i++) {
      const title = `latency ${devices} ${i}`;
      // B waits for the row from now on.
      await b.evaluate(waitForRowScript(title));
      const clicked = await clickAddTodo(a, title);
      const rendered = (await b.evaluate('globalThis.__rendered')) as number;
      await new Promise((r) => setTimeout(r, 150));
      if (i < 0) continue; // warm-up: sockets, JIT, page caches
      const commit = seen.find((x) => x.commits && x.start >= clicked);
      // B's page hears of the row from the apply of the last pull B made before that, or of the
      // rows B's notification carried.
      const changed = ((await b.evaluate('globalThis.__todosChanged')) as number[]).find((t) => commit && t >= commit.start);
      const pull = seen.filter((x) => x.route === 'GET /sync/pull' && commit && x.source !== commit.source && x.start >= commit.start && changed !== undefined && x.end <= changed).at(-1);
      // The notification to B: the one with the rows, or the first of the commit's bundle.
      const toB = sent.filter((x) => commit && x.source !== commit.source && x.at >= commit.start && (changed === undefined || x.at <= changed));
      const notice = toB.find((x) => x.page) ?? toB[0];
      if (!commit || !notice || changed === undefined || (!pull && !notice.page)) {
        rec.check(`${devices} run ${i}: every phase observed`, false, `commit ${Boolean(commit)}, notification ${Boolean(notice)}, pull ${Boolean(pull)}, table event ${changed !== undefined}`);
        continue;
      }
      const pushes = seen.filter((x) => x.source === commit.source && x.start >= clicked && x.end <= commit.end && x.route.startsWith('POST /sync/push-sessions'));
      runs.push({
        total: rendered - clicked,
        carried: !pull,
        commit: notice.at - clicked,
        pushServer: pushes.reduce((sum, x) => sum + (x.end - x.start), 0),
        notify: pull ? pull.start - notice.at : 0,
        pull: pull ? pull.end - pull.start : 0,
        apply: changed - (pull ? pull.end : notice.at),
        render: rendered - changed,
      });
      const r = runs.at(-1) as Phases;
      ctx.log(`${devices} write ${i}: ${r.total.toFixed(1)} ms (${r.carried ? 'rows carried by the notification; ' : ''}commit ${r.commit.toFixed(1)} of which the server ${r.pushServer.toFixed(1)}, notify ${r.notify.toFixed(1)}, pull ${r.pull.toFixed(1)}, apply ${r.apply.toFixed(1)}, render ${r.render.toFixed(1)})`);
    }
    rec.check(`browser latency (${devices}): the runs were measured`, runs.length >= Math.ceil(total / 2), `${runs.length} of ${total}`);
    return runs;
  } finally {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    for (const dir of profiles) rmSync(dir, { recursive: true, force: true });
  }
}

function report(ctx: BenchContext, rec: Recorder, devices: Devices, runs: readonly Phases[]): void {
  if (runs.length === 0) return;
  const totals = runs.map((r) => r.total);
  const value = spread(totals);
  const p90 = percentile(totals, 90);
  const who = devices === 'profiles' ? 'two chromium browsers, profiles on disk' : 'two contexts of one chromium, OPFS in memory';
  const id = devices === 'profiles' ? 'browser_latency' : 'browser_latency_contexts';
  rec.figure({
    id: `${id}.ms`,
    label: `write click on one device → row rendered on another (demo app, WebSocket notifications, ${who}; p90 ${p90.toFixed(0)} ms)`,
    unit: 'ms',
    value,
    ...(devices === 'profiles' ? { target: { text: `≤ ${BROWSER_LATENCY_TARGET_MS} ms median`, met: value.median <= BROWSER_LATENCY_TARGET_MS } } : {}),
  });
  for (const phase of ['commit', 'pushServer', 'notify', 'pull', 'apply', 'render'] as const) {
    const label = phase === 'pushServer' ? `browser latency (${devices}): of the commit phase, the server answering A's push requests` : `browser latency phase (${devices}): ${phase}`;
    rec.figure({ id: `${id}.${phase}_ms`, label, unit: 'ms', value: spread(runs.map((r) => r[phase])) });
  }
  ctx.log(`write → other browser (${who}): median ${value.median.toFixed(1)} ms, p90 ${p90.toFixed(1)} ms; ${runs.filter((r) => r.carried).length} of ${runs.length} without a pull; phases (medians): ${(['commit', 'notify', 'pull', 'apply', 'render'] as const)
    .map((p) => `${p} ${spread(runs.map((r) => r[p])).median.toFixed(1)}`).join(', ')}`);
}
