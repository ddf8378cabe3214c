/**
 * Validation of pushed rows against the catalog, before anything is staged. Structural errors a
 * client can fix (unknown table or column, bad key, hidden scope column, DELETE with payload, bad
 * base64, a lossy bigint, a json value that is not JSON text in protocol 2) are `invalid_request`
 * with details; values PostgreSQL rejects on apply (types, NOT NULL, constraints) come back from
 * commit as `push_rejected`.
 */
import { SyncError } from '../../errors.js';
import { type ProtocolVersion, type PushedRow } from '../../protocol/index.js';
import { type Catalog, type CatalogTable } from '../catalog/catalog.js';
import { SCOPE_COLUMN } from '../catalog/names.js';
import { type Limits } from '../../limits.js';
import { rowWireBytesMax } from '../context.js';
import { utf8Bytes } from '../../protocol/wire-bytes.js';
import { jsonRenderingGrowth } from './json-size.js';

/** How `push_session_rows.op_code` and `bundle_rows.op_code` store an op. */
export const OP_CODES = { INSERT: 1, UPDATE: 2, DELETE: 3 } as const;

/** The compact row the managed functions stage: table id, key text, op code, base, payload. */
export interface StagedRow {
  readonly t: number;
  readonly k: string;
  readonly o: number;
  readonly b: number;
  readonly p: Record<string, unknown> | null;
}

