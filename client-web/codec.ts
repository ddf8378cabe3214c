/**
 * The local form of every column type, decided in one place (style.md: one codec, checked at the
 * write by the capture trigger, read back by the same codec). For each server column type and
 * local affinity, one entry of the decision table (`localFormOf`, below) says:
 *
 * - what SQLite holds for it (the local form), as SQL conditions that refuse anything else: the
 *   capture triggers (install.ts) check them at every local write and refuse with
 *   `invalid_local_row`, naming table, key, column and why;
 * - how a value in that form goes to the wire (docs/protocol.md §4.2) and comes back.
 *
 * bytea ↔ BLOB as base64, uuid ↔ TEXT or 16-byte BLOB as dashed lowercase text, boolean ↔ 0/1,
 * json ↔ TEXT holding exactly the JSON text (protocol 2 carries that text as a JSON string, so no
 * json value is ever parsed into JavaScript numbers on its way), bigint/numeric ↔ INTEGER or exact
 * decimal text. What SQLite cannot hold natively is TEXT in its wire form: arrays as the JSON text
 * of the wire's JSON array, `NaN` as the text `NaN` (SQLite turns a NaN REAL into NULL), infinite
 * and BC timestamps as the wire's strings. Infinite floats are REALs (SQLite holds them) and
 * travel as `"Infinity"`/`"-Infinity"`. Text never holds U+0000 or a lone surrogate: PostgreSQL
 * text cannot store the first and no Unicode text holds the second.
 *
 * A type the client cannot identify by name (a domain, an enum, an extension type) is *opaque*:
 * its values are kept as the wire carries them (text, a number), and a structured value (a domain
 * over an array, json or a composite type arrives as a JSON array or object) is stored as its JSON
 * text and sent back as that JSON, so the server reads it as it wrote it.
 */
import { wireCategory, type WireCategory } from '../core/protocol/wire-types.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { type SqlValue } from './sqlite/port.js';

/** SQLite column affinity from a declared type (SQLite's own rules, §3.1 of its datatype docs). */
export type Affinity = 'INTEGER' | 'TEXT' | 'BLOB' | 'REAL' | 'NUMERIC';

export function affinityOf(declared: string): Affinity {
  const t = declared.toUpperCase();
  if (t.includes('INT')) return 'INTEGER';
  if (t.includes('CHAR') || t.includes('CLOB') || t.includes('TEXT')) return 'TEXT';
  if (t.includes('BLOB') || t === '') return 'BLOB';
  if (t.includes('REAL') || t.includes('FLOA') || t.includes('DOUB')) return 'REAL';
  return 'NUMERIC';
}

/**
 * How a column's values are shaped on the wire beyond their category: `array` (a PostgreSQL array:
 * a JSON array of its elements' wire form), `opaque` (a type unknown by name, see above), or
 * `scalar` (everything the category describes).
 */
export type ValueShape = 'scalar' | 'array' | 'opaque';

/**
 * Built-in types outside the wire categories whose values PostgreSQL renders as JSON strings
 * (their text form): they are plain text on the client.
 */
const TEXT_RENDERED = /^(date|time|timestamp|interval|inet|cidr|macaddr8?|money|bit|bit varying|tsvector|tsquery|xml|point|line|lseg|box|path|polygon|circle|pg_lsn|int4range|int8range|numrange|tsrange|tstzrange|daterange|int4multirange|int8multirange|nummultirange|tsmultirange|tstzmultirange|datemultirange|oid|name|"char"|citext|ltree)\b/;

/** The wire category and shape of a server column type, as `format_type` spells it. */
export function classify(serverType: string): { readonly category: WireCategory; readonly shape: ValueShape } {
  if (serverType.endsWith('[]')) return { category: 'other', shape: 'array' };
  const category = wireCategory(serverType);
  if (category !== 'other') return { category, shape: 'scalar' };
  return { category, shape: TEXT_RENDERED.test(serverType) ? 'scalar' : 'opaque' };
}

