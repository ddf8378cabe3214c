/**
 * The value-fidelity scenario of issue 23 ("Done when"), shared by the Node suite
 * (test/value-fidelity.pg.test.ts, every Node SQLite adapter) and the chromium one
 * (test/value-fidelity.web.test.ts, OPFS in a worker): the schemas, the values device A writes,
 * the writes it must be refused, and one encoding of local rows that keeps every value's kind, so
 * devices are compared exactly wherever they run. No vitest or Node import: the browser bundle
 * runs this module too.
 */
import { type TableConfig } from '../../client-web/api.js';
import { type SqlValue } from '../../client-web/sqlite/port.js';

export const FIDELITY_SERVER_SQL = `
CREATE SCHEMA f;
CREATE TABLE f.vals (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  jb jsonb, js json, t text, n numeric, big bigint, d double precision,
  tz timestamptz, dt date, ts timestamp, b bytea, arr text[], nums numeric[],
  PRIMARY KEY (_sync_scope_id, id)
);
CREATE TABLE f.ukeys (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  note text,
  PRIMARY KEY (_sync_scope_id, id)
);
`;

export const FIDELITY_TABLES_DECL = 'f.vals:id,f.ukeys:id';

export const FIDELITY_LOCAL_SQL = `
CREATE TABLE IF NOT EXISTS vals (id TEXT PRIMARY KEY, jb TEXT, js TEXT, t TEXT, n TEXT, big INTEGER, d REAL,
  tz TEXT, dt TEXT, ts TEXT, b BLOB, arr TEXT, nums TEXT);
CREATE TABLE IF NOT EXISTS ukeys (id TEXT PRIMARY KEY, note TEXT);
`;

export const FIDELITY_TABLES: readonly TableConfig[] = [{ schema: 'f', table: 'vals' }, { schema: 'f', table: 'ukeys' }];

export const VAL_COLUMNS = ['jb', 'js', 't', 'n', 'big', 'd', 'tz', 'dt', 'ts', 'b', 'arr', 'nums'] as const;

/** One megabyte of text: every plane of Unicode a little, and quotes and backslashes that escape. */
function megabyte(): string {
  const unit = 'ascii "quoted" \\ back, é ß 中文 👸🏽 \u2028 tab\t ';
  return unit.repeat(Math.ceil((1 << 20) / unit.length)).slice(0, 1 << 20);
}

/** Device A's rows of `vals`: each value exactly as the app writes it; unnamed columns stay NULL. */
export function fidelityRows(): Record<string, Partial<Record<(typeof VAL_COLUMNS)[number], SqlValue>>> {
  return {
    'big-json': { jb: '{"m": -98765432109876543210, "n": 12345678901234567890123}', js: '{"n":12345678901234567890123,"m":-0.0}' },
    precise: {
      jb: '[0.1000000000000000055511151231257827, 1e400, -0, 1E-7]',
      js: '[0.1000000000000000055511151231257827, 1e400, -0, 1E-7]',
      n: '0.1000000000000000055511151231257827',
    },
    'json-null': { jb: 'null', js: 'null' },
    'sql-null': {},
    nested: { jb: '[[null, [null, []]], {"a": [null, 1]}]', arr: '[["a",null],["b c",null]]', nums: '["1.50",null,"NaN","-Infinity"]' },
    emoji: { t: '👸🏽 emoji ✓ é 中文 \u2028', js: '"👸🏽 \\ud83d\\ude00"' },
    megabyte: { t: megabyte() },
    'numeric-40': { n: '1234567890123456789012345678901234567890', big: 9223372036854775807n },
    'numeric-fraction': { n: '-1234567890123456789.012345678901234567890', big: -9223372036854775808n },
    nan: { d: 'NaN', n: 'NaN' },
    infinity: { d: Infinity, n: 'Infinity' },
    'minus-infinity': { d: -Infinity, n: '-Infinity' },
    bc: { tz: '-0043-03-15T12:00:00.000000Z', dt: '-0043-03-15', ts: '-0043-03-15T12:00:00.5' },
    'five-digit-year': { tz: '+10000-01-01T00:00:00.000000Z', dt: '+10000-01-01', ts: '+10000-06-01T12:00:00' },
    bytes: { b: Uint8Array.from({ length: 256 }, (_, i) => i) },
    empty: { t: '', b: new Uint8Array(0), jb: '""', js: '""', arr: '[]' },
  };
}

