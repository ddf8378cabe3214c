/**
 * The SQLite port's conformance suite (style.md #7): one set of cases written against an `open()`
 * factory, run for every adapter — wa-sqlite under Node in memory and on a file
 * (test/sqlite-port.test.ts), and wa-sqlite on OPFS in a chromium worker
 * (test/sqlite-port.web.test.ts). No vitest import: the browser bundle runs these cases too.
 */
import type { ExpectStatic } from 'vitest';
import { SqliteError, type SqliteDb, type SqlValue } from '../../client-web/sqlite/index.js';

/** One conformance case. */
export interface ConformanceCase {
  readonly name: string;
  readonly run: () => Promise<void>;
}

export interface Adapter {
  name: string;
  /** A fresh, empty database. */
  open(): Promise<SqliteDb>;
  /** For persistent adapters: opens the database at `key` again (the same one after close). */
  reopen?(key: string): Promise<SqliteDb>;
}

const allBytes = Uint8Array.from({ length: 256 }, (_, i) => i);

/** How an INTEGER comes back: number when safe, bigint beyond ±(2^53-1). */
function integer(value: bigint): number | bigint {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
}

/**
 * The cases, against one adapter, with the `expect` of whoever runs them (vitest's under Node;
 * chai with @vitest/expect's matchers in a browser worker).
 */