/** One column as the codec sees it. */
export interface ColumnCodec {
  readonly name: string;
  readonly category: WireCategory;
  readonly shape: ValueShape;
  readonly affinity: Affinity;
  /** Declared without a type: SQLite stores whatever it is given. */
  readonly untyped: boolean;
  /** The server's type as `format_type` spells it (capabilities); '' where unknown. */
  readonly serverType: string;
  /**
   * json travels as a JSON string of its text (protocol 2, the server announced it); otherwise as
   * the JSON value itself (protocol 1, a server before protocol 2), which JSON.parse cannot keep
   * exact.
   */
  readonly jsonText: boolean;
  /** NOT NULL locally while the server allows null (see local-schema.ts). */
  readonly localNotNull?: boolean;
}

/** Why a local value is not its column's local form: an SQL condition over it, true to refuse. */
export interface Refusal {
  readonly when: string;
  readonly why: string;
}

/**
 * A column's local form: the checks at the write, and the conversions to and from the wire.
 * `toWire` also reads values older client versions let through before the triggers checked the
 * local form (a numeric string in a REAL column, text in a BLOB column), where one conversion is
 * plain; a new write can no longer store them.
 */
export interface LocalForm {
  /**
   * The conditions, over the SQL expression `v` of a non-null value, that refuse it, in order:
   * each may assume the ones before it were false (the trigger evaluates them as one CASE).
   */
  refusals(v: string): readonly Refusal[];
  /** A non-null value in the local form → its wire value. */
  toWire(value: Exclude<SqlValue, null>): unknown;
  /** A non-null wire value → the local value. */
  fromWire(value: unknown): SqlValue;
}

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HEX = '[0-9a-f]';
/** Canonical UUID text, as the wire carries it: lowercase, dashed (GLOB is case-sensitive). */
const UUID_GLOB = [8, 4, 4, 4, 12].map((n) => HEX.repeat(n)).join('-');

/** Non-finite numbers as the wire spells them (protocol §4.2). */
const SPECIAL_NUMBERS: ReadonlyMap<string, number> = new Map([['NaN', Number.NaN], ['Infinity', Infinity], ['-Infinity', -Infinity]]);

function nonFiniteToWire(value: number): string {
  return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
}

