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

export { findChromium, type ChromiumSource };

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const ARTIFACTS_DIR = join(ROOT, 'test-artifacts');

export async function launchChromium(source: ChromiumSource): Promise<Browser> {
  const env = prepareChromium(source);
  return chromium.launch({
    executablePath: source.executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
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

export async function openDemoDevice(browser: Browser, baseUrl: string, name: string): Promise<DemoDevice> {
  const context = await browser.newContext({ baseURL: baseUrl, viewport: { width: 1100, height: 800 }, acceptDownloads: true });
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
