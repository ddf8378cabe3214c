/**
 * The README's client example runs as written against what `npm start` serves (the demo schema,
 * development tokens): this takes the code block from README.md, runs it with tsx with `PORT`
 * moved to a test server's (as a moved `npm start` has it) and the temporary folder moved to its
 * own, and checks what reached the server and that nothing was left in the working folder. A
 * README edit that breaks the example fails here.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { DEMO_SCHEMA_SQL, DEMO_SYNC_TABLES } from '../demo/schema.js';
import { ROOT } from './support/local-start.js';
import { startTestServer, type TestServer } from './support/server.js';

/** The first ```ts block after the heading "## Using the web client". */
function readmeExample(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Using the web client'));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  if (!match?.[1]) throw new Error('README.md: no ts block under "## Using the web client"');
  return match[1];
}

describe('the README client example', () => {
  let s: TestServer;
  let dir: string;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: DEMO_SCHEMA_SQL, tables: parseTables(DEMO_SYNC_TABLES), devTokens: true });
    dir = mkdtempSync(join(tmpdir(), 'lockstep-readme-'));
  });
  afterAll(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs as written against npm start\'s schema and puts the list and the to-do on the server', async () => {
    const code = readmeExample();
    // As in the project folder, whose package.json makes .ts files ES modules (top-level await).
    const work = join(dir, 'project');
    const temp = join(dir, 'tmp');
    mkdirSync(work);
    mkdirSync(temp);
    writeFileSync(join(work, 'package.json'), '{"type": "module"}');
    const file = join(work, 'example.ts');
    writeFileSync(file, code.replaceAll("'./client-web/", `'${ROOT}/client-web/`));
    const env = { ...process.env, PORT: new URL(s.url).port, TMPDIR: temp };
    // Asynchronously: the test server answers from this very process.
    const run = () =>
      new Promise<{ status: number; stdout: string; stderr: string }>((resolve) =>
        execFile(join(ROOT, 'node_modules', '.bin', 'tsx'), [file], { cwd: work, env, encoding: 'utf8' }, (error, stdout, stderr) =>
          resolve({ status: error ? Number(error.code ?? 1) : 0, stdout, stderr })),
      );
    const first = await run();
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/status: 'attached'/);
    expect(first.stdout).toMatch(/status: 'committed'/);
    // Again on the same file: the device is attached already, and a second list joins the first.
    const second = await run();
    expect(second.status, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/resolution: 'already_attached'/);
    // The device's database is in the temporary folder, never in the project folder.
    expect(readdirSync(work).sort()).toEqual(['example.ts', 'package.json']);
    expect(readdirSync(temp)).toContain('lockstep-alice.db');
    const { rows } = await s.t.exec(
      `SELECT l.title AS list, t.title AS todo FROM demo.lists l JOIN demo.todos t ON t.list_id = l.id AND t._sync_scope_id = l._sync_scope_id
       WHERE l._sync_scope_id = 'alice' ORDER BY 1, 2`);
    // Each run commits milk by hand (client.sync) and bread through the loop (client.start).
    expect(rows).toEqual([{ list: 'Groceries', todo: 'bread' }, { list: 'Groceries', todo: 'bread' }, { list: 'Groceries', todo: 'milk' }, { list: 'Groceries', todo: 'milk' }]);
  });
});
