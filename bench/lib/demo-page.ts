/**
 * The demo app driven from a benchmark (browser-latency, browser-hydration and their profilers):
 * its controls by test id, signing in, adding a to-do at a known instant, waiting in the page for
 * a row to render, recording the page's messages to its sync worker, and building a browser worker
 * bundle. Times are `performance.timeOrigin + performance.now()`, the clock Node and chromium share.
 */
import { build } from 'esbuild';
import { type Page } from 'playwright-core';
import { DEMO_SCHEMA_SQL, DEMO_SYNC_TABLES } from '../../demo/schema.js';
import { startSideDatabase, type BenchServer, type SideDatabase, type SideDatabaseOptions } from './server.js';

/** A database of its own with the demo's schema, serving the demo built into `staticDir` with development tokens. */
export function startDemoDatabase(server: BenchServer, name: string, staticDir: string, options: Partial<SideDatabaseOptions> = {}): Promise<SideDatabase> {
  return startSideDatabase(server, name, { schemaSql: DEMO_SCHEMA_SQL, tables: DEMO_SYNC_TABLES, staticDir, devTokens: true, ...options });
}

export const byTestId = (page: Page, id: string) => page.locator(`[data-testid="${id}"]`);

/** Signs `page` in as `user` and waits for its first finished sync. */
export async function signIn(page: Page, user: string): Promise<void> {
  await byTestId(page, 'user-input').fill(user);
  await byTestId(page, 'sign-in-button').click();
  await page.waitForFunction('document.querySelector(\'[data-testid="last-sync"]\')?.textContent?.startsWith("last synced")', undefined, { timeout: 60_000 });
}

/** Creates the list `title` on `from`, waits for it on `to`, and selects it on every page of `select`. */
export async function addAndSelectList(from: Page, to: Page, title: string, select: readonly Page[]): Promise<void> {
  await byTestId(from, 'new-list-title').fill(title);
  await byTestId(from, 'add-list').click();
  const list = `[data-testid="list"][data-title="${title}"]`;
  await to.locator(list).waitFor({ timeout: 30_000 });
  for (const page of select) await page.locator(`${list} [data-testid="list-select"]`).click();
}

/** Page script: `globalThis.__rendered` resolves to the instant the to-do titled `title` is in the DOM. */
export const waitForRowScript = (title: string) => `(() => {
  globalThis.__rendered = new Promise((resolve) => {
    const selector = ${JSON.stringify(`[data-testid="todo"][data-title="${title}"]`)};
    const observer = new MutationObserver(() => {
      if (!document.querySelector(selector)) return;
      observer.disconnect();
      resolve(performance.timeOrigin + performance.now());
    });
    observer.observe(document.body, { subtree: true, childList: true, attributes: true });
  });
})()`;

/** Types `title` as a new to-do on `page` and clicks "Add"; returns the instant of the click, read in the page. */
export async function clickAddTodo(page: Page, title: string): Promise<number> {
  await byTestId(page, 'new-todo-title').fill(title);
  return (await page.evaluate(`(() => {
    const at = performance.timeOrigin + performance.now();
    document.querySelector('[data-testid="add-todo"]').click();
    return at;
  })()`)) as number;
}

/**
 * Init script: records in `globalThis.__pageTrace` every message between the page and its sync
 * worker (events with their tables and hydration progress; calls with their SQL's start).
 */
export const RECORD_PAGE_SCRIPT = `(() => {
  const seen = [];
  globalThis.__pageTrace = seen;
  const now = () => performance.timeOrigin + performance.now();
  const Original = globalThis.Worker;
  globalThis.Worker = class extends Original {
    constructor(url, options) {
      super(url, options);
      this.addEventListener('message', (event) => {
        const d = event.data;
        const t = now();
        seen.push({ kind: 'page-in', what: d.t + (d.event ? ' ' + d.event.type + (d.event.tables ? ' ' + d.event.tables.join(',') : '') + (d.event.rowsDone !== undefined ? ' ' + d.event.rowsDone : '') : '') + (d.id !== undefined ? ' #' + d.id : ''), start: t, end: t });
      });
    }
    postMessage(message, transfer) {
      const t = now();
      const sql = message.method === 'query' || message.method === 'run' || message.method === 'liveQuery';
      seen.push({ kind: 'page-out', what: message.t + ' ' + (message.method || '') + ' #' + (message.id ?? '') + (sql ? ' ' + String(message.args?.[0]).slice(0, 60) : ''), start: t, end: t });
      return super.postMessage(message, transfer);
    }
  };
})();`;

/** Bundles a browser worker (`entry`) as `worker.js` into `outDir`, as the demo's build does. */
export async function buildBrowserWorker(root: string, entry: string, outDir: string, define: Record<string, string> = {}): Promise<void> {
  await build({
    entryPoints: { worker: entry },
    outdir: outDir,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    absWorkingDir: root,
    external: ['fs', 'path', 'url', 'module', 'worker_threads'],
    define,
    logLevel: 'warning',
  });
}
