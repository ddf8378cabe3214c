/**
 * Builds the demo web app into `demo/dist/` (git-ignored): esbuild bundles the React UI
 * (`demo/src/app.tsx` → `app.js`, React and React DOM from npm), the sync worker (`worker.ts` → `worker.js`) and the service
 * worker (`sw.ts` → `sw.js`, served from the root so its scope is the whole app), and copies
 * `demo/public/*` and wa-sqlite's wasm next to the worker, where the wa-sqlite module looks for
 * it (`new URL('wa-sqlite.wasm', import.meta.url)`, see client-web/sqlite/opfs.ts).
 *
 * Run by `npm start` before serving and by the browser tests; `tsx dev/build-demo.ts` alone works
 * too. Takes well under a second.
 */
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type BuildOptions } from 'esbuild';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const DEMO_DIST = join(ROOT, 'demo', 'dist');

export interface DemoBuild {
  readonly outDir: string;
  /** Names the service worker's cache, so a new build replaces the old app shell. */
  readonly buildId: string;
  readonly elapsedMs: number;
}

export interface DemoBuildOptions {
  /**
   * React's build: `development` (the default: StrictMode mounts every effect twice and React checks
   * more, which the demo's browser tests rely on) or `production` (what an app ships; the latency
   * benchmark measures it).
   */
  readonly react?: 'development' | 'production';
}

/** Bundles the demo into `outDir` (default demo/dist), replacing what was there. */
export async function buildDemo(outDir: string = DEMO_DIST, options: DemoBuildOptions = {}): Promise<DemoBuild> {
  const started = performance.now();
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const common: BuildOptions = {
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    sourcemap: 'linked',
    logLevel: 'warning',
    absWorkingDir: ROOT,
    // The Node-only branches of the wa-sqlite glue import these; they never run in a browser.
    external: ['fs', 'path', 'url', 'module', 'worker_threads'],
    jsx: 'automatic',
    define: { 'process.env.NODE_ENV': JSON.stringify(options.react ?? 'development') },
    minify: options.react === 'production',
  };
  const apps = await build({
    ...common,
    entryPoints: { app: join(ROOT, 'demo/src/app.tsx'), worker: join(ROOT, 'demo/src/worker.ts') },
    outdir: outDir,
    metafile: true,
  });
  // The build id hashes the app's inputs, so an unchanged app keeps its cached shell.
  const hash = createHash('sha256');
  for (const path of Object.keys(apps.metafile?.outputs ?? {}).sort()) hash.update(path).update(readFileSync(join(ROOT, path)));
  for (const file of readdirSync(join(ROOT, 'demo/public')).sort()) hash.update(file).update(readFileSync(join(ROOT, 'demo/public', file)));
  const buildId = hash.digest('hex').slice(0, 12);
  // A classic script: service workers registered without `type: 'module'` cannot use imports.
  await build({
    ...common,
    format: 'iife',
    entryPoints: { sw: join(ROOT, 'demo/src/sw.ts') },
    outdir: outDir,
    define: { LOCKSTEP_BUILD_ID: JSON.stringify(buildId) },
  });
  for (const file of readdirSync(join(ROOT, 'demo/public'))) copyFileSync(join(ROOT, 'demo/public', file), join(outDir, file));
  copyFileSync(join(ROOT, 'node_modules/wa-sqlite/dist/wa-sqlite.wasm'), join(outDir, 'wa-sqlite.wasm'));
  return { outDir, buildId, elapsedMs: Math.round(performance.now() - started) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const result = await buildDemo();
  console.log(`demo: built ${result.outDir} (build ${result.buildId}) in ${result.elapsedMs} ms`);
}
