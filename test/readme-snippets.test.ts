/**
 * Every TypeScript block of README.md compiles under tsc with the project's own strict settings
 * (issue 23 item 10): a snippet that no longer type-checks — an export it uses gone, a type that
 * does not fit — fails here. A block that imports the `ws` package is compiled twice: with `ws`,
 * and without that import, against the DOM's `WebSocket` (a browser's). test/readme-example.pg.test.ts
 * also runs the first block against a server.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from './support/local-start.js';

/** Every ```ts block of the README, in order. */
export function readmeTsBlocks(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string);
}

/** Inside the project's node_modules, so `ws` and `@types/*` resolve as they do for the project. */
const DIR = join(ROOT, 'node_modules', '.cache', `readme-snippets-${process.pid}`);

describe('README TypeScript snippets', () => {
  afterAll(() => rmSync(DIR, { recursive: true, force: true }));

  it('every ts block compiles under tsc (a ws block with ws and with the DOM WebSocket)', async () => {
    const blocks = readmeTsBlocks();
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    expect(blocks.some((b) => b.includes("from 'ws'"))).toBe(true);
    mkdirSync(DIR, { recursive: true });
    writeFileSync(join(DIR, 'package.json'), '{"type": "module"}');
    const files: string[] = [];
    const write = (name: string, code: string) => {
      // Each block is its own module (`export {}` keeps a block without imports one too).
      writeFileSync(join(DIR, name), `${code.replaceAll("'./client-web/", `'${ROOT}/client-web/`)}\nexport {};\n`);
      files.push(name);
    };
    blocks.forEach((code, i) => {
      write(`block-${i}.ts`, code);
      if (code.includes("from 'ws'")) write(`block-${i}-dom.ts`, code.replace(/^import WebSocket from 'ws';.*$/m, ''));
    });
    writeFileSync(join(DIR, 'tsconfig.json'), JSON.stringify({ extends: join(ROOT, 'tsconfig.json'), include: [], files }));
    const result = await new Promise<{ status: number; out: string }>((resolve) =>
      execFile(join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', join(DIR, 'tsconfig.json')], { cwd: DIR, encoding: 'utf8', timeout: 120_000 }, (error, stdout, stderr) =>
        resolve({ status: error ? Number(error.code ?? 1) : 0, out: `${stdout}${stderr}` })),
    );
    expect(result.out).toBe('');
    expect(result.status).toBe(0);
  });
});
