/**
 * How the OPFS adapter's journal mode, locking mode and synchronous setting cost, in chromium:
 * small write transactions (one row into a table with an index and a trigger, as an app write),
 * small reads between them, and one bulk insert (a hydration's apply), each with its sync access
 * handle calls. Both kinds of browser profile: a context of one browser (OPFS in memory: every
 * call is a message to the browser process) and a browser with its profile on disk.
 *
 *   npx tsx bench/profile-opfs-modes.ts [small=40] [bulk=20000]
 */
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { buildBrowserWorker } from './lib/demo-page.js';

const small = Number(process.argv[2] ?? 40);
const bulk = Number(process.argv[3] ?? 20000);
const ROOT = resolve(import.meta.dirname, '..');

const WAL_FULL = 'PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;';
/** Name → [pragmas, combined writes (client-web/sqlite/opfs-vfs.ts)]. */
const MODES: Record<string, [string, boolean]> = {
  'delete (before)': ['', false],
  'exclusive + delete': ['PRAGMA locking_mode=EXCLUSIVE;', false],
  'exclusive + wal, normal': ['PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;', false],
  'exclusive + wal, full': [WAL_FULL, false],
  'delete, combined': ['', true],
  'exclusive + wal, full, combined': [WAL_FULL, true],
  'exclusive + wal, normal, combined': ['PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;', true],
};
const only = process.env['MODES']?.split(',');

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.floor((s.length - 1) / 2)] as number);
};

async function main(): Promise<void> {
  const outDir = mkdtempSync(join(tmpdir(), 'lockstep-opfs-modes-'));
  await buildBrowserWorker(ROOT, join(ROOT, 'bench/lib/opfs-modes-worker.ts'), outDir);
  const files: Record<string, [string, Buffer]> = {
    '/': ['text/html', Buffer.from('<!doctype html><title>opfs modes</title>')],
    '/worker.js': ['text/javascript', readFileSync(join(outDir, 'worker.js'))],
    '/wa-sqlite.wasm': ['application/wasm', readFileSync(join(ROOT, 'node_modules/wa-sqlite/dist/wa-sqlite.wasm'))],
  };
  const server = createServer((req, res) => {
    const file = files[req.url ?? '/'];
    if (!file) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': file[0] }).end(file[1]);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
  const launch = { executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] };
  try {
    for (const persistent of [false, true]) {
      console.log(`\n── ${persistent ? 'browser with its profile on disk' : 'context of one browser (OPFS in memory)'}`);
      for (const [name, [pragmas, combine]] of Object.entries(MODES)) {
        if (only && !only.some((o) => name.includes(o))) continue;
        const profile = mkdtempSync(join(tmpdir(), 'lockstep-opfs-profile-'));
        const browser = persistent ? null : await chromium.launch(launch);
        const context: BrowserContext = browser ? await browser.newContext() : await chromium.launchPersistentContext(profile, launch);
        try {
          const page = await context.newPage();
          await page.goto(url);
          const result = (await page.evaluate(`new Promise((resolve) => {
            const worker = new Worker('/worker.js', { type: 'module' });
            worker.onmessage = (e) => resolve(e.data);
            worker.postMessage(${JSON.stringify({ name: name.replace(/[^a-z]+/g, '-'), pragmas, combine, small, bulk })});
          })`)) as { error?: string; mode: unknown; small: { ms: number; io: Record<string, number> }[]; reads: { ms: number; io: Record<string, number> }[]; bulkMs: number; bulk: Record<string, number> };
          if (result.error) throw new Error(result.error);
          const io = (list: { io: Record<string, number> }[], k: string) => median(list.map((x) => x.io[k] ?? 0));
          console.log(`${name.padEnd(32)} write tx ${median(result.small.map((x) => x.ms)).toFixed(2).padStart(6)} ms (flush ${io(result.small, 'flush')}, write ${io(result.small, 'write')}, read ${io(result.small, 'read')}, other ${io(result.small, 'truncate') + io(result.small, 'getSize')}; flush ${median(result.small.map((x) => x.io['flushMs'] ?? 0)).toFixed(2)} ms)` +
            ` | read ${median(result.reads.map((x) => x.ms)).toFixed(2)} ms (${io(result.reads, 'read') + io(result.reads, 'getSize')} calls)` +
            ` | bulk ${bulk} rows ${result.bulkMs.toFixed(0)} ms (flush ${result.bulk['flush']}, write ${result.bulk['write']}, ${result.bulk['ms']?.toFixed(0)} ms in OPFS) | mode ${JSON.stringify(result.mode)}`);
        } finally {
          await context.close();
          await browser?.close();
          rmSync(profile, { recursive: true, force: true });
        }
      }
    }
  } finally {
    server.close();
    rmSync(outDir, { recursive: true, force: true });
  }
}

await main();
