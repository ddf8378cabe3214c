/**
 * `npm run build`: bundles every Lambda function with esbuild into `dist/functions/<name>/`
 * (`index.mjs` plus lazily loaded chunks), prints a size and cold-start report, and fails when a
 * function's bundle exceeds its size budget. Init time is reported, never a reason to fail: it is
 * a time, and a build must not fail because the machine is busy (issue 25 item 10: 106-130 ms of
 * wall clock under load against a 100 ms budget). `npm run bench` measures it (CPU time,
 * medians) against its target.
 *
 * Why code splitting: `core/db/pools.ts` imports each database driver lazily, so with splitting
 * the driver a container does not use (node-postgres under the Neon driver, the Neon driver and
 * `ws` under node-postgres) lands in a chunk that is shipped but never evaluated. The cold start
 * pays only for `index.mjs` and the chunks it imports statically.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build, type Metafile, type Plugin } from 'esbuild';
import { normalizeSql } from '../core/layout/managed-sql.js';

/** Every function of `infra/template.yaml`, built from `functions/<name>.ts`. */
export const FUNCTION_NAMES = ['connect', 'push', 'pull', 'snapshot', 'meta', 'ws', 'bootstrap', 'maintenance'] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];

/**
 * The code a container loads (index.mjs, its static chunks and one driver's lazy chunks) may not
 * exceed this. The folder also ships the other driver's chunks, which are never evaluated.
 */
export const BUNDLE_BYTES_MAX = 500 * 1024;
/**
 * The functions' NODE_OPTIONS (infra/template.yaml): stack traces through the shipped source maps.
 * Node then reads a file's map as it loads it (about 7 ms of a cold start), so init is measured
 * with it.
 */
export const LAMBDA_NODE_OPTIONS = '--enable-source-maps';
/**
 * The cold-start target: importing a bundle in a fresh `node` should cost at most this much CPU
 * time on top of `node -e ''`. A benchmark target (bench/cold-start.ts reports the median against
 * it), never a build or test failure: CPU time moves less with load than wall clock, but still
 * moves.
 */
export const INIT_CPU_MS_TARGET = 100;
/**
 * What a test may assert about an import: only a gross regression (work or I/O at import time)
 * takes seconds on any machine, however loaded.
 */
export const INIT_MS_GROSS_MAX = 5_000;

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// Optional native add-ons that their packages load inside try/catch; never bundle them.
const OPTIONAL_NATIVE = ['pg-native', 'bufferutil', 'utf-8-validate', 'cloudflare:sockets'];

// ESM output cannot `require`; CommonJS dependencies (pg, ws) call it for Node built-ins.
const BANNER = "import { createRequire as __lockstepCreateRequire } from 'node:module'; const require = __lockstepCreateRequire(import.meta.url);";

/**
 * The managed SQL (`core/sync/<concept>/*.sql.ts`) reaches the bootstrap bundle as text, and its comments
 * and indentation are most of it. Each String.raw template is shipped normalized (comments out,
 * one space per run of whitespace: `normalizeSql`), the same text a function's identity hash is
 * taken of, so the installed functions hash exactly as when installed from source.
 */
const compactManagedSql: Plugin = {
  name: 'compact-managed-sql',
  setup(b) {
    b.onLoad({ filter: /[\\/]core[\\/]sync[\\/].*\.sql\.ts$/ }, (args) => ({
      contents: readFileSync(args.path, 'utf8').replace(/String\.raw`([^`]*)`/g, (_all, text: string) => `String.raw\`${normalizeSql(text)}\``),
      loader: 'ts',
    }));
  },
};

/** The database drivers `core/db/pools.ts` imports lazily, and the packages each one loads. */
export const DRIVER_PACKAGES = { neon: ['@neondatabase/serverless', 'ws'], pg: ['pg'] } as const;
export type DriverName = keyof typeof DRIVER_PACKAGES;