/** A wire float → a local value: NaN stays text (SQLite would store NULL), infinities are REALs. */
function floatFromWire(value: unknown): SqlValue {
  if (typeof value === 'number') return value;
  const text = String(value);
  const special = SPECIAL_NUMBERS.get(text);
  if (special === undefined) return Number(text);
  return Number.isNaN(special) ? text : special;
}

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  // Chunks keep String.fromCharCode's argument list short for large blobs.
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function uuidBytesToText(bytes: Uint8Array): string {
  let hex = '';
  for (const b of bytes) hex += b.toString(16).padStart(2, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function uuidTextToBytes(text: string): Uint8Array {
  if (!UUID_TEXT.test(text.toLowerCase())) throw new ClientError(ClientErrorCode.protocolViolation, `not a UUID: ${JSON.stringify(text).slice(0, 60)}`);
  const hex = text.replaceAll('-', '');
  const bytes = new Uint8Array(16);
  for (let i = 0; i < 16; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

function bad(column: ColumnCodec, value: unknown, why: string): never {
  const shown = value instanceof Uint8Array ? `<${value.length} bytes>` : JSON.stringify(typeof value === 'bigint' ? String(value) : value);
  throw new ClientError(ClientErrorCode.invalidLocalRow, `column ${column.name} (${column.serverType || column.category}): ${why}, got ${shown?.slice(0, 80)}`);
}

// ---------------------------------------------------------------------------------------------
// The checks, as SQL over a value `v`. Kept small: the triggers run them on every local write.

/** Text of a lone surrogate, as SQLite stores it (WTF-8, see sqlite/text-bytes.ts): a GLOB range. */
const LONE_SURROGATE_GLOB = `('*[' || char(55296) || '-' || char(57343) || ']*')`;

/** What no synced text may hold, whatever its type (docs/protocol.md §4.2). */
function unicodeRefusals(v: string): Refusal[] {
  return [
    { when: `instr(CAST(${v} AS BLOB), x'00') > 0`, why: 'contains U+0000, which PostgreSQL cannot store' },
    // A surrogate's three bytes start with ED, which most text has none of: the GLOB runs rarely.
    { when: `instr(CAST(${v} AS BLOB), x'ed') > 0 AND ${v} GLOB ${LONE_SURROGATE_GLOB}`, why: 'contains a lone UTF-16 surrogate, which is not Unicode text' },
  ];
}

/** TEXT only, and only text PostgreSQL can store. */
function textRefusals(v: string, expected = 'TEXT'): Refusal[] {
  return [{ when: `typeof(${v}) <> 'text'`, why: `is not ${expected}` }, ...unicodeRefusals(v)];
}

/**
 * JSON text SQLite's strict parser accepts, holding no escaped U+0000 or lone surrogate (jsonb
 * refuses both). A `\\u0000` spelled with an escaped backslash is refused too: the check reads
 * the text, and such text is rare enough not to pay for a parse of every value.
 */
function jsonRefusals(v: string, array: boolean): Refusal[] {
  const notArray = 'is not the JSON text of an array (a PostgreSQL array literal such as {a,"b c"} is not the local form)';
  return [
    { when: `NOT json_valid(${v})`, why: array ? notArray : 'is not valid JSON text' },
    ...(array ? [{ when: `json_type(${v}) <> 'array'`, why: notArray }] : []),
    { when: `instr(${v}, '\\u0000') > 0`, why: 'escapes U+0000 (\\u0000), which PostgreSQL cannot store' },
    {
      // Only text with an escape pays for the walk; SQLite decodes an escaped lone surrogate as WTF-8.
      when: `instr(${v}, '\\u') > 0 AND EXISTS (SELECT 1 FROM json_tree(${v}) WHERE (type = 'text' AND atom GLOB ${LONE_SURROGATE_GLOB}) OR key GLOB ${LONE_SURROGATE_GLOB})`,
      why: 'escapes a lone UTF-16 surrogate, which is not Unicode text',
    },
  ];
}

/**
 * An ISO 8601 date or time as the wire spells it (protocol §4.2): a four-digit year, an expanded
 * year (±YYYYY-…), or an infinity. PostgreSQL's input would accept more ('now', 'epoch'), but
 * those would come back as another value.
 */
function timeRefusals(v: string): Refusal[] {
  return [
    ...textRefusals(v),
    {
      when: `NOT (${v} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*' OR ${v} GLOB '[+-][0-9][0-9][0-9][0-9]*-[0-9][0-9]-[0-9][0-9]*' OR ${v} IN ('infinity', '-infinity'))`,
      why: 'is not an ISO 8601 date or time (YYYY-MM-DD…, ±YYYYY-MM-DD…, infinity or -infinity)',
    },
  ];
}

const TIMESTAMP = /^(timestamp|date)\b/;

const INTEGER_RANGES: Readonly<Record<string, readonly [string, string]>> = {
  smallint: ['-32768', '32767'],
  integer: ['-2147483648', '2147483647'],
};

// ---------------------------------------------------------------------------------------------
// The decision table.

/** How an opaque or text-rendered column's local value goes to the wire. */
function opaqueToWire(value: Exclude<SqlValue, null>): unknown {
  if (value instanceof Uint8Array) return bytesToBase64(value);
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && !Number.isFinite(value)) return nonFiniteToWire(value);
  if (typeof value === 'string' && (value.startsWith('[') || value.startsWith('{'))) {
    try {
      const parsed: unknown = JSON.parse(value);
      if (typeof parsed === 'object' && parsed !== null) return parsed;
    } catch {
      // Text that only looks like JSON is text.
    }
  }
  return value;
}

type FormBuilder = (column: ColumnCodec) => LocalForm;

const text: FormBuilder = (column) => ({
  refusals: (v) => textRefusals(v),
  toWire: (value) => (typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'bigint' ? String(value) : bad(column, value, 'expected TEXT')),
  fromWire: (value) => (typeof value === 'string' ? value : JSON.stringify(value)),
});

const json: FormBuilder = (column) => ({
  refusals: (v) => [...textRefusals(v, 'TEXT holding JSON'), ...jsonRefusals(v, false)],
  toWire(value) {
    if (typeof value !== 'string') return bad(column, value, 'expected JSON text');
    if (column.jsonText) return value;
    // Protocol 1 (a server before protocol 2) carries the value itself: lossy, but its only form.
    try {
      return JSON.parse(value);
    } catch {
      return bad(column, value, 'expected valid JSON text');
    }
  },
  // Protocol 2 sends the text as a string: stored as it is. A value that is not a string can
  // only be protocol 1's (an answer about a bundle frozen before the upgrade): its JSON text.
  fromWire: (value) => (column.jsonText && typeof value === 'string' ? value : JSON.stringify(value)),
});

const array: FormBuilder = (column) => ({
  refusals: (v) => [...textRefusals(v, 'TEXT holding a JSON array'), ...jsonRefusals(v, true)],
  toWire(value) {
    if (typeof value !== 'string') return bad(column, value, 'expected a JSON array as TEXT');
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      return bad(column, value, 'expected a JSON array as TEXT');
    }
    return Array.isArray(parsed) ? parsed : bad(column, value, 'expected a JSON array as TEXT');
  },
  fromWire(value) {
    if (!Array.isArray(value)) throw new ClientError(ClientErrorCode.protocolViolation, `column ${column.name} is an array, but the server sent ${JSON.stringify(value).slice(0, 60)}`);
    return JSON.stringify(value);
  },
});

const bytea: FormBuilder = (column) => ({
  refusals: (v) => [{ when: `typeof(${v}) <> 'blob'`, why: 'is not a BLOB' }],
  toWire: (value) =>
    value instanceof Uint8Array ? bytesToBase64(value) : typeof value === 'string' ? bytesToBase64(new TextEncoder().encode(value)) : bad(column, value, 'expected a BLOB'),
  fromWire: (value) => base64ToBytes(String(value)),
});

/** A uuid column (not the key) that holds 16 bytes: a typed BLOB column. */
const uuidBlob: FormBuilder = (column) => ({
  refusals: (v) => [{ when: `typeof(${v}) <> 'blob' OR length(${v}) <> 16`, why: 'is not a 16-byte UUID BLOB' }],
  toWire: (value) => (value instanceof Uint8Array && value.length === 16 ? uuidBytesToText(value) : bad(column, value, 'expected a 16-byte UUID BLOB')),
  fromWire: (value) => uuidTextToBytes(String(value)),
});

/** A uuid column (not the key) that holds text: what comes back is the canonical text, so only it is written. */
const uuidText: FormBuilder = (column) => ({
  refusals: (v) => [{ when: `typeof(${v}) <> 'text' OR ${v} NOT GLOB '${UUID_GLOB}'`, why: 'is not a lowercase dashed UUID as TEXT' }],
  toWire(value) {
    const text = value instanceof Uint8Array && value.length === 16 ? uuidBytesToText(value) : typeof value === 'string' ? value.toLowerCase() : null;
    return text !== null && UUID_TEXT.test(text) ? text : bad(column, value, 'expected a lowercase dashed UUID');
  },
  fromWire: (value) => String(value),
});

const boolean: FormBuilder = (column) => ({
  refusals: (v) => [{ when: `typeof(${v}) <> 'integer' OR ${v} NOT IN (0, 1)`, why: 'is not 0 or 1' }],
  toWire(value) {
    if (typeof value === 'number' || typeof value === 'bigint') return value !== 0 && value !== 0n;
    return value === 'true' || value === 'false' ? value === 'true' : bad(column, value, 'expected 0 or 1');
  },
  fromWire: (value) => (value === true ? 1 : 0),
});

const integer: FormBuilder = (column) => {
  const range = INTEGER_RANGES[column.serverType];
  return {
    refusals: (v) => [
      { when: `typeof(${v}) <> 'integer'`, why: 'is not an INTEGER' },
      ...(range ? [{ when: `${v} NOT BETWEEN ${range[0]} AND ${range[1]}`, why: `is out of the range of ${column.serverType}` }] : []),
    ],
    toWire(value) {
      if (typeof value === 'number' && Number.isFinite(value)) return value;
      if (typeof value === 'bigint') return Number(value);
      if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
      return bad(column, value, 'expected an INTEGER');
    },
    fromWire: (value) => (typeof value === 'number' ? value : Number(value)),
  };
};

const float: FormBuilder = (column) => ({
  // SQLite cannot store a NaN REAL (it becomes NULL): NaN is the text 'NaN'.
  refusals: (v) => [{ when: `typeof(${v}) NOT IN ('real', 'integer') AND NOT (typeof(${v}) = 'text' AND ${v} = 'NaN')`, why: "is not a number (a REAL or INTEGER, or the text 'NaN')" }],
  toWire(value) {
    if (typeof value === 'number') return Number.isFinite(value) ? value : nonFiniteToWire(value);
    if (typeof value === 'bigint') return Number(value);
    if (typeof value === 'string' && SPECIAL_NUMBERS.has(value)) return value;
    if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
    return bad(column, value, 'expected a number');
  },
  fromWire: floatFromWire,
});

/** A decimal's local value: INTEGER (bigint beyond ±2^53), REAL, or its decimal text. */
function decimalToWire(column: ColumnCodec, value: Exclude<SqlValue, null>): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return nonFiniteToWire(value);
    return Number.isInteger(value) && !Number.isSafeInteger(value) ? BigInt(value).toString() : String(value);
  }
  if (typeof value === 'string') return value;
  return bad(column, value, 'expected a number or decimal text');
}

