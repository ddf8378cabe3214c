/**
 * A local row's values as JSON, exactly as SQLite holds them, for a row the client cannot encode
 * for the wire (it is quarantined at freeze, outbox.ts): its wire payload does not exist, so the
 * quarantine keeps what the app wrote and gives it back unchanged (`quarantined()`, a requeue).
 * TEXT and finite REAL/INTEGER values are themselves; what JSON cannot carry is tagged.
 */
import { base64ToBytes, bytesToBase64 } from './codec.js';
import { type SqlValue } from './sqlite/port.js';

/** The one key of a quarantined payload that holds local values instead of wire values. */
export const LOCAL_ROW_KEY = '$local_row';

type Tagged = { readonly $blob: string } | { readonly $bigint: string } | { readonly $real: string };

function encodeValue(value: SqlValue): unknown {
  if (value instanceof Uint8Array) return { $blob: bytesToBase64(value) };
  if (typeof value === 'bigint') return { $bigint: value.toString() };
  if (typeof value === 'number' && !Number.isFinite(value)) return { $real: String(value) };
  return value;
}

function decodeValue(value: unknown): SqlValue {
  if (value === null || typeof value === 'string' || typeof value === 'number') return value;
  const tagged = value as Partial<Record<'$blob' | '$bigint' | '$real', string>>;
  if (typeof tagged.$blob === 'string') return base64ToBytes(tagged.$blob);
  if (typeof tagged.$bigint === 'string') return BigInt(tagged.$bigint);
  if (typeof tagged.$real === 'string') return Number(tagged.$real);
  return JSON.stringify(value as Tagged);
}

/** A payload that carries a local row's values (see LOCAL_ROW_KEY). */
export function localRowPayload(row: Readonly<Record<string, SqlValue>>): Record<string, unknown> {
  return { [LOCAL_ROW_KEY]: Object.fromEntries(Object.entries(row).map(([k, v]) => [k, encodeValue(v)])) };
}

/** The local values of a payload made by localRowPayload, or null for a wire payload. */
export function localRowOf(payload: Readonly<Record<string, unknown>> | null): Record<string, SqlValue> | null {
  const keys = payload ? Object.keys(payload) : [];
  const inner = keys.length === 1 && keys[0] === LOCAL_ROW_KEY ? payload?.[LOCAL_ROW_KEY] : undefined;
  if (typeof inner !== 'object' || inner === null) return null;
  return Object.fromEntries(Object.entries(inner).map(([k, v]) => [k, decodeValue(v)]));
}