export interface RowProblem {
  readonly row_ordinal: number;
  readonly path: string;
  readonly message: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Why a JSON value cannot be staged as it is. */
type ValueProblem = 'too_deep' | 'nul' | 'lone_surrogate' | 'non_finite' | 'json_text';

/** ES2024's String.prototype.isWellFormed (Node ≥ 20, every current browser), not yet in the compiled lib. */
type WellFormedString = string & { isWellFormed(): boolean };

/**
 * PostgreSQL text and jsonb hold neither U+0000 nor a lone UTF-16 surrogate (JSON.parse accepts
 * `"\ud800"`, jsonb refuses it: 22P02), so either one in a key, a column name, a value or a key
 * of a json object would fail the staging statement itself: a 500 for the client's own input.
 * isWellFormed is the engine's own check (constant time for a text of one-byte characters, which
 * cannot hold a surrogate), where a regular expression walked every string of every row.
 */
function stringProblem(text: string): ValueProblem | null {
  if (text.includes('\u0000')) return 'nul';
  return (text as WellFormedString).isWellFormed() ? null : 'lone_surrogate';
}

/**
 * The first reason `value` cannot be stored: nesting deeper than `maxDepth` (limits.maxJsonDepth),
 * a NUL or a lone surrogate in any string or object key, or a number beyond the double range
 * (JSON.parse reads `1e400` as ±Infinity, which would reach PostgreSQL as null: a silent loss).
 * Iterative and bounded by the depth limit, so a 10,000-level value costs no stack (the
 * recursive checks it replaces overflowed). `numbers: false` skips the double range: the value
 * was parsed from protocol 2's json text, which PostgreSQL reads itself (jsonb keeps 1e400).
 */
function unstorable(value: unknown, maxDepth: number, numbers = true): ValueProblem | null {
  // Most values are scalars: checked here, without the walk's stack (a chunk holds thousands).
  if (typeof value === 'string') return stringProblem(value);
  if (typeof value === 'number') return numbers && !Number.isFinite(value) ? 'non_finite' : null;
  if (value === null || typeof value !== 'object') return null;
  const pending: Array<readonly [unknown, number]> = [[value, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [v, depth] = next;
    if (typeof v === 'number') {
      if (numbers && !Number.isFinite(v)) return 'non_finite';
      continue;
    }
    if (typeof v === 'string') {
      const problem = stringProblem(v);
      if (problem) return problem;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) return 'too_deep';
    if (Array.isArray(v)) {
      for (const child of v) pending.push([child, depth + 1]);
      continue;
    }
    for (const [k, child] of Object.entries(v)) {
      const problem = stringProblem(k);
      if (problem) return problem;
      pending.push([child, depth + 1]);
    }
  }
  return null;
}

const VALUE_MESSAGES: Record<ValueProblem, (limits: Limits) => string> = {
  too_deep: (limits) => `json values nest at most ${limits.maxJsonDepth} levels deep`,
  nul: () => 'values cannot contain U+0000 (PostgreSQL text and jsonb cannot store it)',
  lone_surrogate: () => 'values cannot contain a lone UTF-16 surrogate (\\ud800-\\udfff without its pair): it is not Unicode text',
  non_finite: () => 'a JSON number beyond the double range (such as 1e400) cannot be stored; send NaN and infinities as the strings "NaN", "Infinity", "-Infinity"',
  json_text: () => 'with Sync-Protocol-Version 2 a json or jsonb value is a JSON string holding valid JSON text (null for SQL NULL)',
};

const NOT_REGISTERED = 'is not a registered table';
const NO_COLUMN = 'has no column';

/**
 * Whether `error` refuses rows for naming a table or column the catalog does not know: the one
 * refusal a newer catalog (bootstrap just added them) can turn into an acceptance.
 */
export function namesUnknownSchema(error: unknown): boolean {
  if (!(error instanceof SyncError) || error.code !== 'invalid_request') return false;
  const details = error.extra['details'];
  return Array.isArray(details) && details.some((p: RowProblem) => p.message.includes(NOT_REGISTERED) || p.message.includes(` ${NO_COLUMN} `));
}

/**
 * The problem of a json value sent in protocol 2's form: a string of valid JSON text whose
 * strings and keys PostgreSQL can hold, nested at most `maxDepth` levels. The text is parsed only
 * to check it; what is staged is the text itself, every digit kept.
 */
function jsonTextProblem(value: unknown, maxDepth: number): ValueProblem | null {
  if (typeof value !== 'string') return 'json_text';
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return 'json_text';
  }
  return unstorable(parsed, maxDepth, false);
}

/** What a chunk's json texts grow by once rendered, counted with its bytes (json-size.ts). */
interface Growth {
  bytes: number;
  /** The first row whose rendering no answer could carry, with its column. */
  tooLarge: { readonly row_ordinal: number; readonly path: string; readonly bytes: number } | null;
}

function addProblem(problems: RowProblem[], row_ordinal: number, path: string, message: string): void {
  problems.push({ row_ordinal, path, message });
}

/** The first key of `object` and its value (a pushed key object holds exactly one: the request schema checks it). */
function firstEntry(object: Readonly<Record<string, unknown>>): readonly [string, unknown] {
  for (const name in object) return [name, object[name]];
  return ['', undefined];
}

/**
 * One row checked, or null with its problems added. Called for every pushed row (10k rows a
 * chunk), so it allocates nothing a valid row does not need: no closure, no entry arrays.
 */
function checkRow(table: CatalogTable | undefined, limits: Limits, protocol: ProtocolVersion, row: PushedRow, ordinal: number, problems: RowProblem[], growth: Growth): StagedRow | null {
  const before = problems.length;
  if (!table) {
    addProblem(problems, ordinal, 'table', `${row.schema}.${row.table} ${NOT_REGISTERED}`);
    return null;
  }
  const [keyColumn, keyValue] = firstEntry(row.key) as [string, string];
  const keyProblem = stringProblem(keyValue);
  if (keyColumn !== table.keyColumn) addProblem(problems, ordinal, `key.${keyColumn}`, `the sync key of ${row.schema}.${row.table} is ${table.keyColumn}`);
  else if (table.keyKind === 'uuid' && !UUID.test(keyValue)) addProblem(problems, ordinal, `key.${keyColumn}`, 'a uuid key must be a canonical lowercase dashed UUID');
  else if (keyProblem === 'nul') addProblem(problems, ordinal, `key.${keyColumn}`, 'a key cannot contain U+0000');
  else if (keyProblem === 'lone_surrogate') addProblem(problems, ordinal, `key.${keyColumn}`, 'a key cannot contain a lone UTF-16 surrogate');
  else if (keyValue.length * 3 > limits.maxKeyBytes && utf8Bytes(keyValue) > limits.maxKeyBytes) addProblem(problems, ordinal, `key.${keyColumn}`, `a key is at most ${limits.maxKeyBytes} bytes of UTF-8`);

  const payload = row.payload ?? null;
  if (row.op === 'DELETE') {
    if (payload !== null) addProblem(problems, ordinal, 'payload', 'a DELETE row carries no payload (send null or omit it)');
  } else if (payload === null) {
    addProblem(problems, ordinal, 'payload', `an ${row.op} row needs a payload object`);
  } else {
    for (const name of Object.keys(payload)) {
      const value = payload[name];
      // A registered column's name is valid text; any other name is checked, then refused.
      const column = name === SCOPE_COLUMN ? undefined : table.columnByName.get(name);
      if (!column) {
        if (stringProblem(name)) addProblem(problems, ordinal, 'payload', 'a column name cannot contain U+0000 or a lone UTF-16 surrogate');
        else if (name === SCOPE_COLUMN) addProblem(problems, ordinal, `payload.${name}`, `${SCOPE_COLUMN} is derived from the authenticated user and must not be sent`);
        else addProblem(problems, ordinal, `payload.${name}`, `${row.schema}.${row.table} ${NO_COLUMN} ${name}`);
        continue;
      }
      if (value === null) continue;
      // First, before any other look into the value: nothing below may recurse into it unbounded.
      const problem = unstorable(value, limits.maxJsonDepth) ?? (protocol === 2 && column.category === 'json' ? jsonTextProblem(value, limits.maxJsonDepth) : null);
      if (problem) {
        addProblem(problems, ordinal, `payload.${name}`, VALUE_MESSAGES[problem](limits));
        continue;
      }
      if (protocol === 2 && column.category === 'json' && typeof value === 'string') {
        const grows = jsonRenderingGrowth(value);
        growth.bytes += grows;
        if (!growth.tooLarge && value.length + grows > rowWireBytesMax(limits)) growth.tooLarge = { row_ordinal: ordinal, path: `payload.${name}`, bytes: value.length + grows };
      }
      if (name === table.keyColumn && value !== keyValue) addProblem(problems, ordinal, `payload.${name}`, 'the payload key differs from the row key');
      else if (column.category === 'bytea' && (typeof value !== 'string' || !BASE64.test(value))) {
        addProblem(problems, ordinal, `payload.${name}`, 'bytea values are standard base64 strings');
      } else if (column.type === 'bigint' && typeof value === 'number' && !Number.isSafeInteger(value)) {
        addProblem(problems, ordinal, `payload.${name}`, 'a bigint beyond ±(2^53−1) must be sent as a decimal string');
      } else if (column.category === 'decimal' && typeof value !== 'string' && typeof value !== 'number') {
        addProblem(problems, ordinal, `payload.${name}`, `${column.type} values are decimal strings`);
      }
    }
  }
  if (problems.length > before) return null;
  return { t: table.tableId, k: keyValue, o: OP_CODES[row.op], b: row.base_row_version, p: payload };
}

/** A validated chunk: the rows to stage, and what its json texts grow by once rendered. */
export interface ValidatedChunk {
  readonly rows: StagedRow[];
  /** Counted with the chunk's request bytes against the bundle's and the user's byte limits. */
  readonly growthBytes: number;
}

/**
 * Validates a chunk sent in `protocol`'s form; throws `invalid_request` with up to
 * `limits.maxProblemsPerAnswer` problems, or `payload_too_large` for a json value whose rendering
 * no answer could carry; otherwise answers the rows to stage.
 */
export function validateRows(catalog: Catalog, limits: Limits, rows: readonly PushedRow[], startOrdinal: number, protocol: ProtocolVersion = 1): ValidatedChunk {
  const problems: RowProblem[] = [];
  const staged: StagedRow[] = [];
  const seen = new Set<string>();
  const growth: Growth = { bytes: 0, tooLarge: null };
  // A chunk's rows are mostly of one table: its lookup (a key string built per call) is kept.
  let table: CatalogTable | undefined;
  let tableSchema: string | undefined;
  let tableName: string | undefined;
  for (let i = 0; i < rows.length && problems.length < limits.maxProblemsPerAnswer; i++) {
    const row = rows[i] as PushedRow;
    if (row.schema !== tableSchema || row.table !== tableName) {
      table = catalog.byName(row.schema, row.table);
      tableSchema = row.schema;
      tableName = row.table;
    }
    const s = checkRow(table, limits, protocol, row, startOrdinal + i, problems, growth);
    if (!s) continue;
    const id = `${s.t}:${s.k}`;
    if (seen.has(id)) problems.push({ row_ordinal: startOrdinal + i, path: 'key', message: 'the key appears twice in this chunk' });
    seen.add(id);
    staged.push(s);
  }
  if (problems.length) {
    const first = problems[0] as RowProblem;
    throw new SyncError('invalid_request', `row ${first.row_ordinal}: ${first.path}: ${first.message}`, { details: problems });
  }
  if (growth.tooLarge) {
    const { row_ordinal, path, bytes } = growth.tooLarge;
    throw new SyncError('payload_too_large', `row ${row_ordinal}: ${path}: PostgreSQL renders this json text in about ${bytes} bytes (its numbers in full digits), more than an answer can carry`, {
      details: [{ row_ordinal, path, message: 'the rendered json value would be larger than max_response_bytes allows' }],
    });
  }
  return { rows: staged, growthBytes: growth.bytes };
}
