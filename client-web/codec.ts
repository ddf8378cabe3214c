/**
 * Converts values between the application's SQLite columns and the wire (protocol §4.2),
 * driven by the server's column types (capabilities) and the local column's declared affinity:
 * bytea ↔ BLOB as base64, uuid ↔ TEXT or 16-byte BLOB as dashed lowercase text, boolean ↔ 0/1,
 * json ↔ TEXT, bigint/numeric ↔ exact decimal strings, the rest as they are.
 *
 * What SQLite cannot hold natively is stored as TEXT in its wire form (protocol §4.2): arrays as
 * the JSON text of the wire's JSON array, `NaN` as the text `NaN` (SQLite turns a NaN REAL into
 * NULL), infinite and BC timestamps as the wire's strings. Infinite floats are REALs (SQLite holds
 * them) and travel as `"Infinity"`/`"-Infinity"`.
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
  /** NOT NULL locally while the server allows null (see local-schema.ts). */
  readonly localNotNull?: boolean;
}

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

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
  throw new ClientError(ClientErrorCode.invalidLocalRow, `column ${column.name} (${column.category}): ${why}, got ${shown?.slice(0, 80)}`);
}

/** A local array column's text → the wire's JSON array. */
function arrayToWire(column: ColumnCodec, value: SqlValue): unknown {
  if (typeof value !== 'string') return bad(column, value, 'expected a JSON array as TEXT');
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return bad(column, value, 'expected a JSON array as TEXT');
  }
  return Array.isArray(parsed) ? parsed : bad(column, value, 'expected a JSON array as TEXT');
}

/** An opaque column's local value → the wire: JSON text of an array or object goes back as that JSON. */
function opaqueToWire(value: SqlValue): unknown {
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

/** A local SQLite value → its wire value. */
export function toWire(column: ColumnCodec, value: SqlValue): unknown {
  if (value === null) return null;
  if (column.shape === 'array') return arrayToWire(column, value);
  if (column.shape === 'opaque') return opaqueToWire(value);
  switch (column.category) {
    case 'bytea':
      if (value instanceof Uint8Array) return bytesToBase64(value);
      if (typeof value === 'string') return bytesToBase64(new TextEncoder().encode(value));
      return bad(column, value, 'expected a BLOB');
    case 'uuid': {
      const text = value instanceof Uint8Array && value.length === 16 ? uuidBytesToText(value) : typeof value === 'string' ? value.toLowerCase() : null;
      if (text === null || !UUID_TEXT.test(text)) return bad(column, value, 'expected a UUID (dashed text or a 16-byte BLOB)');
      return text;
    }
    case 'decimal':
      if (typeof value === 'bigint') return value.toString();
      if (typeof value === 'number') {
        if (!Number.isFinite(value)) return nonFiniteToWire(value);
        return Number.isInteger(value) && !Number.isSafeInteger(value) ? BigInt(value).toString() : String(value);
      }
      if (typeof value === 'string') return value;
      return bad(column, value, 'expected a number or decimal text');
    case 'boolean':
      if (typeof value === 'number' || typeof value === 'bigint') return value !== 0 && value !== 0n;
      if (value === 'true' || value === 'false') return value === 'true';
      return bad(column, value, 'expected 0 or 1');
    case 'json':
      if (typeof value !== 'string') return bad(column, value, 'expected JSON text');
      try {
        return JSON.parse(value);
      } catch {
        return bad(column, value, 'expected valid JSON text');
      }
    case 'float':
      if (typeof value === 'number') return Number.isFinite(value) ? value : nonFiniteToWire(value);
      if (typeof value === 'string' && SPECIAL_NUMBERS.has(value)) return value;
      if (typeof value === 'bigint') return Number(value);
      if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
      return bad(column, value, 'expected a number');
    case 'integer':
      if (typeof value === 'number' && Number.isFinite(value)) return value;
      if (typeof value === 'bigint') return Number(value);
      if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
      return bad(column, value, 'expected a number');
    case 'text':
    case 'timestamptz':
      if (typeof value === 'string') return value;
      if (typeof value === 'number' || typeof value === 'bigint') return String(value);
      return bad(column, value, 'expected text');
    case 'other':
      if (value instanceof Uint8Array) return bytesToBase64(value);
      return typeof value === 'bigint' ? value.toString() : value;
  }
}

/**
 * The wire text of a local sync key. Unlike other values it is never repaired: a key the wire
 * would change (upper-case UUID text, text in a BLOB key) would come back from the server as a
 * second row, so it is refused (the key guard triggers refuse such writes; this catches rows
 * written before they existed).
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
  if (column.shape === 'array') {
    if (!Array.isArray(value)) throw new ClientError(ClientErrorCode.protocolViolation, `column ${column.name} is an array, but the server sent ${JSON.stringify(value).slice(0, 60)}`);
    return JSON.stringify(value);
  }
  if (column.shape === 'opaque') return typeof value === 'string' || typeof value === 'number' ? value : JSON.stringify(value);
  switch (column.category) {
    case 'bytea':
      return base64ToBytes(String(value));
    case 'uuid':
      return column.affinity === 'BLOB' && !column.untyped ? uuidTextToBytes(String(value)) : String(value);
    case 'decimal': {
      const text = String(value);
      if (column.affinity === 'INTEGER' && /^-?\d+$/.test(text)) {
        const big = BigInt(text);
        return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
      }
      // A REAL column holds finite values and infinities; NaN stays text (SQLite would store NULL).
      if (column.affinity === 'REAL') return SPECIAL_NUMBERS.has(text) ? floatFromWire(text) : Number(text);
      return text;
    }
    case 'boolean':
      return value === true ? 1 : 0;
    case 'json':
      return JSON.stringify(value);
    case 'float':
      return floatFromWire(value);
    case 'integer':
      return typeof value === 'number' ? value : Number(value);
    case 'text':
    case 'timestamptz':
      return typeof value === 'string' ? value : JSON.stringify(value);
    case 'other':
      return typeof value === 'string' || typeof value === 'number' ? value : JSON.stringify(value);
  }
}