/**
 * Where a decimal (bigint, numeric) lives locally: as its exact text in a TEXT column (or one
 * declared without a type), or as a number in a column of numeric affinity, which holds what SQLite
 * can (INTEGER, REAL; NaN as the text 'NaN', since SQLite holds no NaN REAL).
 */
function decimalAsText(column: ColumnCodec): boolean {
  return column.affinity === 'TEXT' || column.untyped;
}

function decimalFromWire(column: ColumnCodec, value: unknown): SqlValue {
  const text = String(value);
  if (decimalAsText(column) || text === 'NaN') return text;
  if (column.affinity !== 'REAL' && /^-?\d+$/.test(text)) {
    const big = BigInt(text);
    if (big >= -(2n ** 63n) && big < 2n ** 63n) return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
  }
  return floatFromWire(text);
}

/** bigint: its canonical decimal text, or an INTEGER (a REAL that holds one exactly, in a REAL column). */
const bigint: FormBuilder = (column) => ({
  refusals: (v) => decimalAsText(column)
    ? [
      { when: `typeof(${v}) <> 'text'`, why: 'is not TEXT holding an integer' },
      { when: `CAST(CAST(${v} AS INTEGER) AS TEXT) IS NOT ${v}`, why: 'is not the canonical decimal text of a 64-bit integer' },
    ]
    : [
      { when: `typeof(${v}) NOT IN ('integer', 'real')`, why: 'is not an integer' },
      { when: `typeof(${v}) = 'real' AND (${v} <> CAST(${v} AS INTEGER) OR abs(${v}) > 9007199254740992)`, why: 'is not an integer a REAL holds exactly' },
    ],
  toWire: (value) => decimalToWire(column, value),
  fromWire: (value) => decimalFromWire(column, value),
});

