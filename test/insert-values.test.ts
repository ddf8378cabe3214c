/**
 * insertValues (client-web/sqlite/insert-values.ts): many rows a statement must write exactly what
 * the same rows inserted one by one write — the values, their order, what triggers see, the
 * changes counted — across full statements and the remainder, and refuse rows of uneven length
 * before anything is bound.
 */
import { describe, expect, it } from 'vitest';
import { insertValues } from '../client-web/sqlite/insert-values.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type SqlValue, type SqliteDb } from '../client-web/sqlite/port.js';

const TABLE = `CREATE TABLE t (id TEXT PRIMARY KEY NOT NULL, n, x, b, tag);
CREATE TABLE seen (id TEXT, n);
CREATE TRIGGER t_seen AFTER INSERT ON t BEGIN INSERT INTO seen VALUES (NEW.id, NEW.n); END;`;

/** Values of every storage class, the awkward ones included. */
function row(i: number): SqlValue[] {
  const kinds: SqlValue[] = [null, 2n ** 62n + BigInt(i), -0.5 * i, `text ${i} \u0000 nul, 😀 and ? mark`, new Uint8Array([i % 256, 0, 255])];
  return [`k${String(i).padStart(5, '0')}`, i, kinds[i % kinds.length] as SqlValue, new Uint8Array(i % 3), i % 2 === 0 ? '' : `t${i}`];
}

async function dump(db: SqliteDb): Promise<unknown> {
  return {
    rows: await db.query('SELECT rowid, id, n, x, typeof(x) AS xt, b, tag FROM t ORDER BY rowid'),
    seen: await db.query('SELECT rowid, id, n FROM seen ORDER BY rowid'),
  };
}

async function fresh(): Promise<SqliteDb> {
  const db = await openNodeSqlite();
  await db.exec(TABLE);
  return db;
}

describe('insertValues', () => {
  // 5 values a row: 199 rows a statement. 0, 1, a full statement, one more, and several plus a remainder.
  for (const count of [0, 1, 199, 200, 1_000]) {
    it(`writes ${count} rows exactly as one insert a row does`, async () => {
      const rows = Array.from({ length: count }, (_, i) => row(i));
      const one = await fresh();
      const many = await fresh();
      const oneByOne = await one.transaction((tx) => tx.runMany('INSERT INTO t (id, n, x, b, tag) VALUES (?, ?, ?, ?, ?)', rows));
      const batched = await many.transaction((tx) => insertValues(tx, 'INSERT INTO t (id, n, x, b, tag)', '(?, ?, ?, ?, ?)', rows));
      expect(batched).toEqual({ changes: count });
      expect(oneByOne).toEqual({ changes: count });
      expect(await dump(many)).toEqual(await dump(one));
      await one.close();
      await many.close();
    });
  }

  it('takes literals in the tuple, a ? inside one included', async () => {
    const db = await fresh();
    const rows: SqlValue[][] = Array.from({ length: 600 }, (_, i) => [`k${i}`, i]);
    await db.transaction((tx) => insertValues(tx, 'INSERT INTO t (id, n, tag, b)', "(?, ?, 'what?', 0)", rows));
    expect(await db.query('SELECT count(*) AS c, sum(n) AS s, count(DISTINCT tag) AS tags, min(tag) AS tag FROM t')).toEqual([{ c: 600, s: 179_700, tags: 1, tag: 'what?' }]);
    await db.close();
  });

  it('refuses rows of uneven length before anything is written', async () => {
    const db = await fresh();
    // A short row beside a long one would bind in step as a flat list: it must fail, not shift.
    const rows: SqlValue[][] = [['a', 1, null, null], ['b', 2, null, null, 'x', 'extra'], ['c', 3, null, null, 'y']];
    await expect(db.transaction((tx) => insertValues(tx, 'INSERT INTO t (id, n, x, b, tag)', '(?, ?, ?, ?, ?)', rows))).rejects.toThrow(/rows of 4 and of 6 values/);
    expect(await db.query('SELECT count(*) AS c FROM t')).toEqual([{ c: 0 }]);
    await db.close();
  });

  it('fails on a tuple that does not take the rows, as one insert a row does', async () => {
    const db = await fresh();
    const rows: SqlValue[][] = [['a', 1], ['b', 2]];
    await expect(db.transaction((tx) => insertValues(tx, 'INSERT INTO t (id, n, x)', '(?, ?, ?)', rows))).rejects.toThrow(/parameters/);
    expect(await db.query('SELECT count(*) AS c FROM t')).toEqual([{ c: 0 }]);
    await db.close();
  });

  it('stops at a constraint, the transaction writing nothing, as one insert a row does', async () => {
    const db = await fresh();
    const rows = Array.from({ length: 450 }, (_, i) => row(i));
    rows[420] = row(7);
    await expect(db.transaction((tx) => insertValues(tx, 'INSERT INTO t (id, n, x, b, tag)', '(?, ?, ?, ?, ?)', rows))).rejects.toThrow(/UNIQUE/);
    expect(await db.query('SELECT (SELECT count(*) FROM t) AS t, (SELECT count(*) FROM seen) AS seen')).toEqual([{ t: 0, seen: 0 }]);
    await db.close();
  });
});