export function conformanceCases(adapter: Adapter, expect: ExpectStatic): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const it = (name: string, run: () => Promise<void>) => void cases.push({ name, run });
  const withDb = async (fn: (db: SqliteDb) => Promise<void>): Promise<void> => {
    const db = await adapter.open();
    try {
      await fn(db);
    } finally {
      await db.close();
    }
  };

  it('runs DDL and reads every kind of SqlValue back exactly', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE v (id INTEGER PRIMARY KEY, x); CREATE INDEX v_x ON v (x);');
      const values: SqlValue[] = [
        null,
        0,
        -1,
        2_147_483_647,
        2_147_483_648,
        2 ** 40,
        Number.MAX_SAFE_INTEGER,
        Number.MIN_SAFE_INTEGER,
        1.5,
        -0.1,
        1e300,
        9007199254740993n,
        -9007199254740993n,
        9223372036854775807n,
        -9223372036854775808n,
        '',
        'plain',
        'unicode: é ß 中文 🎉 \u2028 tail',
        new Uint8Array(0),
        allBytes,
      ];
      for (const [i, x] of values.entries()) expect(await db.run('INSERT INTO v (id, x) VALUES (?, ?)', [i, x])).toEqual({ changes: 1 });
      const rows = await db.query<{ id: number; x: SqlValue; t: string }>('SELECT id, x, typeof(x) AS t FROM v ORDER BY id');
      expect(rows.map((r) => r.x)).toEqual(values);
      // Types, not only values: integers stay INTEGER (even past int32), blobs stay BLOB.
      expect(rows.map((r) => r.t)).toEqual([
        'null', 'integer', 'integer', 'integer', 'integer', 'integer', 'integer', 'integer', 'real', 'real', 'real',
        'integer', 'integer', 'integer', 'integer', 'text', 'text', 'text', 'blob', 'blob',
      ]);
      expect(typeof rows[6]?.x).toBe('number');
      expect(typeof rows[11]?.x).toBe('bigint');
      // ±2^53 is not a safe integer, so it comes back as a bigint.
      const [edge] = await db.query('SELECT 9007199254740992 AS hi, -9007199254740992 AS lo, 9007199254740991 AS safe');
      expect(edge).toEqual({ hi: 9007199254740992n, lo: -9007199254740992n, safe: 9007199254740991 });
      // Blobs are copies, not views into wasm memory: later calls do not change them.
      const blob = rows[19]?.x as Uint8Array;
      await db.query('SELECT randomblob(100000)');
      expect(blob).toEqual(allBytes);
    }));

  // Issue 23 item 3: wa-sqlite's own text binding cut 'before\0after' to 'before' and paired a lone
  // surrogate with the next character ('\ud83dxyz' came back as '👸yz'). Text is exact now, on
  // every adapter; which text may be synced is the capture triggers' decision, not the port's.
  it('keeps text exactly: U+0000 and lone surrogates included, as parameters and as results', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE s (id INTEGER PRIMARY KEY, x TEXT)');
      const texts = [
        'before\u0000after', '\u0000', '\u0000\u0000tail', 'trail\u0000',
        '\ud83dxyz', 'xyz\ud83d', '\ude00abc', '\ude00\ud83d', 'a\ud800\udbffb', '\udfff',
        'pair \ud83d\ude00 then lone \ud83d', 'é\u0000中\ud800🎉', 'x'.repeat(100_000) + '\u0000\ud801',
      ];
      await db.runMany('INSERT INTO s (id, x) VALUES (?, ?)', texts.map((t, i) => [i, t]));
      const rows = await db.query<{ x: string; t: string; n: number }>('SELECT x, typeof(x) AS t, length(CAST(x AS BLOB)) AS n FROM s ORDER BY id');
      expect(rows.map((r) => r.x)).toEqual(texts);
      expect(rows.every((r) => r.t === 'text')).toBe(true);
      // Stored whole, not cut at the NUL: 'before\0after' is 12 bytes.
      expect(rows[0]?.n).toBe(12);
      // Text SQLite computes comes back exactly too, and a parameter is found by equality.
      expect(await db.query('SELECT ? || x AS y FROM s WHERE x = ?', ['\ud83d', 'before\u0000after'])).toEqual([{ y: '\ud83dbefore\u0000after' }]);
      expect(await db.query('SELECT id FROM s WHERE x = ?', ['\ud83dxyz'])).toEqual([{ id: 4 }]);
      // The empty string stays an empty string (not NULL).
      await db.run('INSERT INTO s (id, x) VALUES (?, ?)', [100, '']);
      expect(await db.query('SELECT x, typeof(x) AS t FROM s WHERE id = 100')).toEqual([{ x: '', t: 'text' }]);
      // SQL text cannot carry them (it is NUL-terminated): refused, never run cut short.
      await expect(db.run("INSERT INTO s (id, x) VALUES (200, 'a\u0000b')")).rejects.toThrow(/U\+0000 or a lone surrogate/);
      await expect(db.exec("INSERT INTO s (id, x) VALUES (201, 'a'); INSERT INTO s (id, x) VALUES (202, '\ud800')")).rejects.toThrow(/lone surrogate/);
      expect(await db.query('SELECT count(*) AS n FROM s WHERE id >= 200')).toEqual([{ n: 0 }]);
    }));

  it('answers changes for DML and zero for other statements', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE c (k INTEGER PRIMARY KEY, n INTEGER)');
      expect(await db.run('INSERT INTO c VALUES (1, 0), (2, 0), (3, 0)')).toEqual({ changes: 3 });
      expect(await db.run('UPDATE c SET n = n + 1 WHERE k >= ?', [2])).toEqual({ changes: 2 });
      expect(await db.run('SELECT * FROM c')).toEqual({ changes: 0 });
      expect(await db.run('CREATE TABLE d (x)')).toEqual({ changes: 0 });
      expect(await db.run('  -- comment\n DELETE FROM c WHERE k = 1')).toEqual({ changes: 1 });
      expect(await db.run('WITH z AS (SELECT 2 AS k) DELETE FROM c WHERE k IN (SELECT k FROM z)')).toEqual({ changes: 1 });
      expect(await db.run('DELETE FROM c WHERE k = 99')).toEqual({ changes: 0 });
      expect(await db.query('SELECT k, n FROM c')).toEqual([{ k: 3, n: 1 }]);
    }));

  it('rejects a parameter count mismatch, several statements in run, and non-SqlValues', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE p (a, b)');
      await expect(db.run('INSERT INTO p VALUES (?, ?)', [1])).rejects.toBeInstanceOf(SqliteError);
      await expect(db.run('INSERT INTO p VALUES (1, 2); INSERT INTO p VALUES (3, 4)')).rejects.toThrow(/more than one statement/);
      await expect(db.run('INSERT INTO p VALUES (?, ?)', [1, true as unknown as SqlValue])).rejects.toThrow(/boolean/);
      const syntax = await db.query('SELEC 1').catch((e: unknown) => e);
      expect(syntax).toBeInstanceOf(SqliteError);
      expect((syntax as SqliteError).code).toBe(1);
      expect((syntax as SqliteError).message).toMatch(/syntax error.*SELEC 1/);
      expect(await db.query('SELECT count(*) AS n FROM p')).toEqual([{ n: 0 }]);
    }));

  it('runMany prepares once and applies 10,000 rows in order', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE m (id INTEGER PRIMARY KEY, title TEXT NOT NULL, big INTEGER, data BLOB)');
      const rows: SqlValue[][] = [];
      for (let i = 0; i < 10_000; i++) rows.push([i, `title ${i} ✓`, BigInt(i) * 10_000_000_000_000n, new Uint8Array([i & 255, i >> 8])]);
      const result = await db.transaction((tx) => tx.runMany('INSERT INTO m (id, title, big, data) VALUES (?, ?, ?, ?)', rows));
      expect(result).toEqual({ changes: 10_000 });
      const [sums] = await db.query('SELECT count(*) AS n, sum(id) AS s, sum(length(title)) AS l, max(big) AS b FROM m');
      expect(sums).toEqual({ n: 10_000, s: 49_995_000, l: rows.reduce((a, r) => a + (r[1] as string).length, 0), b: 99_990_000_000_000_000n });
      const some = await db.query('SELECT id, title, big, data FROM m WHERE id IN (0, 777, 9999) ORDER BY id');
      expect(some).toEqual([0, 777, 9999].map((i) => ({ id: i, title: `title ${i} ✓`, big: integer(BigInt(i) * 10_000_000_000_000n), data: new Uint8Array([i & 255, i >> 8]) })));
      expect(typeof some[2]?.['big']).toBe('bigint');
      // Changes are per row: an update matching nothing counts zero.
      expect(await db.runMany('UPDATE m SET title = ? WHERE id = ?', [['a', 1], ['b', -5], ['c', 2]])).toEqual({ changes: 2 });
      expect(await db.runMany('DELETE FROM m WHERE id = ?', [])).toEqual({ changes: 0 });
      // A failing row stops the batch with a typed error.
      const err = await db.runMany('INSERT INTO m (id, title) VALUES (?, ?)', [[20_000, 'ok'], [1, 'dup']]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SqliteError);
      expect((err as SqliteError).code).toBe(19);
      expect((err as SqliteError).message).toMatch(/UNIQUE constraint failed: m\.id/);
      // The rows before it stand (no transaction here), and the connection goes on working.
      expect(await db.query('SELECT title FROM m WHERE id IN (1, 20000) ORDER BY id')).toEqual([{ title: 'a' }, { title: 'ok' }]);
      // A query failing while it steps throws SQLite's message too.
      const bad = await db.query("SELECT json('{') AS j").catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(SqliteError);
      expect((bad as SqliteError).message).toMatch(/malformed JSON/);
      // A RETURNING row is stepped past, not an error.
      expect(await db.runMany('INSERT INTO m (id, title) VALUES (?, ?) RETURNING id', [[30_000, 'r'], [30_001, 's']])).toEqual({ changes: 2 });
    }));

  it('commits a transaction, and rolls back and rethrows when fn throws', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
      expect(await db.transaction(async (tx) => {
        await tx.run('INSERT INTO t VALUES (1, ?)', ['one']);
        return (await tx.query('SELECT v FROM t'))[0]?.['v'];
      })).toBe('one');
      const boom = new Error('boom');
      await expect(db.transaction(async (tx) => {
        await tx.run('INSERT INTO t VALUES (2, ?)', ['two']);
        await tx.run('UPDATE t SET v = ? WHERE k = 1', ['changed']);
        throw boom;
      })).rejects.toBe(boom);
      expect(await db.query('SELECT k, v FROM t')).toEqual([{ k: 1, v: 'one' }]);
      // A SQLite error inside also rolls back and surfaces as SqliteError.
      const err = await db.transaction(async (tx) => {
        await tx.run('INSERT INTO t VALUES (3, ?)', ['three']);
        await tx.run('INSERT INTO t VALUES (1, ?)', ['dup']);
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SqliteError);
      expect((err as SqliteError).isConstraint).toBe(true);
      expect(await db.query('SELECT k FROM t')).toEqual([{ k: 1 }]);
      // tx is dead once its transaction ended.
      let leaked: Parameters<Parameters<SqliteDb['transaction']>[0]>[0] | undefined;
      await db.transaction(async (tx) => {
        leaked = tx;
      });
      await expect(leaked?.query('SELECT 1')).rejects.toThrow(/transaction has ended/);
      // The connection is usable again: no transaction left open.
      await db.transaction((tx) => tx.run('INSERT INTO t VALUES (4, ?)', ['four']));
      expect(await db.query('SELECT count(*) AS n FROM t')).toEqual([{ n: 2 }]);
    }));

  it('queues calls behind a running transaction; they see its committed result', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE q (k INTEGER PRIMARY KEY)');
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const order: string[] = [];
      const tx = db.transaction(async (t) => {
        await t.run('INSERT INTO q VALUES (1)');
        await gate;
        await t.run('INSERT INTO q VALUES (2)');
        order.push('tx');
      });
      const outside = db.query('SELECT count(*) AS n FROM q').then((r) => {
        order.push('query');
        return r;
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(order).toEqual([]);
      release();
      await tx;
      expect(await outside).toEqual([{ n: 2 }]);
      expect(order).toEqual(['tx', 'query']);
      // Concurrent tx calls inside fn are serialised too.
      await db.transaction((t) => Promise.all([3, 4, 5, 6].map((k) => t.run('INSERT INTO q VALUES (?)', [k]))));
      expect(await db.query('SELECT count(*) AS n FROM q')).toEqual([{ n: 6 }]);
    }));

  it('enforces foreign keys and cascades deletes', () =>
    withDb(async (db) => {
      await db.exec(`CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent (id) ON DELETE CASCADE);`);
      expect(await db.query('PRAGMA foreign_keys')).toEqual([{ foreign_keys: 1 }]);
      await db.run('INSERT INTO parent VALUES (1)');
      await db.runMany('INSERT INTO child VALUES (?, ?)', [[10, 1], [11, 1]]);
      const err = await db.run('INSERT INTO child VALUES (12, 2)').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SqliteError);
      expect((err as SqliteError).code).toBe(19);
      expect((err as SqliteError).message).toMatch(/FOREIGN KEY constraint failed.*INSERT INTO child/);
      // A deferred FK fails at COMMIT: the transaction is rolled back and the connection stays usable.
      const atCommit = await db.transaction(async (tx) => {
        await tx.exec('PRAGMA defer_foreign_keys = ON');
        await tx.run('INSERT INTO child VALUES (13, 99)');
        await tx.run('INSERT INTO parent VALUES (2)');
      }).catch((e: unknown) => e);
      expect(atCommit).toBeInstanceOf(SqliteError);
      expect((atCommit as SqliteError).code).toBe(19);
      expect(await db.query('SELECT count(*) AS n FROM parent')).toEqual([{ n: 1 }]);
      expect(await db.query('SELECT id FROM child ORDER BY id')).toEqual([{ id: 10 }, { id: 11 }]);
      expect(await db.run('DELETE FROM parent WHERE id = 1')).toEqual({ changes: 1 });
      expect(await db.query('SELECT count(*) AS n FROM child')).toEqual([{ n: 0 }]);
    }));

  it('round-trips a 5 MB blob', () =>
    withDb(async (db) => {
      await db.exec('CREATE TABLE b (id INTEGER PRIMARY KEY, data BLOB)');
      const big = new Uint8Array(5 * 1024 * 1024);
      for (let i = 0; i < big.length; i++) big[i] = (i * 31 + (i >> 11)) & 255;
      await db.run('INSERT INTO b VALUES (1, ?)', [big]);
      const [row] = await db.query<{ data: Uint8Array }>('SELECT data FROM b');
      expect(row?.data.byteLength).toBe(big.byteLength);
      expect(row?.data.every((b, i) => b === big[i])).toBe(true);
    }));

  it('rejects every call after close', async () => {
    const db = await adapter.open();
    await db.exec('CREATE TABLE x (a)');
    await db.close();
    for (const call of [
      () => db.query('SELECT 1'),
      () => db.run('INSERT INTO x VALUES (1)'),
      () => db.exec('SELECT 1'),
      () => db.runMany('INSERT INTO x VALUES (?)', [[1]]),
      () => db.transaction(async () => 1),
    ]) {
      await expect(call()).rejects.toThrow(/database is closed/);
    }
    await db.close(); // idempotent
  });

  if (adapter.reopen) {
    const reopen = adapter.reopen;
    it('finds the data again after close and reopen, and a rolled-back transaction left nothing', async () => {
      const key = `reopen-${Math.random().toString(36).slice(2, 10)}`;
      const first = await reopen(key);
      await first.exec('CREATE TABLE r (k INTEGER PRIMARY KEY, v TEXT, big INTEGER)');
      await first.transaction((tx) => tx.runMany('INSERT INTO r VALUES (?, ?, ?)', Array.from({ length: 1000 }, (_, i) => [i, `v${i}`, 2n ** 62n + BigInt(i)])));
      await first.transaction(async (tx) => {
        await tx.run('DELETE FROM r');
        throw new Error('undo');
      }).catch(() => undefined);
      await first.close();
      const second = await reopen(key);
      expect(await second.query('PRAGMA integrity_check')).toEqual([{ integrity_check: 'ok' }]);
      expect(await second.query('PRAGMA foreign_keys')).toEqual([{ foreign_keys: 1 }]);
      expect(await second.query('SELECT count(*) AS n, sum(k) AS s FROM r')).toEqual([{ n: 1000, s: 499_500 }]);
      expect(await second.query('SELECT v, big FROM r WHERE k = 999')).toEqual([{ v: 'v999', big: 2n ** 62n + 999n }]);
      await second.close();
    });
  }
  cases.push(...tablesConformanceCases(withDb, expect));
  return cases;
}

