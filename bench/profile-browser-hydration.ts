/**
 * Where the time of a fresh device's hydration in chromium goes (bench/browser-hydration.ts
 * measures it; this explains it), outside `npm run bench`: the demo app on OPFS with the sync
 * worker built from bench/lib/trace-worker.ts, signing a fresh browser context in as a user with
 * 20,000 rows; every SQL call and transaction of the worker (with its OPFS work), every fetch and
 * message between page and worker, the server's handling of each request and the moments the
 * page's row count changed, on one timeline relative to the click.
 *
 *   npx tsx bench/profile-browser-hydration.ts [runs=3] [react=production|development]
 *
 * Prints the timeline of the last run (SQL calls under 2 ms summed per kind) and the totals.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { serverWrite } from '../core/sync/index.js';
import { demoSeed } from '../demo/schema.js';
import { buildDemo } from '../dev/build-demo.js';
import { buildBrowserWorker, byTestId, RECORD_PAGE_SCRIPT, startDemoDatabase } from './lib/demo-page.js';
import { startBenchServer } from './lib/server.js';
import type { TraceEvent } from './lib/worker-trace.js';

const runs = Number(process.argv[2] ?? 3);
const react = (process.argv[3] ?? 'production') as 'production' | 'development';
const ROOT = resolve(import.meta.dirname, '..');
const epoch = () => performance.timeOrigin + performance.now();
const ROWS = 20 + 20 * 999;

/** Records, in the page, every change of the row count (beside RECORD_PAGE_SCRIPT's worker messages). */
const RECORD_ROW_COUNT = `(() => {
  const seen = globalThis.__pageTrace;
  const now = () => performance.timeOrigin + performance.now();
  let last = '';
  const observer = new MutationObserver(() => {
    const rows = document.querySelector('[data-testid="count-rows"]')?.textContent ?? '';
    if (rows === last) return;
    last = rows;
    const t = now();
    seen.push({ kind: 'render', what: 'count-rows = ' + rows, start: t, end: t });
  });
  document.addEventListener('DOMContentLoaded', () => observer.observe(document.body, { subtree: true, childList: true, characterData: true }));
})();`;

async function main(): Promise<void> {
  const server = await startBenchServer();
  const outDir = mkdtempSync(join(tmpdir(), 'lockstep-profile-hydration-'));
  await buildDemo(outDir, { react });
  await buildBrowserWorker(ROOT, join(ROOT, 'bench/lib/trace-worker.ts'), outDir, { 'process.env.NODE_ENV': JSON.stringify(react), LOCKSTEP_TRACE_JOURNAL: '""' });
  const served: (TraceEvent & { who: string })[] = [];
  const emit = http.Server.prototype.emit;
  http.Server.prototype.emit = function (this: http.Server, event: string, ...args: unknown[]) {
    if (event === 'request') {
      const [req, res] = args as [http.IncomingMessage, http.ServerResponse];
      const start = epoch();
      if (req.url?.startsWith('/sync/')) res.on('finish', () => served.push({ kind: 'node', what: `${req.method} ${req.url?.replace(/[0-9a-f-]{36}/g, ':id')} (arrived → answer sent)`, start, end: epoch(), who: 'S' }));
    }
    return (emit as (this: http.Server, event: string, ...rest: unknown[]) => boolean).call(this, event, ...args);
  } as typeof emit;
  const side = await startDemoDatabase(server, 'profile_hydration', outDir, {
    intercept: async (event, next) => {
      const start = epoch();
      const result = await next();
      if (event.rawPath.startsWith('/sync/')) served.push({ kind: 'server', what: `${event.requestContext.http.method} ${event.rawPath.replace(/[0-9a-f-]{36}/g, ':id')} (handler)`, start, end: epoch(), who: 'S' });
      return result;
    },
  });
  const browser = await chromium.launch({ executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  try {
    const user = 'profile-carol';
    await serverWrite(side.db, { userId: user, sourceId: 'server:seed', retainedBundlesPerUser: side.runtime.config.limits.retainedBundlesPerUser }, async (tx, scope) => {
      for (const statement of demoSeed(scope, 20, 999)) await tx.query(statement);
    });
    const totals: number[] = [];
    for (let i = -1; i < runs; i++) {
      const context = await browser.newContext({ baseURL: side.url, viewport: { width: 1100, height: 800 } });
      await context.addInitScript(RECORD_PAGE_SCRIPT);
      await context.addInitScript(RECORD_ROW_COUNT);
      const page = await context.newPage();
      await page.goto('/');
      await byTestId(page, 'user-input').fill(user);
      served.length = 0;
      const clicked = (await page.evaluate(`(() => { const at = performance.timeOrigin + performance.now(); document.querySelector('[data-testid="sign-in-button"]').click(); return at; })()`)) as number;
      await page.waitForFunction(`document.querySelector('[data-testid="count-rows"]')?.textContent === '${ROWS}'`, undefined, { timeout: 120_000, polling: 10 });
      const shown = epoch();
      await new Promise((r) => setTimeout(r, 300));
      const own = (await page.evaluate('globalThis.__pageTrace.splice(0)')) as TraceEvent[];
      const worker = page.workers()[0];
      const inWorker = worker ? ((await worker.evaluate('globalThis.__trace.splice(0)')) as TraceEvent[]) : [];
      const rendered = own.find((e) => e.kind === 'render' && e.what === `count-rows = ${ROWS}`)?.start ?? shown;
      totals.push(rendered - clicked);
      console.log(`run ${i}: ${(rendered - clicked).toFixed(0)} ms click → ${ROWS} rows shown`);
      if (i === runs - 1) {
        const events = [...own.map((e) => ({ ...e, who: 'P' })), ...inWorker.map((e) => ({ ...e, who: 'W' })), ...served.splice(0)].sort((x, y) => x.start - y.start);
        const small = new Map<string, { n: number; ms: number }>();
        for (const e of events) {
          if (e.start < clicked - 1 || e.start > rendered + 50) continue;
          const dur = e.end - e.start;
          if (e.kind === 'sql' && dur < 2) {
            const key = e.what.replace(/'[^']*'/g, "'…'").slice(0, 80);
            const s = small.get(key) ?? { n: 0, ms: 0 };
            small.set(key, { n: s.n + 1, ms: s.ms + dur });
            continue;
          }
          const io = e.io && e.io.ms > 0.5 ? ` [opfs ${e.io.ms.toFixed(1)} ms: flush ${e.io.flush} w ${e.io.write} r ${e.io.read}]` : '';
          console.log(`${(e.start - clicked).toFixed(1).padStart(8)} ${e.who} ${e.kind.padEnd(8)} ${e.what.slice(0, 150)}${dur > 0 ? ` (${dur.toFixed(1)} ms)` : ''}${io}`);
        }
        console.log('\n── SQL calls under 2 ms, summed');
        for (const [key, s] of [...small.entries()].sort((a, b) => b[1].ms - a[1].ms).slice(0, 25)) console.log(`${s.ms.toFixed(1).padStart(8)} ms ×${String(s.n).padStart(4)}  ${key}`);
      }
      await context.close();
    }
    const sorted = [...totals].sort((a, b) => a - b);
    console.log(`\nmedian ${sorted[Math.floor((sorted.length - 1) / 2)]?.toFixed(0)} ms over ${totals.length} runs (React ${react})`);
  } finally {
    await browser.close();
    await side.close();
    await server.close();
    rmSync(outDir, { recursive: true, force: true });
  }
}

await main();
