/**
 * Issue 23 items 3–4 (docs/protocol.md §4.2, §10.1): the local form of every column type is decided in one
 * codec (client-web/codec.ts) and checked at every local write by the capture triggers. For each
 * server type and local affinity, and a corpus of values an app could write: a value the trigger
 * accepts goes to the wire and comes back as the same local value through the codec (so the check
 * and the codec cannot drift apart), and a value it refuses fails the write with
 * `invalid_local_row` naming table, key, column and why. Before the fix nothing was checked at the
 * write: text in an INTEGER column, a PostgreSQL array literal, NUL or a lone surrogate were stored
 * and failed (or were changed) at the next push.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TableSpec } from '../core/protocol/meta.js';
import { fromWire, toWire } from '../client-web/codec.js';
import { ClientError } from '../client-web/errors.js';
import { installState, installTriggers } from '../client-web/install.js';
import { buildLocalModel, type LocalModel, type TableModel } from '../client-web/local-schema.js';
import { applicationDb } from '../client-web/local-writes.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type SqlValue, type SqliteDb } from '../client-web/sqlite/port.js';

/** Column name, server type, local declared type. */
const COLUMNS: readonly (readonly [string, string, string])[] = [
  ['t', 'text', 'TEXT'], ['vc', 'character varying(20)', 'TEXT'], ['j', 'jsonb', 'TEXT'], ['jn', 'json', 'TEXT'], ['arr', 'text[]', 'TEXT'],
  ['b', 'bytea', 'BLOB'], ['u', 'uuid', 'TEXT'], ['ub', 'uuid', 'BLOB'], ['f', 'boolean', 'INTEGER'], ['i', 'integer', 'INTEGER'],
  ['s', 'smallint', 'INTEGER'], ['d', 'double precision', 'REAL'], ['big', 'bigint', 'INTEGER'], ['bt', 'bigint', 'TEXT'],
  ['n', 'numeric', 'TEXT'], ['nr', 'numeric(20,4)', 'REAL'], ['ts', 'timestamp with time zone', 'TEXT'], ['dt', 'date', 'TEXT'],
  ['iv', 'interval', 'TEXT'], ['en', 'mood', 'TEXT'],
];

const UUID = '0f8fad5b-d9cb-469f-a165-70867728950e';
const uuidBytes = Uint8Array.from([15, 143, 173, 91, 217, 203, 70, 159, 161, 101, 112, 134, 119, 40, 149, 14]);

/** Values an app might write, of every storage class and the edge cases of each form. */
const CORPUS: readonly SqlValue[] = [
  0, 1, 2, -1, 1.5, 40_000, 2 ** 40, 9007199254740993n, -9223372036854775808n, Infinity, -Infinity,
  '', 'abc', '12', '007', '-0', '0.1', 'NaN', 'Infinity', '1e400', '1.50', '9223372036854775808',
  '{"a": 1}', '{"n": 12345678901234567890123}', 'null', '"s"', '[1, "b c", null]', '[]', '{a,"b c"}', '{a: 1}',
  'a\u0000b', '\ud83dxyz', '["x\\u0000"]', '"\\ud800"', '{"\\udc00": 1}', '"\\ud83d\\ude00"', '👸 é',
  UUID, UUID.toUpperCase(), uuidBytes, Uint8Array.from([1, 2, 3]), new Uint8Array(0),
  '2024-01-02T03:04:05Z', '-0043-03-15T12:00:00Z', '+10000-01-01', 'infinity', '-infinity', 'now', '1 day', 'happy',
];

/** Values of the corpus the triggers must refuse, by column. */
const MUST_REFUSE: Readonly<Record<string, readonly SqlValue[]>> = {
  t: ['a\u0000b', '\ud83dxyz', uuidBytes],
  j: ['abc', '{a,"b c"}', '{a: 1}', '["x\\u0000"]', '"\\ud800"', '{"\\udc00": 1}', 'a\u0000b', uuidBytes],
  jn: ['abc', '"\\ud800"', '["x\\u0000"]'],
  arr: ['{a,"b c"}', '{"a": 1}', 'abc', '"s"', '["x\\u0000"]'],
  b: ['abc', 1],
  u: [UUID.toUpperCase(), uuidBytes, 'abc'],
  ub: [UUID, Uint8Array.from([1, 2, 3])],
  f: [2, -1, 'abc', 1.5],
  i: ['abc', 1.5, 2 ** 40],
  s: [40_000, 'abc'],
  d: ['abc', 'Infinity', uuidBytes],
  big: ['abc', 1.5, '1e400'],
  bt: ['007', '-0', '1.50', 'abc', '9223372036854775808'],
  n: ['abc', '{"a": 1}', '007'],
  ts: ['now', 'abc', '1 day', '12', 1],
  dt: ['now'],
  iv: ['a\u0000b', '\ud83dxyz'],
  en: ['a\u0000b'],
};

