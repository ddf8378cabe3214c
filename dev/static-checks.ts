/**
 * `npm test`'s first step: the type check and the lint, side by side. Each is one process that
 * mostly uses one core (~17 s and ~37 s here), so on two cores together they take the time of
 * the longer one (~40 s against ~50 s one after the other). Each one's output is printed whole
 * when it ends, never interleaved; the exit code is non-zero when either failed.
 *
 *   tsx dev/static-checks.ts
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

/** The path of `command` as the installed package declares it in `bin` (its exports may hide it). */
function binOf(pkg: string, command: string): string {
  const manifest = require.resolve(`${pkg}/package.json`);
  const bin = (JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> }).bin[command];
  if (!bin) throw new Error(`${pkg} declares no ${command} command`);
  return join(dirname(manifest), bin);
}

interface Check {
  readonly name: string;
  /** The package's own bin script, run by this Node (no shell, no .bin shim: the same on every OS). */
  readonly script: string;
  readonly args: readonly string[];
}

const CHECKS: readonly Check[] = [
  { name: 'tsc --noEmit', script: binOf('typescript', 'tsc'), args: ['--noEmit'] },
  { name: 'eslint .', script: binOf('eslint', 'eslint'), args: ['.'] },
];

function run(check: Check): Promise<boolean> {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(process.execPath, [check.script, ...check.args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const output: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => output.push(b));
    child.stderr.on('data', (b: Buffer) => output.push(b));
    child.on('error', (error) => {
      process.stderr.write(`${check.name}: could not start: ${error.message}\n`);
      resolve(false);
    });
    child.on('close', (code, signal) => {
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const text = Buffer.concat(output).toString();
      process.stdout.write(`> ${check.name}: ${code === 0 ? 'passed' : `failed (${signal ?? `exit ${code}`})`} in ${seconds} s\n${text}${text && !text.endsWith('\n') ? '\n' : ''}`);
      resolve(code === 0);
    });
  });
}

const results = await Promise.all(CHECKS.map(run));
process.exitCode = results.every(Boolean) ? 0 : 1;
