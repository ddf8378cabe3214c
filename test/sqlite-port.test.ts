/**
 * The SQLite port's conformance suite (test/support/sqlite-conformance.ts) under Node: wa-sqlite
 * in memory and file-backed, plus what only files do (three open at once). The browser (OPFS)
 * adapter runs the same cases in test/sqlite-port.web.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { conformanceCases, type Adapter } from './support/sqlite-conformance.js';

function conformance(adapter: Adapter): void {
  describe(adapter.name, () => {
    for (const c of conformanceCases(adapter, expect)) it(c.name, c.run);
  });
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lockstep-sqlite-'));
  dirs.push(dir);
  return dir;
}
let fileCount = 0;
const fileDir = scratchDir();

conformance({ name: 'wa-sqlite, Node, in memory', open: () => openNodeSqlite() });
conformance({
  name: 'wa-sqlite, Node, file',
  open: () => openNodeSqlite({ path: join(fileDir, `db-${++fileCount}.sqlite3`) }),
  reopen: (key) => openNodeSqlite({ path: join(fileDir, `${key}.sqlite3`) }),
});

describe('wa-sqlite, Node, several files', () => {
  it('keeps three file databases open at once, independent of each other', async () => {
    const dir = scratchDir();
    const dbs = await Promise.all([0, 1, 2].map((i) => openNodeSqlite({ path: join(dir, `client-${i}.sqlite3`) })));
    await Promise.all(dbs.map((db, i) => db.exec(`CREATE TABLE n (id INTEGER PRIMARY KEY, owner INTEGER); CREATE TABLE only_${i} (x)`)));
    // Interleaved transactions on all three at once.
    await Promise.all(
      dbs.map((db, i) => db.transaction(async (tx) => {
        for (let k = 0; k < 50 * (i + 1); k++) {
          await tx.run('INSERT INTO n VALUES (?, ?)', [k, i]);
          if (k % 10 === 0) await new Promise((resolve) => setImmediate(resolve));
        }
      })),
    );
    for (const [i, db] of dbs.entries()) {
      expect(await db.query('SELECT count(*) AS n, min(owner) AS lo, max(owner) AS hi FROM n')).toEqual([{ n: 50 * (i + 1), lo: i, hi: i }]);
      expect(await db.query("SELECT name FROM sqlite_master WHERE name LIKE 'only_%'")).toEqual([{ name: `only_${i}` }]);
    }
    await Promise.all(dbs.map((db) => db.close()));
    const again = await Promise.all([0, 1, 2].map((i) => openNodeSqlite({ path: join(dir, `client-${i}.sqlite3`) })));
    for (const [i, db] of again.entries()) {
      expect(await db.query('PRAGMA integrity_check')).toEqual([{ integrity_check: 'ok' }]);
      expect(await db.query('SELECT count(*) AS n FROM n')).toEqual([{ n: 50 * (i + 1) }]);
      await db.close();
    }
  });
});
