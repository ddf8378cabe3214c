/**
 * Browser tests: finds a chromium (CHROMIUM_PATH, Debian's, or the one the npm package
 * @sparticuz/chromium ships: test/support/npm-chromium.ts), launches it headless with
 * playwright-core, and drives the demo app as a "device" (one browser context = one device with
 * its own OPFS, service worker and storage). Screenshots go to test-artifacts/.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { findChromium, prepareChromium, type ChromiumSource } from './npm-chromium.js';
import { HANG_MS } from './until.js';

export { findChromium, type ChromiumSource };

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const ARTIFACTS_DIR = join(ROOT, 'test-artifacts');

/**
 * A host name that reaches this machine without being `localhost`: pages opened there are not a
 * secure context, as over plain http on a LAN address (see the demo's secure-context message).
 */
export const INSECURE_HOST = 'lockstep-lan.test';

export async function launchChromium(source: ChromiumSource): Promise<Browser> {
  const env = prepareChromium(source);
  return chromium.launch({
    executablePath: source.executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', `--host-resolver-rules=MAP ${INSECURE_HOST} 127.0.0.1`],
    ...(Object.keys(env).length ? { env } : {}),
  });
}

/** Saves a screenshot (the full page unless told otherwise) as test-artifacts/<folder>/<name>.png. */
export async function screenshot(page: Page, folder: string, name: string, options: { fullPage?: boolean } = {}): Promise<string> {
  const dir = join(ARTIFACTS_DIR, folder);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage: options.fullPage ?? true });
  return path;
}

/** One device of the demo: a browser context with one page, and what it logged. */
export interface DemoDevice {
  readonly name: string;
  readonly context: BrowserContext;
  /** The device's current tab. */
  page: Page;
  /** Uncaught exceptions in the page: a test asserts there are none. */
  readonly pageErrors: string[];
  /** Console errors (failed requests while offline are expected), for failure messages. */
  readonly consoleErrors: string[];
  close(): Promise<void>;
}

/** Desktop and phone viewports: the demo is reviewed at both widths. */
export const DESKTOP = { width: 1100, height: 800 } as const;
export const PHONE = { width: 390, height: 844 } as const;

export async function openDemoDevice(browser: Browser, baseUrl: string, name: string, options: { phone?: boolean } = {}): Promise<DemoDevice> {
  const context = await browser.newContext({
    baseURL: baseUrl,
    viewport: options.phone ? PHONE : DESKTOP,
    ...(options.phone ? { isMobile: true, hasTouch: true, deviceScaleFactor: 2 } : {}),
    acceptDownloads: true,
  });
  // Playwright's 30 s defaults would time out clicks and navigations on a loaded machine; a
  // hang still fails, after minutes.
  context.setDefaultTimeout(HANG_MS);
  context.setDefaultNavigationTimeout(HANG_MS);
  const page = await context.newPage();
  const pageErrors: string[] = [];
  const consoleErrors: string[] = [];
  const watch = (p: Page) => {
    p.on('pageerror', (error) => pageErrors.push(`[${name}] ${error.message}`));
    p.on('console', (message) => message.type() === 'error' && consoleErrors.push(`[${name}] ${message.text()}`));
  };
  watch(page);
  context.on('page', watch);
  await page.goto('/');
  return { name, context, page, pageErrors, consoleErrors, close: () => context.close() };
}

/** The demo's controls a user must be able to see and reach, by data-testid. */
const CONTROLS = [
  'user-input', 'sign-in-button', 'sign-out', 'sync-now', 'new-list-title', 'add-list', 'list-select', 'list-title', 'list-delete',
  'new-todo-title', 'new-todo-file', 'add-todo', 'todo-done', 'todo-title', 'todo-delete', 'todos-prev', 'todos-next',
  'discard-rejected', 'dismiss-conflicts', 'quarantine-retry', 'quarantine-drop', 'quarantine-move-to', 'quarantine-move',
];

/**
 * What is wrong with the page's layout as a user sees it: wider than the viewport (a horizontal
 * scroll), or a control that is shown but cut off, of no size, or covered by something else.
 * Each control is scrolled into view first, as a user would; the first shown one of each kind
 * is checked.
 */
export async function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate((controls) => {
    const problems: string[] = [];
    const width = window.innerWidth;
    const scrollWidth = document.documentElement.scrollWidth;
    if (scrollWidth > width) problems.push(`the page is ${scrollWidth} px wide in a ${width} px viewport`);
    for (const id of controls) {
      const element = [...document.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`)].find((e) => e.getClientRects().length > 0 && !e.closest('[hidden]'));
      if (!element) continue;
      element.scrollIntoView({ block: 'center', inline: 'nearest' });
      const r = element.getBoundingClientRect();
      if (r.width < 1 || r.height < 1) problems.push(`${id} has no size`);
      else if (r.left < -0.5 || r.right > width + 0.5) problems.push(`${id} is cut off (${Math.round(r.left)}..${Math.round(r.right)} of ${width} px)`);
      else {
        const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
        if (hit && hit !== element && !element.contains(hit) && !hit.contains(element)) {
          problems.push(`${id} is covered by <${hit.tagName.toLowerCase()}${hit.id ? `#${hit.id}` : ''}>`);
        }
      }
    }
    window.scrollTo(0, 0);
    return problems;
  }, CONTROLS);
}
