/**
 * Issue 16: the SQLite port's conformance suite (test/support/sqlite-conformance.ts, the same cases
 * test/sqlite-port.test.ts runs under Node) in chromium, on wa-sqlite over OPFS in a dedicated
 * worker — the adapter the web client uses in browsers (client-web/sqlite/opfs.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser } from 'playwright-core';
import { findChromium, launchChromium } from './support/browser.js';
import { conformanceCases } from './support/sqlite-conformance.js';
import { startTestServer, type TestServer } from './support/server.js';
import { buildWebFixture } from './support/web-fixture.js';
import type { CaseResult } from './support/web/sqlite-conformance-worker.js';

const chromiumPath = findChromium();
if (!chromiumPath) console.warn('sqlite-port.web.test.ts: SKIPPED — no chromium found (install Debian\'s chromium or set CHROMIUM_PATH)');

/** The case names, from the same module the worker runs (the adapter is never opened here). */
const names = conformanceCases({ name: 'names only', open: () => Promise.reject(new Error('not here')), reopen: () => Promise.reject(new Error('not here')) }, expect).map((c) => c.name);

describe.skipIf(!chromiumPath)('SQLite port conformance: wa-sqlite on OPFS in chromium', () => {
  let s: TestServer;
  let browser: Browser;
  let results: CaseResult[] = [];
  beforeAll(async () => {
    const dir = await buildWebFixture({ page: 'test/support/web/sqlite-conformance-page.ts', 'conformance-worker': 'test/support/web/sqlite-conformance-worker.ts' });
    s = await startTestServer({ staticDir: dir });
    browser = await launchChromium(chromiumPath as NonNullable<typeof chromiumPath>);
    const page = await (await browser.newContext({ baseURL: s.url })).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto('/');
    await page.waitForFunction(() => 'runConformance' in globalThis);
    results = await page.evaluate(() => (globalThis as unknown as { runConformance: () => Promise<CaseResult[]> }).runConformance());
    expect(errors).toEqual([]);
    console.log(`OPFS conformance in chromium: ${results.map((r) => `${r.ok ? 'ok' : 'FAILED'} ${r.ms} ms ${r.name}`).join('; ')}`);
  });
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  it('ran every case', () => {
    expect(results.map((r) => r.name)).toEqual(names);
  });

  for (const name of names) {
    it(name, () => {
      const result = results.find((r) => r.name === name);
      expect(result, 'the case ran').toBeDefined();
      if (!result?.ok) throw new Error(`in chromium: ${result?.error}`);
    });
  }
});
