/**
 * Every answer fits `max_response_bytes` as Lambda counts it (issue 25 item 1), not only the
 * pages PostgreSQL budgets row by row. Lambda refuses a function result over 6 MB and API Gateway
 * then answers its own 500, which a client retries forever: one conflicting row of 1.1 M CJK
 * characters made a 409 of 6.6 MB (its server row twice, in `conflict` and `conflicts[0]`, each
 * character three bytes).
 *
 * An answer over the budget is cut, in this order, until it fits:
 * 1. the lists the protocol lets be partial keep the longest prefix that fits (at least one
 *    entry), and their count field says how many there are: `conflicts` (`conflict_count`; the
 *    client resolves those and commits again, and the next answer lists the rest), `details`
 *    (`detail_count`), `sources` (`source_count`);
 * 2. row values are left out, largest first, each marked beside it: `server_row: null` with
 *    `server_row_omitted: true` (the client reads the row from the committed bundle
 *    `server_row_version`), `payload: null` with `payload_omitted: true`; the copy of the first
 *    conflict in `conflict` goes before the one in `conflicts`;
 * 3. long texts (messages, details) are shortened, marked `<field>_truncated: true`.
 * What has nothing left to cut (capabilities under a test's tiny limit) goes as it is while Lambda
 * can still carry it (`hardBytes`), and as a marked stub beyond. Pages rendered by PostgreSQL
 * (`RawJson`) are budgeted where they are built and pass as they are.
 */
import { jsonStringBytes } from '../../core/protocol/wire-bytes.js';
import { isRawJson } from '../../core/sync/context.js';

/** Lists an answer may carry in part, each with the field that counts all of its entries. */
const PARTIAL_LISTS: ReadonlyArray<readonly [list: string, count: string]> = [
  ['conflicts', 'conflict_count'],
  ['details', 'detail_count'],
  ['sources', 'source_count'],
];

/** Fields holding a row's values, which may be left out and marked `<field>_omitted`. */
const ROW_FIELDS = new Set(['server_row', 'payload']);

/** A text shorter than this is never shortened: it costs less than its marker is worth. */
const TEXT_KEEP_CHARS = 200;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Bytes of `value`'s JSON once escaped as a JSON string, without the two quotes around it. */
export function escapedBytes(value: unknown): number {
  return jsonStringBytes(JSON.stringify(value) ?? '') - 2;
}

/** Keeps the longest prefix of `body[list]` that fits, and records the full count. */
function cutList(body: JsonObject, list: string, count: string, budget: number): void {
  const entries = body[list];
  if (!Array.isArray(entries) || entries.length <= 1) return;
  if (typeof body[count] !== 'number') body[count] = entries.length;
  // Escaping works character by character, so the whole is the sum of its parts: the body
  // without the list, each entry, and one comma between two.
  body[list] = [];
  let used = escapedBytes(body);
  let keep = 0;
  for (const entry of entries) {
    const size = escapedBytes(entry) + (keep > 0 ? 1 : 0);
    if (keep > 0 && used + size > budget) break;
    used += size;
    keep++;
  }
  body[list] = entries.slice(0, keep);
}

interface Candidate {
  readonly owner: JsonObject;
  readonly field: string;
  readonly bytes: number;
  /** Lower goes first among equals: the duplicate `conflict` before `conflicts`. */
  readonly rank: number;
}

/** Row values and long texts anywhere in `value`, with their escaped sizes. */
function candidates(value: Json, rank: number, out: Candidate[]): Candidate[] {
  if (Array.isArray(value)) {
    for (const item of value) candidates(item, rank, out);
    return out;
  }
  if (!isObject(value)) return out;
  for (const [field, inner] of Object.entries(value)) {
    if (ROW_FIELDS.has(field) && isObject(inner)) out.push({ owner: value, field, bytes: escapedBytes(inner), rank });
    else if (typeof inner === 'string' && inner.length > TEXT_KEEP_CHARS) out.push({ owner: value, field, bytes: escapedBytes(inner), rank });
    else candidates(inner, field === 'conflict' ? rank - 1 : rank, out);
  }
  return out;
}

/** Leaves out (a row) or shortens (a text) one value; answers the bytes saved. */
function shrink(c: Candidate, over: number): number {
  const value = c.owner[c.field];
  if (typeof value === 'string') {
    // Keep what fits of the text; never less than the short head that tells what it was.
    const keepBytes = Math.max(TEXT_KEEP_CHARS, c.bytes - over - 64);
    let chars = Math.min(value.length, keepBytes);
    while (chars > TEXT_KEEP_CHARS && escapedBytes(value.slice(0, chars)) > keepBytes) chars = Math.floor(chars * 0.9);
    // Never cut a surrogate pair in half.
    if (/[\uD800-\uDBFF]/.test(value.charAt(chars - 1))) chars--;
    const head = `${value.slice(0, chars)}…`;
    c.owner[c.field] = head;
    c.owner[`${c.field}_truncated`] = true;
    return c.bytes - escapedBytes(head);
  }
  c.owner[c.field] = null;
  c.owner[`${c.field}_omitted`] = true;
  return c.bytes;
}

/**
 * `body` cut to `budgetBytes` escaped bytes (what Lambda counts for the result's body), or as it
 * is when it fits. Never changes `body` itself. `hardBytes`: what Lambda itself accepts; an
 * answer still over the budget once nothing is left to cut goes as it is up to that.
 */
export function fitBody(body: unknown, budgetBytes: number, hardBytes = budgetBytes): unknown {
  if (body === undefined || isRawJson(body) || !isObject(body)) return body;
  let size = escapedBytes(body);
  if (size <= budgetBytes) return body;
  const out = structuredClone(body) as JsonObject;
  for (const [list, count] of PARTIAL_LISTS) cutList(out, list, count, budgetBytes);
  size = escapedBytes(out);
  if (size <= budgetBytes) return out;
  const found = candidates(out, 0, []).sort((a, b) => b.bytes - a.bytes || a.rank - b.rank);
  for (const c of found) {
    if (size <= budgetBytes) break;
    size -= shrink(c, size - budgetBytes);
  }
  size = escapedBytes(out);
  if (size <= Math.max(budgetBytes, hardBytes)) return out;
  // Nothing left to cut, and more than Lambda carries: say so, within the budget.
  return {
    ...(typeof out['error'] === 'string' ? { error: out['error'] } : {}),
    message: 'the answer did not fit max_response_bytes and was left out',
    answer_omitted: true,
  };
}
