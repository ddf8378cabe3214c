/**
 * Issue 23, "Done when", in chromium: the value-fidelity scenario of test/value-fidelity.pg.test.ts
 * (test/support/value-fidelity.ts) on the adapter browsers use, wa-sqlite over OPFS in a sync
 * worker per device. Device A writes every value and is refused the writes that are not a local
 * form, B pulls, a fresh C hydrates; each reads exactly what A wrote (jsonb as PostgreSQL holds
 * it). Real OPFS, real HTTP, real PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, type Page } from 'playwright-core';
import { parseTables } from '../core/config.js';
import { findChromium, launchChromium } from './support/browser.js';
import { signToken, startTestServer, type TestServer } from './support/server.js';
import { buildWebFixture } from './support/web-fixture.js';
import { FIDELITY_SERVER_SQL, FIDELITY_TABLES_DECL, refusedWrites, UKEY } from './support/value-fidelity.js';
import { expectedRows, expectServerHolds } from './support/value-fidelity-server.js';
import type { FidelityGlobals } from './support/web/fidelity-page.js';

const chromiumPath = findChromium();
if (!chromiumPath) console.warn('value-fidelity.web.test.ts: SKIPPED — no chromium found (install Debian\'s chromium or set CHROMIUM_PATH)');

const USER = 'fidelity-opfs';

describe.skipIf(!chromiumPath)('every value arrives exactly as written, in chromium (OPFS in a worker)', { timeout: 180_000 }, () => {
  let s: TestServer;
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];
  const evaluate = <T, A = undefined>(fn: (g: FidelityGlobals, arg: A) => T | Promise<T>, arg?: A): Promise<T> =>
    page.evaluate(([body, a]) => new Function('g', 'a', `return (${body})(g, a)`)(globalThis, a) as T, [fn.toString(), arg] as const);

  beforeAll(async () => {
    const dir = await buildWebFixture({ page: 'test/support/web/fidelity-page.ts', 'fidelity-worker': 'test/support/web/fidelity-worker.ts' });
    s = await startTestServer({ staticDir: dir, schemaSql: FIDELITY_SERVER_SQL, tables: parseTables(FIDELITY_TABLES_DECL) });
    browser = await launchChromium(chromiumPath as NonNullable<typeof chromiumPath>);
    page = await (await browser.newContext({ baseURL: s.url })).newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto('/');
    await page.waitForFunction(() => 'openDevice' in globalThis);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  it('device A → server → device B → fresh device C, and the refusals at A\'s write', async () => {
    const token = await signToken(USER);
    const attach = async (name: string) => {
      await evaluate((g, a) => g.openDevice(a.name, a.token), { name, token });
      expect(await evaluate((g, a) => g.devices[a.name]!.attach(a.user), { name, user: USER }), name).toMatchObject({ status: 'attached' });
    };
    await attach('fid-a');
    await attach('fid-b');
    await evaluate((g) => g.writeRows('fid-a'));
    const refusals = await evaluate((g) => g.tryRefused('fid-a'));
    for (const [i, w] of refusedWrites().entries()) {
      expect(refusals[i], `${String(w.params[0])}`).toMatchObject({ code: 'invalid_local_row', message: expect.stringContaining(`column ${w.column} `) });
    }
    expect(await evaluate((g) => g.devices['fid-a']!.sync())).toMatchObject({ push: { status: 'committed' } });
    await expectServerHolds(s, USER);

    const expected = { vals: await expectedRows(s, USER), ukeys: [{ id: { text: UKEY }, note: { text: 'lower-case' } }] };
    await evaluate((g) => g.devices['fid-b']!.sync());
    await attach('fid-c');
    for (const name of ['fid-b', 'fid-c', 'fid-a']) {
      const got = await evaluate((g, n) => g.read(n), name);
      for (const [i, row] of expected.vals.entries()) expect(got.vals[i], `${name}: ${JSON.stringify(row.id)}`).toEqual(row);
      expect(got.vals.length, name).toBe(expected.vals.length);
      expect(got.ukeys, name).toEqual(expected.ukeys);
    }
    expect(errors).toEqual([]);
  });
});
