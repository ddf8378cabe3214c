/**
 * The OPFS adapter (client-web/sqlite/opfs.ts) in chromium: the database runs in WAL mode with an
 * exclusive lock, its commits written to OPFS before COMMIT returns (and flushed to disk a few
 * milliseconds later, which no test here can observe: only a power loss would), and whatever
 * committed survives its worker ending in
 * the middle of a transaction, as when a tab is closed or crashes (no close, the browser releases
 * the access handles), both with OPFS in memory (a context without a profile) and on disk (a
 * browser profile, also closed and started again): every committed row is there, the unfinished
 * transaction left nothing, and SQLite's integrity check passes. A database an earlier version wrote
 * with the rollback journal opens in WAL mode with its rows. A checkpoint reads the WAL it copies from
 * memory (opfs-vfs.ts), and the database holds every row after it. Temporary files (the statement
 * journal of an insert of many rows a statement) stay in memory: nothing reaches OPFS before COMMIT.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { findChromium, launchChromium } from './support/browser.js';
import { prepareChromium } from './support/npm-chromium.js';
import { startTestServer, type TestServer } from './support/server.js';
import { buildWebFixture } from './support/web-fixture.js';
import type { BulkAnswer, CheckpointAnswer, DurabilityAnswer, DurabilityJob, FlushAnswer } from './support/web/opfs-durability-worker.js';

const chromiumPath = findChromium();
if (!chromiumPath) console.warn('opfs-durability.web.test.ts: SKIPPED — no chromium found (install Debian\'s chromium or set CHROMIUM_PATH)');

const COMMITTED = 25;
const committedTitles = Array.from({ length: COMMITTED }, (_, i) => `committed ${i}`);

async function step<T = DurabilityAnswer>(page: Page, job: DurabilityJob): Promise<T> {
  return (await page.evaluate((j) => (globalThis as unknown as { runStep: (job: DurabilityJob) => Promise<T> }).runStep(j), job));
}

async function openPage(context: BrowserContext, url: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForFunction(() => 'runStep' in globalThis);
  return page;
}

describe.skipIf(!chromiumPath)('OPFS adapter: WAL, and what survives a worker that ends mid-transaction', { timeout: 120_000 }, () => {
  let s: TestServer;
  const profiles: string[] = [];
  beforeAll(async () => {
    const dir = await buildWebFixture({ page: 'test/support/web/opfs-durability-page.ts', 'durability-worker': 'test/support/web/opfs-durability-worker.ts' });
    s = await startTestServer({ staticDir: dir });
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    for (const dir of profiles) rmSync(dir, { recursive: true, force: true });
  });

  const expectIntact = (answer: DurabilityAnswer) => {
    expect(answer.titles).toEqual(committedTitles);
    expect(answer.integrity).toBe('ok');
    expect(answer.journalMode).toBe('wal');
  };

  it('with OPFS in memory (a context without a profile): WAL, exclusive; committed rows kept after the worker ends mid-transaction', async () => {
    const browser = await launchChromium(chromiumPath as NonNullable<typeof chromiumPath>);
    try {
      const page = await openPage(await browser.newContext(), s.url);
      const written = await step(page, { step: 'write', name: 'memory', committed: COMMITTED });
      // NORMAL: a commit's WAL bytes are in the file when it returns, flushed to disk soon after.
      expect({ journal: written.journalMode, locking: written.lockingMode, synchronous: written.synchronous }).toEqual({ journal: 'wal', locking: 'exclusive', synchronous: 1 });
      expect(written.titles).toEqual(committedTitles);
      await page.evaluate(() => (globalThis as unknown as { endWorker: () => void }).endWorker());
      expectIntact(await step(page, { step: 'read', name: 'memory' }));
    } finally {
      await browser.close();
    }
  });

  it('on disk, a WAL commit is flushed soon after it returns (by default) or before (flush: commit)', async () => {
    const source = chromiumPath as NonNullable<typeof chromiumPath>;
    const env = prepareChromium(source);
    const profile = mkdtempSync(join(tmpdir(), 'lockstep-opfs-profile-'));
    profiles.push(profile);
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: source.executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage'],
      ...(Object.keys(env).length ? { env } : {}),
    });
    try {
      const page = await openPage(context, s.url);
      expect(await step<FlushAnswer>(page, { step: 'flushes', name: 'soon', flush: 'soon' })).toEqual({ atCommit: 0, later: true });
      const before = await step<FlushAnswer>(page, { step: 'flushes', name: 'at-commit', flush: 'commit' });
      expect(before.atCommit).toBeGreaterThan(0);
    } finally {
      await context.close();
    }
  });

  it('a checkpoint reads the WAL frames it copies from memory, not from OPFS (one read per page before), and the database holds every row after it', async () => {
    const browser = await launchChromium(chromiumPath as NonNullable<typeof chromiumPath>);
    try {
      const page = await openPage(await browser.newContext(), s.url);
      const answer = await step<CheckpointAnswer>(page, { step: 'checkpoint', name: 'checkpointed' });
      expect(answer.framesCopied).toBeGreaterThan(100);
      expect({ reads: answer.reads, rows: answer.rows, integrity: answer.integrity }).toEqual({ reads: 0, rows: 2000, integrity: 'ok' });
    } finally {
      await browser.close();
    }
  });

  it('a transaction inserting 20,000 rows many a statement writes nothing to OPFS before its COMMIT (temporary files in memory)', async () => {
    const browser = await launchChromium(chromiumPath as NonNullable<typeof chromiumPath>);
    try {
      const page = await openPage(await browser.newContext(), s.url);
      const answer = await step<BulkAnswer>(page, { step: 'bulk', name: 'bulk' });
      expect(answer).toEqual({ writesBeforeCommit: 0, rows: 20_000, integrity: 'ok' });
    } finally {
      await browser.close();
    }
  });

  it('a database written with the rollback journal (as earlier versions did) opens in WAL mode with its rows', async () => {
    const browser = await launchChromium(chromiumPath as NonNullable<typeof chromiumPath>);
    try {
      const page = await openPage(await browser.newContext(), s.url);
      const written = await step(page, { step: 'write', name: 'earlier', committed: COMMITTED, journalMode: 'delete' });
      expect(written.journalMode).toBe('delete');
      await page.evaluate(() => (globalThis as unknown as { endWorker: () => void }).endWorker());
      expectIntact(await step(page, { step: 'read', name: 'earlier' }));
    } finally {
      await browser.close();
    }
  });

  it('on disk (a browser profile): committed rows kept after the worker ends mid-transaction, and after the browser is closed and started again', async () => {
    const source = chromiumPath as NonNullable<typeof chromiumPath>;
    const env = prepareChromium(source);
    const profile = mkdtempSync(join(tmpdir(), 'lockstep-opfs-profile-'));
    profiles.push(profile);
    const launch = () => chromium.launchPersistentContext(profile, {
      executablePath: source.executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage'],
      ...(Object.keys(env).length ? { env } : {}),
    });
    let context = await launch();
    try {
      let page = await openPage(context, s.url);
      await step(page, { step: 'write', name: 'disk', committed: COMMITTED });
      await page.evaluate(() => (globalThis as unknown as { endWorker: () => void }).endWorker());
      expectIntact(await step(page, { step: 'read', name: 'disk' }));
      // Once more, and this time the whole browser goes while the transaction is open.
      await step(page, { step: 'write', name: 'disk-2', committed: COMMITTED });
      await context.close();
      context = await launch();
      page = await openPage(context, s.url);
      expectIntact(await step(page, { step: 'read', name: 'disk-2' }));
    } finally {
      await context.close();
    }
  });
});