/** What must be accepted, exactly as written (protocol 2). */
const MUST_ACCEPT: Readonly<Record<string, readonly SqlValue[]>> = {
  t: ['', 'abc', '👸 é', '12'],
  j: ['{"n": 12345678901234567890123}', 'null', '"s"', '1e400', '[1, "b c", null]', '"\\ud83d\\ude00"', '-0'],
  jn: ['{"a": 1}', '1e400'],
  arr: ['[1, "b c", null]', '[]'],
  b: [uuidBytes, new Uint8Array(0)],
  u: [UUID],
  ub: [uuidBytes],
  f: [0, 1],
  i: [0, -1, '12'],
  d: [1.5, Infinity, -Infinity, 'NaN', '0.1'],
  big: [9007199254740993n, -9223372036854775808n, 2 ** 40],
  bt: ['12', -1],
  n: ['1.50', '1e400', 'NaN', 'Infinity', '-0', 1, 1.5],
  ts: ['2024-01-02T03:04:05Z', '-0043-03-15T12:00:00Z', 'infinity', '-infinity'],
  dt: ['+10000-01-01', 'infinity'],
  iv: ['1 day'],
  en: ['happy'],
};

const same = (a: unknown, b: unknown): boolean =>
  a instanceof Uint8Array && b instanceof Uint8Array ? a.length === b.length && a.every((x, i) => x === b[i]) : Object.is(a, b) || a === b;