export const UKEY = '0f8fad5b-d9cb-469f-a165-70867728950e';

/** Writes device A must be refused at the write, with the column each refusal names. */
export function refusedWrites(): { readonly sql: string; readonly params: SqlValue[]; readonly table: string; readonly column: string }[] {
  return [
    { sql: 'INSERT INTO vals (id, t) VALUES (?, ?)', params: ['nul', 'before\u0000after'], table: 'vals', column: 't' },
    { sql: 'INSERT INTO vals (id, t) VALUES (?, ?)', params: ['lone', '\ud83dxyz'], table: 'vals', column: 't' },
    { sql: 'INSERT INTO vals (id, jb) VALUES (?, ?)', params: ['nul-json', '{"k": "a\\u0000b"}'], table: 'vals', column: 'jb' },
    { sql: 'INSERT INTO vals (id, js) VALUES (?, ?)', params: ['lone-json', '"\\ud800"'], table: 'vals', column: 'js' },
    { sql: 'INSERT INTO vals (id, arr) VALUES (?, ?)', params: ['array-literal', '{a,"b c"}'], table: 'vals', column: 'arr' },
    { sql: 'INSERT INTO vals (id, big) VALUES (?, ?)', params: ['text-in-integer', 'abc'], table: 'vals', column: 'big' },
    { sql: 'INSERT INTO vals (id) VALUES (?)', params: ['key\u0000nul'], table: 'vals', column: 'id' },
    { sql: 'INSERT INTO ukeys (id, note) VALUES (?, ?)', params: [UKEY.toUpperCase(), 'upper-case'], table: 'ukeys', column: 'id' },
  ];
}

/** Writes all of A's rows, the one uuid-keyed row included, through `run`. */
export async function writeFidelityRows(run: (sql: string, params: SqlValue[]) => Promise<unknown>): Promise<void> {
  for (const [id, values] of Object.entries(fidelityRows())) {
    const names = Object.keys(values);
    await run(`INSERT INTO vals (id${names.map((n) => `, ${n}`).join('')}) VALUES (?${names.map(() => ', ?').join('')})`, [id, ...Object.values(values) as SqlValue[]]);
  }
  await run('INSERT INTO ukeys (id, note) VALUES (?, ?)', [UKEY, 'lower-case']);
}

/** A local value with its kind, comparable and cloneable anywhere (a page hands it to Node as JSON). */
export type EncodedValue = null | { readonly text: string } | { readonly number: string } | { readonly bigint: string } | { readonly bytes: string };

export function encodeValue(value: SqlValue): EncodedValue {
  if (value === null) return null;
  if (typeof value === 'string') return { text: value };
  if (typeof value === 'number') return { number: Object.is(value, -0) ? '-0' : String(value) };
  if (typeof value === 'bigint') return { bigint: value.toString() };
  return { bytes: Array.from(value, (b) => b.toString(16).padStart(2, '0')).join('') };
}

export function encodeRows(rows: readonly Record<string, SqlValue>[]): Record<string, EncodedValue>[] {
  return rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, encodeValue(v)])));
}

/** The queries whose answers are compared across devices. */
export const FIDELITY_READS = {
  vals: `SELECT id, ${VAL_COLUMNS.join(', ')} FROM vals ORDER BY id`,
  ukeys: 'SELECT id, note FROM ukeys ORDER BY id',
} as const;
