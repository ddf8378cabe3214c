/**
 * vitest setupFiles: folders a test file makes under the OS temp dir (`scratchDir`) are removed
 * when the file ends. Test files used to leave theirs behind (a built web fixture, a device file,
 * a SQL file for the CLI): ~45 folders a run, 1 MB each for a web fixture, in every user's /tmp.
 * The hook is registered before the file's own, so it runs after them (vitest runs after-hooks
 * in reverse), once the servers and devices using the folders are closed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

// The files of a project share their process (vitest.config.ts), and vitest runs this setup file
// afresh for each, as a new instance of this module. A support module that imported scratchDir
// for an earlier file (web-fixture.ts) still calls that earlier instance, whose after-hook has
// run: so the list is the process's, and each file's hook empties it.
const MADE = Symbol.for('lockstep.test.scratchDirs');
const made: string[] = ((globalThis as typeof globalThis & { [MADE]?: string[] })[MADE] ??= []);

/** A new folder `lockstep-<name>-XXXXXX` under the OS temp dir, removed when the test file ends. */
export function scratchDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `lockstep-${name}-`));
  made.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});