describe('the local form of every column type: checked at the write, read back by the same codec', () => {
  let raw: SqliteDb;
  let db: SqliteDb;
  let model: LocalModel;
  let table: TableModel;

  beforeAll(async () => {
    raw = await openNodeSqlite();
    await raw.exec(`CREATE TABLE forms (id TEXT PRIMARY KEY, ${COLUMNS.map(([name, , local]) => `${name} ${local}`).join(', ')})`);
    const spec: TableSpec = {
      schema: 'app', table: 'forms', sync_key: { column: 'id', kind: 'text' },
      columns: [{ name: 'id', type: 'text', nullable: false }, ...COLUMNS.map(([name, type]) => ({ name, type, nullable: true }))],
    };
    await installState(raw, () => 'src-forms');
    model = await buildLocalModel(raw, [{ schema: 'app', table: 'forms' }], [spec], 2);
    table = model.tables[0] as TableModel;
    await installTriggers(raw, model);
    db = applicationDb(raw, () => undefined);
  });
  afterAll(async () => raw?.close());

  it('every value a trigger accepts goes to the wire and comes back unchanged; every refusal names table, key, column and why', async () => {
    const accepted = new Map<string, SqlValue[]>();
    const refused = new Map<string, SqlValue[]>();
    let n = 0;
    for (const [name] of COLUMNS) {
      const column = table.columns.find((c) => c.name === name);
      expect(column, name).toBeDefined();
      for (const value of CORPUS) {
        const id = `r${n++}`;
        const outcome = await db.run(`INSERT INTO forms (id, ${name}) VALUES (?, ?)`, [id, value]).then(() => null, (e: unknown) => e);
        if (outcome) {
          expect(outcome, `${name} ${String(value)}`).toBeInstanceOf(ClientError);
          expect(outcome).toMatchObject({ code: 'invalid_local_row', details: { table: 'forms', key: id, column: name, reason: expect.any(String) } });
          refused.set(name, [...(refused.get(name) ?? []), value]);
          continue;
        }
        accepted.set(name, [...(accepted.get(name) ?? []), value]);
        const [row] = await raw.query(`SELECT ${name} AS v FROM forms WHERE id = ?`, [id]);
        const stored = row?.['v'] ?? null;
        const wire = toWire(column!, stored);
        const back = fromWire(column!, JSON.parse(JSON.stringify(wire)) as unknown);
        // An array, and a structured value of a type unknown by name, travel as JSON: its text is the server's rendering.
        if (name === 'arr' || (name === 'en' && typeof toWire(column!, stored) === 'object')) expect(JSON.parse(back as string), `${name} ${String(value)}`).toEqual(JSON.parse(stored as string));
        else expect(same(back, stored), `${name}: ${String(value)} stored as ${String(stored)}, back as ${String(back)}`).toBe(true);
      }
    }
    for (const [name, values] of Object.entries(MUST_REFUSE)) {
      for (const value of values) expect(refused.get(name)?.some((v) => same(v, value)), `${name} refuses ${JSON.stringify(String(value))}`).toBe(true);
    }
    for (const [name, values] of Object.entries(MUST_ACCEPT)) {
      for (const value of values) expect(accepted.get(name)?.some((v) => same(v, value)), `${name} accepts ${JSON.stringify(String(value))}`).toBe(true);
    }
  });

  it('json keeps its text to the wire and back (protocol 2): every digit, JSON null apart from SQL NULL', async () => {
    const j = table.columns.find((c) => c.name === 'j')!;
    for (const text of ['{"n": 12345678901234567890123}', '[0.1000000000000000055511151231257827, 1e400, -0]', 'null', '  {"spaced" : true}  ']) {
      expect(toWire(j, text)).toBe(text);
      expect(fromWire(j, text)).toBe(text);
    }
    expect(toWire(j, null)).toBeNull();
    expect(fromWire(j, null)).toBeNull();
    expect(fromWire(j, 'null')).toBe('null');
  });

  it('an UPDATE checks only the columns it changes, and a refused write changes nothing', async () => {
    // A value stored before the triggers existed (written with capture off, as apply does).
    await raw.transaction(async (tx) => {
      await tx.run('UPDATE _sync_control SET applying = 1');
      await tx.run(`INSERT INTO forms (id, i, t) VALUES ('legacy', 'not a number', 'x')`);
      await tx.run('UPDATE _sync_control SET applying = 0');
    });
    await db.run(`UPDATE forms SET t = 'edited' WHERE id = 'legacy'`);
    await expect(db.run(`UPDATE forms SET i = 'still not' WHERE id = 'legacy'`)).rejects.toMatchObject({ code: 'invalid_local_row', details: { column: 'i', key: 'legacy' } });
    await expect(db.run(`UPDATE forms SET t = ? WHERE id = 'legacy'`, ['nul \u0000 inside'])).rejects.toMatchObject({ details: { column: 't', reason: expect.stringMatching(/U\+0000/) } });
    expect(await raw.query(`SELECT t FROM forms WHERE id = 'legacy'`)).toEqual([{ t: 'edited' }]);
    // A multi-row statement is refused whole (ABORT), naming the first row refused.
    await expect(db.run(`INSERT INTO forms (id, i) VALUES ('m1', 1), ('m2', 'two'), ('m3', 3)`)).rejects.toMatchObject({ details: { key: 'm2', column: 'i' } });
    expect(await raw.query(`SELECT count(*) AS n FROM forms WHERE id IN ('m1', 'm2', 'm3')`)).toEqual([{ n: 0 }]);
  });

  it('a key is checked like its column: text PostgreSQL can store', async () => {
    await expect(db.run('INSERT INTO forms (id) VALUES (?)', ['k\u0000'])).rejects.toMatchObject({ details: { column: 'id', reason: expect.stringMatching(/U\+0000/) } });
    await expect(db.run('INSERT INTO forms (id) VALUES (?)', ['\udfffk'])).rejects.toMatchObject({ details: { column: 'id', reason: expect.stringMatching(/surrogate/) } });
    expect(await raw.query('SELECT count(*) AS n FROM forms WHERE id IN (?, ?)', ['k\u0000', '\udfffk'])).toEqual([{ n: 0 }]);
  });

  it("an open keeps triggers that are exactly the model's, and recreates any that differ or are missing", async () => {
    const schemaVersion = async () => Number((await raw.query('PRAGMA schema_version'))[0]?.['schema_version']);
    const triggers = async () => (await raw.query<{ name: string; sql: string }>(
      "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'forms' ORDER BY name"));
    const installed = await triggers();
    expect(installed.map((t) => t.name)).toEqual(['_sync_trg_forms_del', '_sync_trg_forms_ins', '_sync_trg_forms_upd']);
    // The same model again: no DDL at all (the schema's version is unchanged).
    const version = await schemaVersion();
    await installTriggers(raw, model);
    expect(await schemaVersion()).toBe(version);
    // A missing trigger, one of an earlier release, or another body: recreated as the model says.
    await raw.exec('DROP TRIGGER _sync_trg_forms_upd');
    await installTriggers(raw, model);
    expect(await triggers()).toEqual(installed);
    await raw.exec('CREATE TRIGGER _sync_trg_forms_key_ins AFTER INSERT ON forms BEGIN SELECT 1; END');
    await installTriggers(raw, model);
    expect(await triggers()).toEqual(installed);
    await installTriggers(raw, model, { checks: false });
    expect((await triggers()).find((t) => t.name === '_sync_trg_forms_ins')?.sql).not.toContain('json_extract');
    await installTriggers(raw, model);
    expect(await triggers()).toEqual(installed);
    // Kept or recreated, they capture and check.
    await db.run('INSERT INTO forms (id, i) VALUES (?, ?)', ['kept', 1]);
    expect(await raw.query("SELECT state FROM _sync_dirty WHERE tbl = 'forms' AND key = 'kept'")).toEqual([{ state: 0 }]);
    await expect(db.run('INSERT INTO forms (id, i) VALUES (?, ?)', ['refused', 'text'])).rejects.toMatchObject({ code: 'invalid_local_row' });
  });
});
