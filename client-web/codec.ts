/**
 * Converts values between the application's SQLite columns and the wire (docs/protocol.md §4.2), driven
 * by the server's column types (capabilities) and the local column's declared affinity: bytea ↔
 * BLOB as base64, uuid ↔ TEXT or 16-byte BLOB as dashed lowercase text, boolean ↔ 0/1, json ↔
 * TEXT, bigint/numeric ↔ exact decimal strings, the rest as they are.
 */
import { type WireCategory } from '../core/protocol/wire-types.js';
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

/** One column as the codec sees it. */
export interface ColumnCodec {
  readonly name: string;
  readonly category: WireCategory;
  readonly affinity: Affinity;
  /** Declared without a type: SQLite stores whatever it is given. */
  readonly untyped: boolean;
  /** NOT NULL locally while the server allows null (see local-schema.ts). */
  readonly localNotNull?: boolean;
}

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

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
  const hex = text.replaceAll('-', '');
  const bytes = new Uint8Array(16);
  for (let i = 0; i < 16; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

function bad(column: ColumnCodec, value: unknown, why: string): never {
  const shown = value instanceof Uint8Array ? `<${value.length} bytes>` : JSON.stringify(typeof value === 'bigint' ? String(value) : value);
  throw new ClientError(ClientErrorCode.invalidLocalRow, `column ${column.name} (${column.category}): ${why}, got ${shown?.slice(0, 80)}`);
}

/** A local SQLite value → its wire value. */
export function toWire(column: ColumnCodec, value: SqlValue): unknown {
  if (value === null) return null;
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
        if (!Number.isFinite(value)) return bad(column, value, 'expected a finite number');
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
    case 'integer':
    case 'float':
      if (typeof value === 'number') return value;
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

/** A wire value → the local SQLite value for this column. */
export function fromWire(column: ColumnCodec, value: unknown): SqlValue {
  if (value === null || value === undefined) {
    if (column.localNotNull) {
      throw new ClientError(ClientErrorCode.localSchemaMismatch,
        `the server sent null for ${column.name}, which is NOT NULL locally: the server allows null there now; update the app so its local column is nullable`);
    }
    return null;
  }
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
      if (column.affinity === 'REAL') return Number(text);
      return text;
    }
    case 'boolean':
      return value === true ? 1 : 0;
    case 'json':
      return JSON.stringify(value);
    case 'integer':
    case 'float':
      return typeof value === 'number' ? value : Number(value);
    case 'text':
    case 'timestamptz':
      return typeof value === 'string' ? value : JSON.stringify(value);
    case 'other':
      return typeof value === 'string' || typeof value === 'number' ? value : JSON.stringify(value);
  }
}
