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
import { type SqlValue } from '../client-web/sqlite/port.js';
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

describe('wa-sqlite, Node, the bulk path (runMany)', () => {
  // runMany writes each row's texts into one buffer it binds in place (SQLITE_STATIC).
  it('binds text exactly beside blobs large enough to grow the wasm memory between two texts of a row', async () => {
    // The bulk path writes a row's texts into one buffer after binding the values before them; a
    // blob's allocation may grow the memory, which replaces the heap's view.
    const db = await openNodeSqlite();
    await db.exec('CREATE TABLE big (a TEXT, b BLOB, c TEXT)');
    const rows: SqlValue[][] = [16, 48, 96].map((mb, i) => {
      const blob = new Uint8Array(mb * 1024 * 1024);
      blob[blob.length - 1] = i + 1;
      return [`first ${i} é 😀`.repeat(100), blob, `second ${i} \u0000 ü`.repeat(100)];
    });
    await db.transaction((tx) => tx.runMany('INSERT INTO big (a, b, c) VALUES (?, ?, ?)', rows));
    const back = await db.query<{ a: string; n: number; last: string; c: string }>(
      'SELECT a, length(b) AS n, hex(substr(b, -1)) AS last, c FROM big ORDER BY rowid');
    expect(back).toEqual(rows.map((r, i) => ({ a: r[0], n: (r[1] as Uint8Array).length, last: `0${i + 1}`, c: r[2] })));
    await db.close();
  });

  it('binds texts of every size in one run, the buffer growing from row to row', async () => {
    const db = await openNodeSqlite();
    await db.exec('CREATE TABLE grow (a TEXT, b TEXT)');
    const rows: SqlValue[][] = [1, 70_000, 3, 400_000, 0, 1_500_000, 2].map((n, i) => [`${i}:` + 'ß😀x'.repeat(n), n === 0 ? '' : `tail ${i}`]);
    await db.transaction((tx) => tx.runMany('INSERT INTO grow (a, b) VALUES (?, ?)', rows));
    expect(await db.query('SELECT a, b FROM grow ORDER BY rowid')).toEqual(rows.map(([a, b]) => ({ a, b })));
    await db.close();
  });
});