export interface BundleReport {
  readonly name: FunctionName;
  readonly dir: string;
  /** Bytes of index.mjs alone. */
  readonly entryBytes: number;
  /**
   * Bytes a container evaluates on each driver: index.mjs, its static imports and that driver's
   * lazily imported chunks. The budget applies to these.
   */
  readonly loadedBytes: Readonly<Record<DriverName, number>>;
  /** The Neon driver's chunk files (absolute), loaded by the first request on the default driver. */
  readonly neonChunks: readonly string[];
  /** Bytes of everything in the function's folder (what Lambda receives: both drivers). */
  readonly totalBytes: number;
  readonly gzipBytes: number;
  readonly files: number;
  /** CPU time to import index.mjs in a fresh node (median of 5): what a cold start adds to node's own. */
  initMs?: number;
  /** The same with the Neon driver's chunks imported too: the first request's extra load. */
  initWithNeonMs?: number;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? filesUnder(join(dir, d.name)) : [join(dir, d.name)]));
}

type Outputs = Metafile['outputs'];

/** Output files reachable from `start` by static imports only. */
function staticClosure(outputs: Outputs, start: string, into: Set<string>): Set<string> {
  if (into.has(start)) return into;
  into.add(start);
  for (const imp of outputs[start]?.imports ?? []) if (imp.kind === 'import-statement' && !imp.external) staticClosure(outputs, imp.path, into);
  return into;
}

/** What a container on one driver loads: the entry's static closure plus the driver's chunks. */
function driverPath(outputs: Outputs, entry: string, packages: readonly string[]): { bytes: number; chunks: string[] } {
  const files = staticClosure(outputs, entry, new Set());
  const chunks: string[] = [];
  for (const [file, output] of Object.entries(outputs)) {
    const inputs = Object.keys(output.inputs);
    if (packages.some((p) => inputs.some((i) => i.includes(`node_modules/${p}/`)))) {
      staticClosure(outputs, file, files);
      chunks.push(resolve(file));
    }
  }
  let bytes = 0;
  for (const f of files) bytes += outputs[f]?.bytes ?? 0;
  return { bytes, chunks };
}

/** Bundles the functions into `outDir/<name>/`; each folder is self-contained. */
export async function buildFunctions(outDir: string = join(ROOT, 'dist', 'functions'), names: readonly FunctionName[] = FUNCTION_NAMES): Promise<BundleReport[]> {
  const reports: BundleReport[] = [];
  for (const name of names) {
    const dir = join(outDir, name);
    rmSync(dir, { recursive: true, force: true });
    const result = await build({
      entryPoints: { index: join(ROOT, 'functions', `${name}.ts`) },
      outdir: dir,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      outExtension: { '.js': '.mjs' },
      chunkNames: 'chunks/[name]-[hash]',
      minify: true,
      // Shipped beside each file, read only when a stack trace is printed (NODE_OPTIONS=
      // --enable-source-maps in the template): a 500's logged stack names functions/…/*.ts lines.
      // Without the sources' text: the mappings alone are what a stack trace needs.
      sourcemap: true,
      sourcesContent: false,
      legalComments: 'none',
      external: OPTIONAL_NATIVE,
      banner: { js: BANNER },
      plugins: [compactManagedSql],
      metafile: true,
      logLevel: 'warning',
    });
    const outputs = result.metafile.outputs;
    const entry = Object.keys(outputs).find((f) => outputs[f]?.entryPoint !== undefined);
    if (!entry) throw new Error(`${name}: esbuild reported no entry output`);
    const files = filesUnder(dir);
    const neon = driverPath(outputs, entry, DRIVER_PACKAGES.neon);
    const pg = driverPath(outputs, entry, DRIVER_PACKAGES.pg);
    reports.push({
      name,
      dir,
      entryBytes: statSync(join(dir, 'index.mjs')).size,
      loadedBytes: { neon: neon.bytes, pg: pg.bytes },
      neonChunks: neon.chunks,
      totalBytes: files.reduce((sum, f) => sum + statSync(f).size, 0),
      gzipBytes: files.reduce((sum, f) => sum + gzipSync(readFileSync(f)).byteLength, 0),
      files: files.length,
    });
  }
  return reports;
}

/** Runs `node` with `args`; returns its wall time and what it printed. */
function runNode(args: string[]): { ms: number; stdout: string } {
  const start = process.hrtime.bigint();
  const result = spawnSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: '' } });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) throw new Error(`node ${args.join(' ')} failed: ${result.stderr.toString()}`);
  return { ms, stdout: result.stdout.toString() };
}

/** Wall time of a fresh `node` that does nothing (best of `runs`): the baseline init is over. */
export function nodeBaselineMs(runs = 5): number {
  let best = Infinity;
  for (let i = 0; i < runs; i++) best = Math.min(best, runNode(['--input-type=module', '-e', '']).ms);
  return best;
}

