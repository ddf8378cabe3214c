/**
 * The sync worker's half of a tab's live queries (client-web/live-prefetch.ts), on real wa-sqlite:
 * a watched query is read right behind each commit that wrote a table it reads, and announced with
 * the commit; a burst of commits is announced as one, with one read after the first; a query that
 * fails is left out (the tab runs it itself); a schema change hands over the tables it reads; a
 * failed announcement does not silence the commits after it; a tab's hub delivers the rows handed
 * over without asking for them.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LivePrefetch } from '../client-web/live-prefetch.js';
import { LiveQueries, type LiveQueryResult, type LiveSource, type PrefetchedRows } from '../client-web/live-query.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type SqlRow, type SqliteDb } from '../client-web/sqlite/port.js';

const NOTES_SQL = 'SELECT id, body FROM notes ORDER BY id';
const TAGS_SQL = 'SELECT name FROM tags ORDER BY name';

describe('live prefetch', () => {
  let db: SqliteDb;
  let reads: Map<string, number>;
  let reader: Pick<SqliteDb, 'query' | 'tablesRead'>;
  let announced: { tables: string[]; prefetched: PrefetchedRows[] }[];
  let prefetch: LivePrefetch;

  beforeEach(async () => {
    db = await openNodeSqlite();
    await db.exec('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); CREATE TABLE tags (name TEXT PRIMARY KEY); CREATE TABLE other (x)');
    reads = new Map();
    // Counts the reads of each query text, so a test can tell one read per commit from fewer.
    reader = {
      query: <T extends SqlRow = SqlRow>(sql: string, params?: Parameters<SqliteDb['query']>[1]) => {
        reads.set(sql, (reads.get(sql) ?? 0) + 1);
        return db.query<T>(sql, params);
      },
      tablesRead: (sql) => db.tablesRead(sql),
    };
    announced = [];
    prefetch = new LivePrefetch();
    db.onCommit((tables) => prefetch.committed(reader, tables, (t, prefetched) => announced.push({ tables: [...t].sort(), prefetched })));
  });
  afterEach(async () => {
    await db.close();
  });

  const settled = async (count: number) => {
    // Announcements follow reads queued on the database: a read of our own comes after them.
    for (let i = 0; i < 10 && announced.length < count; i++) await db.query('SELECT 1');
    return announced;
  };

  it('reads a watched query right behind the commit that wrote its table, and only then', async () => {
    prefetch.watch(1, NOTES_SQL, []);
    prefetch.watch(2, TAGS_SQL, []);
    await db.run("INSERT INTO notes (id, body) VALUES (1, 'one')");
    await settled(1);
    // Never read before: its tables come with its first rows.
    expect(announced).toEqual([{ tables: ['notes'], prefetched: [{ id: 1, rows: [{ id: 1, body: 'one' }], reads: ['notes'] }, { id: 2, rows: [], reads: ['tags'] }] }]);
    await db.run("INSERT INTO tags (name) VALUES ('red')");
    await db.run('INSERT INTO other (x) VALUES (1)');
    await settled(3);
    expect(announced.slice(1)).toEqual([
      { tables: ['tags'], prefetched: [{ id: 2, rows: [{ name: 'red' }] }] },
      { tables: ['other'], prefetched: [] },
    ]);
    prefetch.unwatch(2);
    await db.run("INSERT INTO tags (name) VALUES ('blue')");
    await settled(4);
    expect(announced[3]).toEqual({ tables: ['tags'], prefetched: [] });
  });

  it('announces a burst of commits as one after the first, with one more read that sees them all', async () => {
    prefetch.watch(1, NOTES_SQL, []);
    await db.run("INSERT INTO notes (id, body) VALUES (0, 'zero')");
    await settled(1);
    reads.clear();
    // Twenty-one commits queued at once: the first one's read runs after all of them.
    await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => db.run('INSERT INTO notes (id, body) VALUES (?, ?)', [i + 1, `note ${i + 1}`])),
      db.run("INSERT INTO tags (name) VALUES ('burst')"),
    ]);
    await settled(3);
    expect(reads.get(NOTES_SQL)).toBe(2);
    expect(announced.slice(1).map((a) => a.tables)).toEqual([['notes'], ['notes', 'tags']]);
    const last = announced.at(-1)?.prefetched[0];
    expect(last?.rows).toHaveLength(21);
    expect(last?.rows.at(-1)).toEqual({ id: 20, body: 'note 20' });
  });

  it('announces the commits that waited even when the announcement before them failed', async () => {
    const own = new LivePrefetch();
    own.watch(1, NOTES_SQL, []);
    const heard: string[][] = [];
    let fail = true;
    const quiet = db.onCommit((tables) => own.committed(reader, tables, (t) => {
      if (fail) {
        fail = false;
        throw new Error('the tab is gone');
      }
      heard.push([...t].sort());
    }));
    await Promise.all([db.run("INSERT INTO notes (id, body) VALUES (1, 'one')"), db.run("INSERT INTO tags (name) VALUES ('late')")]);
    for (let i = 0; i < 10 && heard.length < 1; i++) await db.query('SELECT 1');
    quiet();
    expect(heard).toEqual([['tags']]);
  });

  it('a hub over a source that watches its queries delivers the rows handed over, and runs the others itself', async () => {
    const listeners = new Set<Parameters<LiveSource['onTablesChanged']>[0]>();
    // A tab's view of the worker: every read it asks for is counted (reads), the worker's own are not.
    const worker = new LivePrefetch();
    db.onCommit((tables) => worker.committed(db, tables, (t, prefetched) => {
      for (const listener of listeners) listener(t, prefetched);
    }));
    const hub = new LiveQueries({
      query: (sql, params) => reader.query(sql, params),
      tablesRead: (sql) => reader.tablesRead(sql),
      onTablesChanged: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      // Only the notes query is watched: the tags query stands for one the worker could not read.
      watchQuery: (id, sql, params) => sql === NOTES_SQL && worker.watch(id, sql, params),
      unwatchQuery: (id) => worker.unwatch(id),
    });
    const notes: LiveQueryResult<SqlRow>[] = [];
    const tags: LiveQueryResult<SqlRow>[] = [];
    const notesQuery = hub.liveQuery(NOTES_SQL, [], (r) => notes.push(r));
    hub.liveQuery(TAGS_SQL, [], (r) => tags.push(r));
    await db.run("INSERT INTO notes (id, body) VALUES (1, 'one')");
    await db.run("INSERT INTO tags (name) VALUES ('red')");
    for (let i = 0; i < 20 && (notes.at(-1)?.rows.length !== 1 || tags.at(-1)?.rows.length !== 1); i++) await db.query('SELECT 1');
    expect(notes.at(-1)?.rows).toEqual([{ id: 1, body: 'one' }]);
    expect(tags.at(-1)?.rows).toEqual([{ name: 'red' }]);
    // The notes query was asked for once (its first run); the tags query again after its write.
    expect(reads.get(NOTES_SQL)).toBe(1);
    expect(reads.get(TAGS_SQL)).toBe(2);
    const first = notes.at(-1)?.rows[0];
    await db.run("INSERT INTO notes (id, body) VALUES (2, 'two')");
    for (let i = 0; i < 20 && notes.at(-1)?.rows.length !== 2; i++) await db.query('SELECT 1');
    // Unchanged rows keep their objects, as after a run of its own.
    expect(notes.at(-1)?.rows[0]).toBe(first);
    expect(reads.get(NOTES_SQL)).toBe(1);
    notesQuery.close();
    hub.closeAll();
  });

  it('leaves out a query that fails, and hands over the tables a query reads after a schema change', async () => {
    prefetch.watch(1, 'SELECT v FROM later', []);
    prefetch.watch(2, 'SELECT * FROM shown', []);
    await db.exec('CREATE VIEW shown AS SELECT name FROM tags');
    await settled(1);
    // `later` does not exist: only the view's rows come, with what it reads.
    expect(announced[0]?.prefetched).toEqual([{ id: 2, rows: [], reads: expect.arrayContaining(['shown', 'tags']) }]);
    await db.exec('CREATE TABLE later (v); INSERT INTO later (v) VALUES (7)');
    await db.exec('DROP VIEW shown; CREATE VIEW shown AS SELECT body AS name FROM notes');
    await db.run("INSERT INTO notes (id, body) VALUES (5, 'five')");
    await settled(5);
    const prefetched = announced.flatMap((a) => a.prefetched);
    expect(prefetched.filter((p) => p.id === 1).at(-1)).toEqual({ id: 1, rows: [{ v: 7 }], reads: ['later'] });
    // Redefined, the view reads notes now, and its rows follow notes.
    expect(prefetched.filter((p) => p.id === 2).at(-1)).toEqual({ id: 2, rows: [{ name: 'five' }] });
    expect(prefetched.filter((p) => p.id === 2 && p.reads).at(-1)?.reads).toEqual(expect.arrayContaining(['shown', 'notes']));
  });
});
