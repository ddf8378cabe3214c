/**
 * The RFC 8785 text of a bundle's pushed rows, which the request hash is taken over
 * (docs/protocol.md §4.3), and of its committed rows, which the bundle hash is taken over:
 * exactly what `canonicalize` writes, about five times faster for the rows a freeze produces.
 * The client hashes the rows it pushes and the replay it predicts; the edge renders each chunk's
 * pushed rows, which the commit hashes (core/sync/push/push.ts).
 *
 * A pushed row's values are strings, finite numbers, booleans and nulls, and RFC 8785 writes those
 * as `JSON.stringify` does; what it adds is the order of object keys (UTF-16 code units, which is
 * `Array.prototype.sort`'s). So each row is rebuilt with its keys inserted in that order and the
 * whole array serialized once by the engine's own JSON writer, instead of a recursive walk that
 * sorts, checks and joins every object and string (10k rows: 61 → 13 ms). Anything outside that
 * shape goes to the library whole: a nested value (a json column in protocol 1), a key the engine
 * would not keep in insertion order (an array index such as "10", which objects list first and
 * numerically) or `__proto__`, a lone surrogate or a non-finite number (which the library refuses).
 */
import canonicalize from 'canonicalize';
import { type CommittedRow } from './rows.js';

/**
 * A pushed row as the request hash covers it: `payload` null for a DELETE (a row that omits it
 * is hashed with null, as the server stages it).
 */
export interface HashedPushedRow {
  readonly schema: string;
  readonly table: string;
  readonly key: Readonly<Record<string, unknown>>;
  readonly op: string;
  readonly base_row_version: number;
  readonly payload?: Readonly<Record<string, unknown>> | null | undefined;
}

/**
 * Keys an object enumerates before the others, in numeric order, whatever the insertion order;
 * and `__proto__`, which an assignment would not make a key at all.
 */
const UNORDERED_KEY = /^(?:0|[1-9][0-9]*|__proto__)$/;
const LONE_SURROGATE = /\p{Surrogate}/u;

function plain(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
      return !LONE_SURROGATE.test(value);
    case 'number':
      return Number.isFinite(value);
    case 'boolean':
      return true;
    default:
      return value === null;
  }
}

/**
 * The sorted key lists seen by one rendering: per key list (joined), and the last one asked for
 * per kind of object (a row's key, its payload), which the next row of the same table repeats.
 */
interface KeyOrders {
  readonly byList: Map<string, readonly string[] | undefined>;
  readonly last: { keys: readonly string[]; sorted: readonly string[] | undefined }[];
}

const sameKeys = (a: readonly string[], b: readonly string[]): boolean => {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
};

/** `keys` in RFC 8785 order, or undefined when one of them is not in insertion order or not text. */
function sortedKeys(keys: readonly string[], orders: KeyOrders, kind: number): readonly string[] | undefined {
  const last = orders.last[kind];
  if (last && sameKeys(last.keys, keys)) return last.sorted;
  const seen = keys.join('\u0000');
  let sorted = orders.byList.get(seen);
  if (!orders.byList.has(seen)) {
    sorted = keys.some((k) => UNORDERED_KEY.test(k) || LONE_SURROGATE.test(k)) ? undefined : [...keys].sort();
    orders.byList.set(seen, sorted);
  }
  orders.last[kind] = { keys, sorted };
  return sorted;
}

/**
 * `object` with its keys in RFC 8785 order, or undefined when a key or a value is not plain.
 * `kind` tells a row's key object (0) from its payload (1), whose key lists `orders` keeps apart.
 */
function ordered(object: Readonly<Record<string, unknown>>, orders: KeyOrders, kind: number): Record<string, unknown> | undefined {
  const sorted = sortedKeys(Object.keys(object), orders, kind);
  if (sorted === undefined) return undefined;
  const out: Record<string, unknown> = {};
  for (const k of sorted) {
    const value = object[k];
    if (!plain(value)) return undefined;
    out[k] = value;
  }
  return out;
}

/**
 * The RFC 8785 text of `rows`, each rebuilt by `top` (given its index) with its fields in key order
 * around its key and payload in that order; when any part is not plain, the library's text of
 * `whole()` (the rows as the text stands for), whose errors it throws.
 */
function canonicalText<R extends { readonly key: Readonly<Record<string, unknown>>; readonly payload?: Readonly<Record<string, unknown>> | null | undefined }>(
  rows: readonly R[],
  top: (row: R, key: Record<string, unknown>, payload: Record<string, unknown> | null, index: number) => Record<string, unknown> | undefined,
  whole: () => unknown = () => rows,
): string {
  const orders: KeyOrders = { byList: new Map(), last: [] };
  const out: unknown[] = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as R;
    const key = ordered(row.key, orders, 0);
    const payload = row.payload == null ? null : ordered(row.payload, orders, 1);
    const built = key === undefined || payload === undefined ? undefined : top(row, key, payload, i);
    if (built === undefined) return canonicalize(whole()) ?? '[]';
    out[i] = built;
  }
  return JSON.stringify(out);
}

const allPlain = (...values: unknown[]): boolean => values.every(plain);

/** Lowercase hex SHA-256 of `text` as UTF-8: the request and bundle hashes of a canonical text. */
export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * The RFC 8785 text of pushed `rows` (`canonicalize` of the rows, each with exactly the six fields
 * of docs/protocol.md §4.3); throws what the library throws.
 */
export function canonicalRowsText(rows: readonly HashedPushedRow[]): string {
  return canonicalText(
    rows,
    (row, key, payload) =>
      allPlain(row.schema, row.table, row.op, row.base_row_version)
        ? { base_row_version: row.base_row_version, key, op: row.op, payload, schema: row.schema, table: row.table }
        : undefined,
    () => rows.map((row) => ({ base_row_version: row.base_row_version, key: row.key, op: row.op, payload: row.payload ?? null, schema: row.schema, table: row.table })),
  );
}

/**
 * The RFC 8785 text of a bundle's committed `rows` as the bundle hash covers them: each with its
 * `row_ordinal`, its index (docs/protocol.md §4.3).
 */
export function canonicalCommittedText(rows: readonly CommittedRow[]): string {
  return canonicalText(
    rows,
    (row, key, payload, i) =>
      allPlain(row.schema, row.table, row.op, row.row_version)
        ? { key, op: row.op, payload, row_ordinal: i, row_version: row.row_version, schema: row.schema, table: row.table }
        : undefined,
    () => rows.map((row, i) => ({ ...row, row_ordinal: i })),
  );
}