/**
 * Which tables a statement reads, and which ones a commit wrote (the port's `tablesRead` and
 * `onCommit`, the base of live queries): as SQLite reports them, for every adapter.
 */
function tablesConformanceCases(withDb: (fn: (db: SqliteDb) => Promise<void>) => Promise<void>, expect: ExpectStatic): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const it = (name: string, run: () => Promise<void>) => void cases.push({ name, run });
  const schema = `CREATE TABLE parent (id TEXT PRIMARY KEY, title TEXT);
    CREATE TABLE child (id TEXT PRIMARY KEY, parent_id TEXT REFERENCES parent (id) ON DELETE CASCADE, n INTEGER);
    CREATE TABLE audit (what TEXT);
    CREATE TABLE pairs (k TEXT PRIMARY KEY, v) WITHOUT ROWID;
    CREATE TRIGGER child_audit AFTER INSERT ON child BEGIN INSERT INTO audit VALUES ('child ' || NEW.id); END;
    CREATE VIEW titled AS SELECT c.id, p.title FROM child c JOIN parent p ON p.id = c.parent_id;`;
  const sorted = (tables: Iterable<string>) => [...tables].sort();

  it('tablesRead names the tables beneath joins, views, CTEs, subqueries and count(*), without running the statement', () =>
    withDb(async (db) => {
      await db.exec(schema);
      await db.run("INSERT INTO parent VALUES ('p', 'one')");
      expect(sorted(await db.tablesRead('SELECT c.n FROM child c JOIN parent p ON p.id = c.parent_id WHERE p.title = ?'))).toEqual(['child', 'parent']);
      expect(sorted(await db.tablesRead('SELECT * FROM titled'))).toEqual(['child', 'parent', 'titled']);
      expect(await db.tablesRead('SELECT count(*) AS n FROM pairs')).toEqual(['pairs']);
      expect(sorted(await db.tablesRead('WITH x AS (SELECT id FROM parent) SELECT id FROM x WHERE EXISTS (SELECT 1 FROM child)'))).toEqual(['child', 'parent']);
      expect(await db.tablesRead('SELECT 1 AS one')).toEqual([]);
      // Prepared, never run: the rows are still there.
      await db.tablesRead('DELETE FROM parent');
      expect(await db.query('SELECT count(*) AS n FROM parent')).toEqual([{ n: 1 }]);
      const error = await db.tablesRead('SELECT * FROM no_such_table').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SqliteError);
      expect((error as SqliteError).message).toMatch(/no such table: no_such_table/);
    }));

  it('onCommit reports each committed transaction once, with the tables its statements, triggers and cascades wrote', () =>
    withDb(async (db) => {
      await db.exec(schema);
      const commits: string[][] = [];
      const off = db.onCommit((tables) => commits.push(sorted(tables)));
      await db.transaction(async (tx) => {
        await tx.run("INSERT INTO parent VALUES ('p', 'one')");
        await tx.runMany('INSERT INTO child VALUES (?, ?, ?)', [['c1', 'p', 1], ['c2', 'p', 2]]);
        expect(commits).toEqual([]);
      });
      // The trigger's audit rows count as written by the same transaction.
      expect(commits).toEqual([['audit', 'child', 'parent']]);
      // A statement outside a transaction commits by itself; the cascade's deletes are reported too.
      await db.run('DELETE FROM parent WHERE id = ?', ['p']);
      expect(commits.at(-1)).toEqual(['child', 'parent']);
      expect(await db.query('SELECT count(*) AS n FROM child')).toEqual([{ n: 0 }]);
      await db.run("INSERT INTO pairs VALUES ('k', 1)");
      expect(commits.at(-1)).toEqual(['pairs']);
      // Reads and rolled-back transactions report nothing.
      const before = commits.length;
      await db.query('SELECT * FROM titled');
      await db.transaction(async (tx) => {
        await tx.run("INSERT INTO parent VALUES ('q', 'two')");
        throw new Error('undo');
      }).catch(() => undefined);
      expect(commits.length).toBe(before);
      // A transaction the app opens itself is reported at its COMMIT.
      await db.exec('BEGIN');
      await db.run("UPDATE pairs SET v = 2 WHERE k = 'k'");
      expect(commits.length).toBe(before);
      await db.exec('COMMIT');
      expect(commits.at(-1)).toEqual(['pairs']);
      off();
      await db.run("INSERT INTO parent VALUES ('r', 'three')");
      expect(commits.length).toBe(before + 1);
    }));

  it('onCommit reports DDL and dropped tables, and a failed commit is not reported', () =>
    withDb(async (db) => {
      await db.exec(schema);
      const commits: string[][] = [];
      db.onCommit((tables) => commits.push(sorted(tables)));
      await db.exec('DROP TABLE audit');
      expect(commits.at(-1)).toContain('audit');
      // A deferred foreign key refuses the COMMIT: the transaction is rolled back, nothing reported.
      const before = commits.length;
      const refused = await db.transaction(async (tx) => {
        await tx.exec('PRAGMA defer_foreign_keys = ON');
        await tx.run("INSERT INTO child VALUES ('orphan', 'missing', 0)");
      }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(SqliteError);
      expect(commits.length).toBe(before);
    }));

  it('a statement kept prepared reports its writes at every commit, and follows schema changes', () =>
    withDb(async (db) => {
      await db.exec(schema);
      const commits: string[][] = [];
      db.onCommit((tables) => commits.push(sorted(tables)));
      await db.run("INSERT INTO parent VALUES ('p', 'one')");
      const insertChild = 'INSERT INTO child VALUES (?, ?, ?)';
      for (const id of ['c1', 'c2']) {
        await db.transaction(async (tx) => void (await tx.run(insertChild, [id, 'p', 1])));
        expect(commits.at(-1)).toEqual(['audit', 'child']);
      }
      // A trigger added later writes another table: the same statement reports it, every time.
      await db.exec('CREATE TABLE log (what TEXT); CREATE TRIGGER child_log AFTER INSERT ON child BEGIN INSERT INTO log VALUES (NEW.id); END;');
      for (const id of ['c3', 'c4']) {
        await db.runMany(insertChild, [[id, 'p', 2]]);
        expect(commits.at(-1)).toEqual(['audit', 'child', 'log']);
      }
      expect(await db.query('SELECT what FROM log ORDER BY what')).toEqual([{ what: 'c3' }, { what: 'c4' }]);
      // A column added later shows in the same SELECT *.
      await db.run("INSERT INTO pairs VALUES ('k', 1)");
      expect(await db.query('SELECT * FROM pairs')).toEqual([{ k: 'k', v: 1 }]);
      await db.exec('ALTER TABLE pairs ADD COLUMN w');
      expect(await db.query('SELECT * FROM pairs')).toEqual([{ k: 'k', v: 1, w: null }]);
      // A dropped table fails the statement with SQLite's message; created again, it works again.
      await db.exec('DROP TABLE pairs');
      await expect(db.query('SELECT * FROM pairs')).rejects.toThrow(/no such table: pairs/);
      await db.exec('CREATE TABLE pairs (k TEXT PRIMARY KEY, v)');
      expect(await db.query('SELECT * FROM pairs')).toEqual([]);
      // A failed step leaves the statement usable, with nothing of the failed binding.
      for (let i = 0; i < 2; i++) await expect(db.run(insertChild, ['c1', 'p', 9])).rejects.toBeInstanceOf(SqliteError);
      await db.run(insertChild, ['c5', 'p', 5]);
      expect(await db.query('SELECT id, n FROM child WHERE id IN (?, ?) ORDER BY id', ['c1', 'c5'])).toEqual([{ id: 'c1', n: 1 }, { id: 'c5', n: 5 }]);
      // More statements than are kept: each still answers its own result.
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < 150; i++) expect(await db.query(`SELECT ? + ${i} AS n`, [round])).toEqual([{ n: round + i }]);
      }
    }));

  return cases;
}