/**
 * numeric: decimal text (a JSON number's syntax), NaN, Infinity or -Infinity in a TEXT column; a
 * number (or the text NaN) in a column of numeric affinity, where SQLite itself turns numeric text
 * into a number and an infinity is a REAL.
 */
const numeric: FormBuilder = (column) => ({
  refusals: (v) => decimalAsText(column)
    ? [
      { when: `typeof(${v}) <> 'text'`, why: 'is not TEXT holding a decimal' },
      {
        when: `${v} NOT IN ('NaN', 'Infinity', '-Infinity') AND NOT (json_valid(${v}) AND json_type(${v}) IN ('integer', 'real'))`,
        why: 'is not decimal text (digits with an optional sign, fraction and exponent), NaN, Infinity or -Infinity',
      },
    ]
    : [{ when: `typeof(${v}) NOT IN ('integer', 'real') AND NOT (typeof(${v}) = 'text' AND ${v} = 'NaN')`, why: "is not a number (an INTEGER or REAL, or the text 'NaN')" }],
  toWire: (value) => decimalToWire(column, value),
  fromWire: (value) => decimalFromWire(column, value),
});

const time: FormBuilder = (column) => ({
  refusals: (v) => timeRefusals(v),
  toWire: (value) => (typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'bigint' ? String(value) : bad(column, value, 'expected ISO 8601 text')),
  fromWire: (value) => (typeof value === 'string' ? value : JSON.stringify(value)),
});

