/**
 * A dedicated worker that runs the SQLite port's conformance cases (test/support/sqlite-conformance.ts)
 * against wa-sqlite on OPFS, with chai and @vitest/expect's matchers as `expect`, and posts one
 * result per case to the page. OPFS access handles exist only in dedicated workers.
 */
// chai and @vitest/expect come with vitest (its own expect is built from them); a browser bundle
// cannot take vitest itself, so the matchers are assembled here the same way.
import * as chai from 'chai';
import { JestAsymmetricMatchers, JestChaiExpect, JestExtend } from '@vitest/expect';
import type { ExpectStatic } from 'vitest';
import { openOpfsSqlite } from '../../../client-web/sqlite/opfs.js';
import { conformanceCases } from '../sqlite-conformance.js';

chai.use(JestExtend);
chai.use(JestChaiExpect);
chai.use(JestAsymmetricMatchers);
const expect = chai.expect as unknown as ExpectStatic;

/** One case's outcome, as the page hands it to the test. */
export interface CaseResult {
  readonly name: string;
  readonly ok: boolean;
  readonly error?: string;
  readonly ms: number;
}

let fresh = 0;
const cases = conformanceCases(
  {
    name: 'wa-sqlite, chromium, OPFS',
    // A new database name per case: AccessHandlePoolVFS holds a directory's handles exclusively.
    open: () => openOpfsSqlite(`conformance-${Date.now()}-${++fresh}`),
    reopen: (key) => openOpfsSqlite(key),
  },
  expect,
);

/** The part of a dedicated worker's scope this file uses. */
const scope = globalThis as unknown as { onmessage: (() => unknown) | null; postMessage(message: unknown): void };

scope.onmessage = async () => {
  const results: CaseResult[] = [];
  for (const c of cases) {
    const started = performance.now();
    try {
      await c.run();
      results.push({ name: c.name, ok: true, ms: Math.round(performance.now() - started) });
    } catch (error) {
      results.push({ name: c.name, ok: false, error: error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ''}` : String(error), ms: Math.round(performance.now() - started) });
    }
  }
  scope.postMessage(results);
};