/** The median of `values` (the middle one, or the mean of the two middle ones). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * Module init cost: in a fresh `node`, the CPU time (user + system, `process.cpuUsage`) to import
 * the bundle (and optionally more chunks) — everything a cold start adds to an empty `node -e ''`,
 * since handlers open no connection at import. CPU time, not wall clock: another process on the
 * machine delays the import without adding to what it costs. Median of `runs`.
 */
export function measureInitMs(entryFile: string, runs = 5, alsoImport: readonly string[] = []): number {
  const urls = [entryFile, ...alsoImport].map((f) => JSON.stringify(pathToFileURL(f).href));
  const script = `const t = process.cpuUsage(); ${urls.map((u) => `await import(${u});`).join(' ')} const d = process.cpuUsage(t); process.stdout.write(String((d.user + d.system) / 1000));`;
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) samples.push(Number(runNode([LAMBDA_NODE_OPTIONS, '--input-type=module', '-e', script]).stdout));
  return median(samples);
}

const kb = (bytes: number) => (bytes / 1024).toFixed(1);

export function formatReport(reports: readonly BundleReport[]): string {
  const header = ['function', 'index.mjs KB', 'loaded KB (neon)', 'loaded KB (pg)', 'shipped KB', 'shipped gzip KB', 'init CPU ms', 'init+neon CPU ms'];
  const rows = reports.map((r) => [
    r.name,
    kb(r.entryBytes),
    kb(r.loadedBytes.neon),
    kb(r.loadedBytes.pg),
    kb(r.totalBytes),
    kb(r.gzipBytes),
    r.initMs === undefined ? '-' : r.initMs.toFixed(1),
    r.initWithNeonMs === undefined ? '-' : r.initWithNeonMs.toFixed(1),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/**
 * Budget violations, one line each; empty when everything fits. Only sizes: they are the same on
 * every machine. Init time is reported beside them (and benchmarked), never failed on.
 */
export function budgetFailures(reports: readonly BundleReport[]): string[] {
  const failures: string[] = [];
  for (const r of reports) {
    for (const [driver, bytes] of Object.entries(r.loadedBytes)) {
      if (bytes > BUNDLE_BYTES_MAX) failures.push(`${r.name}: ${kb(bytes)} KB loaded on the ${driver} driver exceeds the ${kb(BUNDLE_BYTES_MAX)} KB bundle budget`);
    }
  }
  return failures;
}

/** Init figures above the target, as notes for the report (not failures). */
export function initNotes(reports: readonly BundleReport[]): string[] {
  return reports
    .filter((r) => r.initMs !== undefined && r.initMs > INIT_CPU_MS_TARGET)
    .map((r) => `${r.name}: module init took ${(r.initMs as number).toFixed(1)} ms of CPU, above the ${INIT_CPU_MS_TARGET} ms target (a loaded machine inflates it; npm run bench measures it properly)`);
}

async function main(): Promise<number> {
  const started = Date.now();
  const reports = await buildFunctions();
  const builtMs = Date.now() - started;
  for (const r of reports) {
    r.initMs = measureInitMs(join(r.dir, 'index.mjs'));
    r.initWithNeonMs = measureInitMs(join(r.dir, 'index.mjs'), 5, r.neonChunks);
  }
  console.log(`built ${reports.length} functions into ${relative(process.cwd(), join(ROOT, 'dist', 'functions')) || '.'} in ${builtMs} ms (init measured in ${Date.now() - started - builtMs} ms)`);
  console.log(formatReport(reports));
  console.log(`node -e '' itself: ${nodeBaselineMs().toFixed(1)} ms wall; init = CPU time of importing the bundle in a fresh node (median of 5), on top of that`);
  console.log(`budget: loaded ≤ ${kb(BUNDLE_BYTES_MAX)} KB per function and driver; init target ${INIT_CPU_MS_TARGET} ms of CPU (reported, benchmarked by npm run bench, never failed on)`);
  console.log('(init+neon: index.mjs plus the Neon driver chunks the first request loads)');
  for (const note of initNotes(reports)) console.log(`note: ${note}`);
  const failures = budgetFailures(reports);
  for (const f of failures) console.error(`FAIL ${f}`);
  return failures.length ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