/** Text-rendered types (interval, inet, …) and types unknown by name: as the wire carries them. */
const other: FormBuilder = (column) => ({
  // Their own syntax is PostgreSQL's to judge; only what no text can carry is refused here, and a
  // BLOB, which would travel as base64 and come back as text.
  refusals: (v) => [
    { when: `typeof(${v}) = 'blob'`, why: 'is a BLOB, which this type does not hold' },
    ...unicodeRefusals(v).map((r) => ({ ...r, when: `typeof(${v}) = 'text' AND ${r.when}` })),
  ],
  toWire: (value) => (column.shape === 'opaque' ? opaqueToWire(value) : value instanceof Uint8Array ? bytesToBase64(value) : typeof value === 'bigint' ? value.toString() : value),
  fromWire: (value) => (typeof value === 'string' || typeof value === 'number' ? value : JSON.stringify(value)),
});

const forms = new WeakMap<ColumnCodec, LocalForm>();

/** The local form of a column: the one entry of the decision table that applies to it (built once per column). */
export function localFormOf(column: ColumnCodec): LocalForm {
  let form = forms.get(column);
  if (!form) forms.set(column, (form = decide(column)));
  return form;
}

function decide(column: ColumnCodec): LocalForm {
  if (column.shape === 'array') return array(column);
  if (column.shape === 'opaque') return other(column);
  switch (column.category) {
    case 'text':
      return text(column);
    case 'json':
      return json(column);
    case 'bytea':
      return bytea(column);
    case 'uuid':
      return column.affinity === 'BLOB' && !column.untyped ? uuidBlob(column) : uuidText(column);
    case 'boolean':
      return boolean(column);
    case 'integer':
      return integer(column);
    case 'float':
      return float(column);
    case 'decimal':
      return column.serverType === 'bigint' ? bigint(column) : numeric(column);
    case 'timestamptz':
      return time(column);
    case 'other':
      return TIMESTAMP.test(column.serverType) ? time(column) : other(column);
  }
}

/**
 * The refusals of a sync key. Unlike other values a key is never converted: a key the wire would
 * change (upper-case UUID text, text in a BLOB key) would come back from the server as a second
 * row. A text key is text PostgreSQL can store.
 */
export function keyRefusals(column: ColumnCodec & { readonly kind: 'uuid' | 'text' }, v: string): readonly Refusal[] {
  if (column.kind === 'text') return textRefusals(v);
  if (column.affinity === 'BLOB') return [{ when: `typeof(${v}) <> 'blob' OR length(${v}) <> 16`, why: 'is not a 16-byte UUID BLOB' }];
  return [{ when: `typeof(${v}) <> 'text' OR ${v} NOT GLOB '${UUID_GLOB}'`, why: 'is not lowercase dashed UUID text' }];
}

/** A local SQLite value → its wire value. */
export function toWire(column: ColumnCodec, value: SqlValue): unknown {
  return value === null ? null : localFormOf(column).toWire(value);
}

/**
 * The wire text of a local sync key (see keyRefusals: the key guard refuses such writes; this
 * catches rows written before it existed).
 */
export function keyToWire(column: ColumnCodec & { readonly kind: 'uuid' | 'text' }, value: SqlValue): string {
  if (column.kind === 'text') {
    if (typeof value === 'string') return value;
    return bad(column, value, 'expected a TEXT key');
  }
  if (column.affinity === 'BLOB') {
    if (value instanceof Uint8Array && value.length === 16) return uuidBytesToText(value);
    return bad(column, value, 'expected a 16-byte UUID BLOB key');
  }
  if (typeof value === 'string' && UUID_TEXT.test(value)) return value;
  return bad(column, value, 'expected a lowercase dashed UUID key');
}

/** A wire value → the local SQLite value for this column. */
export function fromWire(column: ColumnCodec, value: unknown): SqlValue {
  if (value === null || value === undefined) {
    if (column.localNotNull) {
      throw new ClientError(ClientErrorCode.localSchemaMismatch,
        `the server sent null for ${column.name}, which is NOT NULL locally: the server allows null there now; update the app so its local column is nullable`);
    }
    return null;
  }
  return localFormOf(column).fromWire(value);
}
