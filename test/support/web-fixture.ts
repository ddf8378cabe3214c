/**
 * Builds a browser fixture for a *.web.test.ts: esbuild bundles the given entries (pages and
 * workers) into a fresh folder with an index.html that loads `page.js`, and copies wa-sqlite's
 * wasm next to them, where the wa-sqlite module looks for it (as dev/build-demo.ts does for the
 * demo). Serve the folder with startTestServer({ staticDir }).
 */
import { copyFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { scratchDir } from './scratch.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Bundles `entries` (output name → source path relative to the repository) into a new folder, removed when the test file ends. */
export async function buildWebFixture(entries: Readonly<Record<string, string>>): Promise<string> {
  const outDir = scratchDir('web');
  await build({
    entryPoints: Object.fromEntries(Object.entries(entries).map(([name, path]) => [name, join(ROOT, path)])),
    outdir: outDir,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    logLevel: 'warning',
    absWorkingDir: ROOT,
    // The Node-only branches of the wa-sqlite glue import these; they never run in a browser.
    external: ['fs', 'path', 'url', 'module', 'worker_threads'],
  });
  copyFileSync(join(ROOT, 'node_modules/wa-sqlite/dist/wa-sqlite.wasm'), join(outDir, 'wa-sqlite.wasm'));
  writeFileSync(join(outDir, 'index.html'), '<!doctype html><meta charset="utf-8"><title>lockstep fixture</title><script type="module" src="/page.js"></script>');
  return outDir;
}
