/**
 * Per-table SQL, generated at bootstrap from the validated declarations and stored in
 * `sync.table_catalog`, so the managed functions run it with EXECUTE … USING and never build SQL
 * from request data. Every bootstrap regenerates it; a difference (a new column, a new build's
 * generator) is written back in the same transaction as the schema change it follows.
 *
 * Wire encodings (docs/protocol.md §4.2) live here, on the server side of the wire: bytea ↔ base64,
 * bigint/numeric → exact decimal strings, uuid → dashed text, timestamptz → RFC 3339 UTC, json
 * and jsonb → a JSON string holding the value's text (protocol 2).
 *
 * One form is stored: captured payloads, staged rows and rendered rows hold json values in
 * protocol 2's form, which keeps every digit and tells JSON null from SQL NULL. Protocol 1 (the
 * value itself) is derived on the way out for the clients that ask for it (sync.json_payload_form,
 * `snapshotV1Sql`), and its bundle hash is computed beside protocol 2's (`hashRowsSql`).
 */
import { quoteIdent as q, quoteLiteral } from '../../db/sql.js';
import { wireCategory, type WireCategory } from '../../protocol/wire-types.js';
import { SCOPE_COLUMN } from './names.js';
import { type KeyKind } from './catalog.js';
import { type CatalogColumn } from './compat.js';

/** A column of a registered table as introspection reports it (core/bootstrap/introspect.ts). */
export interface ColumnInfo {
  readonly name: string;
  readonly type: string;
  readonly notNull: boolean;
  readonly generated: boolean;
  readonly identityAlways: boolean;
  /** The column's DEFAULT (or identity) expression, evaluated for new rows that omit it. */
  readonly defaultExpr: string | null;
}

/** What the generator needs of a registered table. */
export interface TableDeclaration {
  readonly schema: string;
  readonly table: string;
  readonly keyColumn: string;
  readonly columns: readonly ColumnInfo[];
  /** Foreign keys, for the apply order (parents first). */
  readonly foreignKeys: readonly { readonly refSchema: string; readonly refTable: string }[];
}

export { type KeyKind } from './catalog.js';
export { type CatalogColumn } from './compat.js';

export interface CatalogEntry {
  readonly tableId: number;
  readonly schema: string;
  readonly table: string;
  readonly keyColumn: string;
  readonly keyKind: KeyKind;
  readonly applyOrder: number;
  readonly columns: readonly CatalogColumn[];
  readonly captureNewSql: string;
  readonly captureOldSql: string;
  readonly captureKeychangeSql: string;
  readonly upsertSql: string;
  readonly deleteSql: string;
  readonly snapshotSql: string;
  readonly lookupSql: string;
  /**
   * `(o, t, t2)` rows: each committed row of a bundle as RFC 8785 text, in protocol 1's form (`t`,
   * `bundle_hash`) and in protocol 2's (`t2`, `bundle_hash_v2`; NULL when the table has no json
   * column, so both forms are the same text).
   */
  readonly hashRowsSql: string;
  /** `(o, t)` rows: each staged pushed row as RFC 8785 text, to verify `request_hash`. */
  readonly requestRowsSql: string;
  /** `{"schema":…,"table":…,"key":{"<key>":` — rows render by concatenation, not per-row JSON builders. */
  readonly rowJsonPrefix: string;
  /** The json and jsonb columns, whose wire form depends on the protocol; null when there are none. */
  readonly jsonColumns: readonly string[] | null;
  /** `snapshotSql` with json values in protocol 1's form; null when the table has no json column. */
  readonly snapshotV1Sql: string | null;
  /**
   * `snapshotSql` for pages of row arrays (docs/protocol.md §5.6): `payload_text` is the values in
   * `rowArrayHeader`'s column order, comma-separated, without brackets (protocol 2's json form).
   */
  readonly snapshotArraySql: string;
  /** `{"schema":…,"table":…,"columns":[…]}`: how a page of row arrays names the table's values. */
  readonly rowArrayHeader: string;
}

/** Which protocol's form a generated expression renders json values in (docs/protocol.md §4.2, §9). */
export type JsonForm = 1 | 2;

export { wireCategory, type WireCategory } from '../../protocol/wire-types.js';

const TIMESTAMP = /^timestamp(\(\d+\))? without time zone$/;

/**
 * How a type's values need converting between PostgreSQL and the wire beyond what to_jsonb and
 * jsonb_populate_record do (protocol §4.2): bytea as base64, time values outside RFC 3339's years
 * as expanded years, and arrays of those element by element.
 */
type TimeKind = 'timestamptz' | 'timestamp' | 'date';
function timeKind(type: string): TimeKind | null {
  if (wireCategory(type) === 'timestamptz') return 'timestamptz';
  if (TIMESTAMP.test(type)) return 'timestamp';
  return type === 'date' ? 'date' : null;
}

/** A value of `type` as the jsonb_build_object argument that renders its wire form. */
function scalarValueExpr(c: string, type: string): string {
  if (type.endsWith('[]')) {
    const element = type.slice(0, -2);
    const time = timeKind(element);
    if (time) return `sync.wire_${time}_array(${c})`;
    if (element === 'bytea') return `sync.wire_bytea_array(${c})`;
    // bigint and numeric elements travel as exact decimal strings, like the scalars.
    if (wireCategory(element) === 'decimal') return `to_jsonb(${c}::text[])`;
    return c;
  }
  switch (timeKind(type)) {
    case 'timestamptz':
      return `sync.rfc3339(${c})`;
    case 'timestamp':
      return `sync.wire_timestamp(${c})`;
    case 'date':
      return `sync.wire_date(${c})`;
    default:
      break;
  }
  switch (wireCategory(type)) {
    case 'bytea':
      // encode() wraps base64 at 76 characters; the wire wants one standard base64 string.
      return `translate(encode(${c}, 'base64'), E'\\n', '')`;
    case 'decimal':
    case 'uuid':
      return `${c}::text`;
    case 'json':
      // Protocol 2: the value's text in a JSON string. A json column's text is kept as written
      // (its own ::text); a jsonb column's is PostgreSQL's rendering.
      return `to_jsonb(${c}::text)`;
    default:
      return c;
  }
}

function valueExpr(alias: string, column: ColumnInfo): string {
  return scalarValueExpr(`${alias}.${q(column.name)}`, column.type);
}

/**
 * The jsonb_populate_record input fix of one pushed value, or null when the type reads its wire
 * form as is: `when` holds for a value that needs it, `value` is its rewrite.
 */
function inputFixExpr(column: ColumnInfo): { readonly when: string; readonly value: string } | null {
  const v = `p.payload->${quoteLiteral(column.name)}`;
  const t = `p.payload->>${quoteLiteral(column.name)}`;
  if (column.type.endsWith('[]')) {
    const element = column.type.slice(0, -2);
    const kind = element === 'bytea' ? 'bytea' : timeKind(element) ? 'time' : null;
    return kind ? { when: `jsonb_typeof(${v}) = 'array'`, value: `sync.wire_array_in(${v}, '${kind}')` } : null;
  }
  if (wireCategory(column.type) === 'bytea') {
    return { when: `jsonb_typeof(${v}) = 'string'`, value: `to_jsonb('\\x' || encode(decode(${t}, 'base64'), 'hex'))` };
  }
  // Only expanded and zero years need rewriting; the common value is one anchored regex test.
  if (timeKind(column.type)) return { when: `${t} ~ '^([+-][0-9]|0000-)'`, value: `to_jsonb(sync.wire_time_in(${t}))` };
  return null;
}

/**
 * JSON text of a value of `type` ('null' for NULL), built by concatenation: snapshot rows are
 * rendered straight from the table this way, at less than half the cost of building a jsonb
 * object and printing it. Same wire forms as `scalarValueExpr`; values whose text needs no
 * escaping (uuid, decimal, RFC 3339, base64) are quoted as they are.
 */
function jsonTextExpr(c: string, type: string, form: JsonForm): string {
  let text: string;
  if (type.endsWith('[]') || timeKind(type) === 'timestamp' || timeKind(type) === 'date') text = `to_jsonb(${scalarValueExpr(c, type)})::text`;
  else {
    switch (wireCategory(type)) {
      case 'text':
      case 'float':
        // float: "NaN"/"Infinity" as strings, finite values in float8out's shortest form (1e+308).
        text = `to_json(${c})::text`;
        break;
      case 'integer':
        text = `${c}::text`;
        break;
      case 'boolean':
        text = `CASE ${c} WHEN true THEN 'true' WHEN false THEN 'false' END`;
        break;
      case 'json':
        // Protocol 2: the text in a JSON string, as scalarValueExpr renders it. Protocol 1: jsonb's
        // rendering of the value (one line, no raw control characters), as the payloads had it.
        text = form === 2 ? `to_json(${c}::text)::text` : `${c}::jsonb::text`;
        break;
      case 'bytea':
      case 'decimal':
      case 'uuid':
      case 'timestamptz':
        text = `'"' || ${scalarValueExpr(c, type)} || '"'`;
        break;
      default:
        text = `to_jsonb(${c})::text`;
    }
  }
  return `coalesce(${text}, 'null')`;
}

/** A payload object as JSON text (see jsonTextExpr); '+' joins keep each expression flat. */
function payloadTextExpr(alias: string, columns: readonly ColumnInfo[], form: JsonForm): string {
  if (columns.length === 0) return `'{}'`;
  return columns
    .map((col, i) => `${quoteLiteral(`${i === 0 ? '{' : ','}${JSON.stringify(col.name)}:`)} || ${jsonTextExpr(`${alias}.${q(col.name)}`, col.type, form)}`)
    .join(' || ') + ` || '}'`;
}

/** The values of payloadTextExpr alone, comma-separated: one row array's tail (visible columns are never empty). */
function valuesTextExpr(alias: string, columns: readonly ColumnInfo[]): string {
  return columns.map((col) => jsonTextExpr(`${alias}.${q(col.name)}`, col.type, 2)).join(` || ',' || `);
}

/** jsonb_build_object takes at most 100 arguments, so wide rows are built in slices. */
function payloadExpr(alias: string, columns: readonly ColumnInfo[]): string {
  const slices: string[] = [];
  for (let i = 0; i < columns.length; i += 50) {
    const pairs = columns.slice(i, i + 50).map((c) => `${quoteLiteral(c.name)}, ${valueExpr(alias, c)}`);
    slices.push(`jsonb_build_object(${pairs.join(', ')})`);
  }
  return slices.length ? slices.join(' || ') : `'{}'::jsonb`;
}

function keyBytesExpr(kind: KeyKind, expr: string): string {
  return kind === 'uuid' ? `uuid_send(${expr})` : `convert_to(${expr}, 'UTF8')`;
}

function keyFromBytesExpr(kind: KeyKind, expr: string): string {
  return kind === 'uuid' ? `encode(${expr}, 'hex')::uuid` : `convert_from(${expr}, 'UTF8')`;
}

/**
 * The value the upsert writes into a column: the populated record's, except json columns, which
 * take the staged text itself (protocol 2's string; SQL NULL for null), cast to the column's type.
 * jsonb_populate_record would store the string as a JSON string, and through jsonb a json
 * column's text would lose its spelling; a column the payload leaves out keeps the record's value
 * (the existing row's, or the default).
 */
function upsertValueExpr(column: ColumnInfo): string {
  const name = quoteLiteral(column.name);
  if (wireCategory(column.type) !== 'json') return `(x.r).${q(column.name)}`;
  return `CASE WHEN x.pl ? ${name} THEN (x.pl ->> ${name})::${column.type} ELSE (x.r).${q(column.name)} END`;
}

/** The json form of a staged push session's rows: the form its client sent (sync.push_create). */
const SESSION_FORM = '(SELECT s.json_form FROM sync.push_sessions s WHERE s.user_id = $2 AND s.push_id = $1)';

/**
 * Payload → record input: wire forms PostgreSQL's input cannot read (base64, expanded years)
 * rewritten first, and the key column added when the payload leaves it out (or holds null). A
 * row that needs neither (the common one: time values in RFC 3339's years, the key in the
 * payload, where validation made it equal the row's key) is concatenated only with empty
 * objects, which jsonb's `||` answers without a copy; building the fixes' and the key's objects
 * for every row, and copying the payload to add a key it already held, cost ~3 µs a row.
 */
function inputPayloadExpr(kind: KeyKind, keyColumn: string, columns: readonly ColumnInfo[]): string {
  const fixes = columns.flatMap((c) => {
    const fix = inputFixExpr(c);
    return fix ? [{ name: c.name, ...fix }] : [];
  });
  const slices: string[] = [];
  // jsonb_build_object takes at most 100 arguments: fixes go in objects of 50 columns.
  for (let i = 0; i < fixes.length; i += 50) {
    const slice = fixes.slice(i, i + 50);
    const object = `jsonb_strip_nulls(jsonb_build_object(${slice.map((f) => `${quoteLiteral(f.name)}, CASE WHEN ${f.when} THEN ${f.value} END`).join(', ')}))`;
    slices.push(` || CASE WHEN ${slice.map((f) => `coalesce(${f.when}, false)`).join(' OR ')} THEN ${object} ELSE '{}'::jsonb END`);
  }
  const key = quoteLiteral(keyColumn);
  return `coalesce(p.payload, '{}'::jsonb)${slices.join('')} || ` +
    `CASE WHEN p.payload->>${key} IS NOT NULL THEN '{}'::jsonb ELSE jsonb_build_object(${key}, ${keyFromBytesExpr(kind, 'p.key_bytes')}) END`;
}

/** Canonical text of any jsonb value `v`: strings, booleans and small integers inline, the rest via sync.jcs. */
function canonicalValueExpr(v: string): string {
  return (
    `CASE jsonb_typeof(${v}) WHEN 'object' THEN sync.jcs(${v}) WHEN 'array' THEN sync.jcs(${v}) ` +
    `WHEN 'number' THEN CASE WHEN (${v})::text ~ '^-?[0-9]{1,15}$' THEN (${v})::text ELSE sync.jcs_number((${v})::numeric) END ` +
    `ELSE (${v})::text END`
  );
}

/**
 * `canonicalValueExpr` for a value whose JSON text `text` is already at hand (`v` is the jsonb
 * value itself): dispatched on the text's first character, the text read once per value instead
 * of a type test and a second extraction (a 10k-row request hash: ~72 → ~58 ms).
 */
function canonicalFromTextExpr(v: string, text: string): string {
  return (
    `CASE left(${text}, 1) WHEN '"' THEN ${text} WHEN 't' THEN ${text} WHEN 'f' THEN ${text} WHEN 'n' THEN ${text} ` +
    `WHEN '{' THEN sync.jcs(${v}) WHEN '[' THEN sync.jcs(${v}) ` +
    `ELSE CASE WHEN ${text} ~ '^-?[0-9]{1,15}$' THEN ${text} ELSE sync.jcs_number((${text})::numeric) END END`
  );
}

/**
 * Categories whose committed payload values are always JSON strings, booleans, small integers or
 * null (json too: stored payloads hold protocol 2's string).
 */
const INLINE_CANONICAL = new Set<WireCategory>(['bytea', 'decimal', 'uuid', 'timestamptz', 'text', 'boolean', 'integer', 'json']);

/**
 * The canonical text of a json column's stored value (protocol 2's string) in `form`: the string
 * itself, or for protocol 1 the value it holds (sync.json_v1). `form` may be an SQL expression
 * (a session's form, known only when the statement runs).
 */
function canonicalJsonExpr(v: string, form: JsonForm | string): string {
  const v1 = canonicalValueExpr(`sync.json_v1(${v})`);
  if (form === 2) return `(${v})::text`;
  if (form === 1) return v1;
  return `CASE WHEN ${form} = 2 THEN (${v})::text ELSE ${v1} END`;
}

/**
 * RFC 8785 text of a payload object `p` whose keys are a subset of `columns`. The keys are sorted
 * here, in UTF-16 code units as RFC 8785 requires (JavaScript's string order), so PostgreSQL only
 * concatenates. `known` marks payloads built by the capture triggers, whose value types follow
 * the column types, so most values need no inspection at all. Json columns hold protocol 2's
 * string (captured, or staged: push_chunk stores protocol 1's values so); `form` says which
 * protocol's form is hashed.
 */
export function canonicalPayloadExpr(p: string, columns: readonly ColumnInfo[], known: boolean, form: JsonForm | string,
  texts?: ReadonlyMap<string, string>): string {
  const sorted = [...columns].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const parts = sorted.map((c) => {
    const v = `${p}->${quoteLiteral(c.name)}`;
    const name = quoteLiteral(`${JSON.stringify(c.name)}:`);
    const category = wireCategory(c.type);
    // A value's text read beforehand (`texts`) is NULL exactly when the key is absent.
    const text = category === 'json' || known ? undefined : texts?.get(c.name);
    if (text !== undefined) return `CASE WHEN ${text} IS NOT NULL THEN ${name} || ${canonicalFromTextExpr(v, text)} END`;
    const value = category === 'json' ? canonicalJsonExpr(v, form) : known && INLINE_CANONICAL.has(category) ? `(${v})::text` : canonicalValueExpr(v);
    return `CASE WHEN ${p} ? ${quoteLiteral(c.name)} THEN ${name} || ${value} END`;
  });
  const groups: string[] = [];
  for (let i = 0; i < parts.length; i += 90) groups.push(`nullif(concat_ws(',', ${parts.slice(i, i + 90).join(', ')}), '')`);
  const body = groups.length === 1 ? groups[0] : `concat_ws(',', ${groups.join(', ')})`;
  return `CASE WHEN ${p} IS NULL OR jsonb_typeof(${p}) = 'null' THEN 'null' ELSE '{' || coalesce(${body}, '') || '}' END`;
}

function keyTextExpr(kind: KeyKind, bytes: string): string {
  return kind === 'uuid' ? `encode(${bytes}, 'hex')::uuid::text` : `convert_from(${bytes}, 'UTF8')`;
}

const OP_NAME = (code: string): string => `CASE ${code} WHEN 1 THEN 'INSERT' WHEN 2 THEN 'UPDATE' ELSE 'DELETE' END`;

/**
 * RFC 8785 text of a committed row `{key, op, payload, row_ordinal, row_version, schema, table}`
 * (keys already in canonical order), split around the ordinal: `head || ordinal || tail`.
 * Shared by commit (ordinal known) and adoption (ordinal numbered afterwards).
 */
export function canonicalCommittedRowParts(info: { schema: string; table: string }, keyColumn: string, kind: KeyKind, visible: readonly ColumnInfo[],
  alias: { keyBytes: string; opCode: string; payload: string; version: string }, form: JsonForm = 1): { head: string; tail: string } {
  return {
    head:
      `${quoteLiteral(`{"key":{${JSON.stringify(keyColumn)}:`)} || to_json(${keyTextExpr(kind, alias.keyBytes)})::text || '},"op":"' || ` +
      `${OP_NAME(alias.opCode)} || '","payload":' || ${canonicalPayloadExpr(alias.payload, visible, true, form)} || ',"row_ordinal":'`,
    tail: `',"row_version":' || ${alias.version} || ${quoteLiteral(`,"schema":${JSON.stringify(info.schema)},"table":${JSON.stringify(info.table)}}`)}`,
  };
}

/**
 * True when payload `v` names every one of `columns` (the writable ones besides the key, which
 * the upsert adds itself): jsonb_populate_record then takes every value from the payload, and its
 * base row could change nothing. False for a null payload.
 */
function completePayloadExpr(v: string, columns: readonly ColumnInfo[]): string {
  if (columns.length === 0) return 'true';
  return `coalesce(${v} ?& ARRAY[${columns.map((c) => quoteLiteral(c.name)).join(', ')}]::text[], false)`;
}

/**
 * The base row of a new key: every column with a DEFAULT (or identity) gets it, evaluated only
 * when the key is new. Built on `NULL::<table>` rather than a ROW(…) of the registered columns,
 * so it stays valid when the table gains a column before bootstrap records it (the new column is
 * left to the INSERT, which does not name it, so it takes its own default).
 */
function defaultsRowExpr(rel: string, columns: readonly ColumnInfo[]): string {
  const defaults = columns.filter((c) => !c.generated && c.name !== SCOPE_COLUMN && c.defaultExpr !== null);
  if (defaults.length === 0) return `NULL::${rel}`;
  const slices: string[] = [];
  for (let i = 0; i < defaults.length; i += 50) {
    slices.push(`jsonb_build_object(${defaults.slice(i, i + 50).map((c) => `${quoteLiteral(c.name)}, ${c.defaultExpr as string}`).join(', ')})`);
  }
  return `jsonb_populate_record(NULL::${rel}, ${slices.join(' || ')})`;
}

/** Parents before children, so applying in this order needs the fewest deferred checks. */
function applyOrder(infos: readonly TableDeclaration[]): Map<TableDeclaration, number> {
  const order = new Map<TableDeclaration, number>();
  const visiting = new Set<TableDeclaration>();
  const visit = (info: TableDeclaration): void => {
    if (order.has(info) || visiting.has(info)) return; // cycles are fine: constraints are deferred
    visiting.add(info);
    for (const fk of info.foreignKeys) {
      const parent = infos.find((t) => t.schema === fk.refSchema && t.table === fk.refTable);
      if (parent && parent !== info) visit(parent);
    }
    visiting.delete(info);
    order.set(info, order.size + 1);
  };
  infos.forEach(visit);
  return order;
}

/**
 * The catalog entries of the registered tables. `tableIds` keeps the ids a database already
 * uses (bundles, row state and sessions refer to them); new tables get the next free ones.
 */
export function buildCatalog(infos: readonly TableDeclaration[], tableIds: ReadonlyMap<string, number> = new Map()): CatalogEntry[] {
  const orders = applyOrder(infos);
  let nextId = Math.max(0, ...tableIds.values()) + 1;
  return infos.map((info) => {
    const tableId = tableIds.get(`${info.schema}.${info.table}`) ?? nextId++;
    const keyColumn = info.keyColumn;
    const keyCol = info.columns.find((c) => c.name === keyColumn);
    const kind: KeyKind = keyCol?.type === 'uuid' ? 'uuid' : 'text';
    const visible = info.columns.filter((c) => c.name !== SCOPE_COLUMN);
    const writable = visible.filter((c) => !c.generated);
    const nonKey = writable.filter((c) => c.name !== keyColumn);
    const rel = `${q(info.schema)}.${q(info.table)}`;
    const key = q(keyColumn);
    const scope = q(SCOPE_COLUMN);
    const captureInto = 'INSERT INTO sync.capture_rows (user_id, capture_id, xact, table_id, key_bytes, deleted, payload)';
    const overriding = writable.some((c) => c.identityAlways) ? ' OVERRIDING SYSTEM VALUE' : '';
    // Every attribute in order: DEFAULT expressions for new rows (evaluated only when the key is new).
    const defaultsRow = defaultsRowExpr(rel, info.columns);
    const setList = (nonKey.length ? nonKey : [keyCol as ColumnInfo]).map((c) => `${q(c.name)} = EXCLUDED.${q(c.name)}`);
    const jsonColumns = visible.filter((c) => wireCategory(c.type) === 'json').map((c) => c.name);
    const wholeRow = completePayloadExpr('p.payload', nonKey);
    // Rows as text: the key's JSON and the payload's JSON, concatenated (sync.snapshot_create
    // wraps them in the row envelope with the row version; adoption parses the payload).
    const snapshotSql = (form: JsonForm | 'arrays'): string =>
      `SELECT ${tableId}::smallint AS table_id, ${orders.get(info) ?? tableId} AS apply_order, ` +
      `${keyBytesExpr(kind, `t.${key}`)} AS key_bytes, ${kind === 'uuid' ? `'"' || t.${key}::text || '"'` : `to_json(t.${key})::text`} AS key_json, ` +
      `${form === 'arrays' ? valuesTextExpr('t', visible) : payloadTextExpr('t', visible, form)} AS payload_text FROM ${rel} t WHERE t.${scope} = $1`;
    return {
      tableId,
      schema: info.schema,
      table: info.table,
      keyColumn,
      keyKind: kind,
      applyOrder: orders.get(info) ?? tableId,
      columns: visible.map((c) => ({ name: c.name, type: c.type, nullable: !c.notNull })),
      captureNewSql:
        `${captureInto} SELECT $1, $2 + row_number() OVER (), txid_current(), ${tableId}, ${keyBytesExpr(kind, `n.${key}`)}, false, ` +
        `${payloadExpr('n', visible)} FROM lockstep_new n`,
      captureOldSql:
        `${captureInto} SELECT $1, $2 + row_number() OVER (), txid_current(), ${tableId}, ${keyBytesExpr(kind, `o.${key}`)}, true, NULL ` +
        `FROM lockstep_old o`,
      captureKeychangeSql:
        `${captureInto} SELECT $1, $2 + row_number() OVER (), txid_current(), ${tableId}, ${keyBytesExpr(kind, `o.${key}`)}, true, NULL ` +
        `FROM lockstep_old o WHERE NOT EXISTS (SELECT 1 FROM lockstep_new n WHERE n.${key} = o.${key} AND n.${scope} = o.${scope})`,
      // Missing payload columns keep the existing row's values, or take the column defaults on a
      // new row (jsonb_populate_record's base row). The pre-image is one probe of the (scope, key)
      // index per staged row (LATERAL with OFFSET 0 is never flattened into a join), so an upsert
      // costs the bundle's size, not the user's row count, whatever the statistics. A payload
      // that holds every column (the usual one: a client sends its whole local row) needs no base
      // row: its probe and its defaults are skipped (the condition gates the probe, so the index
      // is never read for it), 2–4 µs a row.
      upsertSql:
        `INSERT INTO ${rel} AS t (${writable.map((c) => q(c.name)).join(', ')}, ${scope})${overriding} ` +
        `SELECT ${writable.map((c) => upsertValueExpr(c)).join(', ')}, $2 FROM (` +
        `SELECT jsonb_populate_record(CASE WHEN ${wholeRow} THEN NULL::${rel} ` +
        `ELSE coalesce(pre.e, ${defaultsRow}) END, ${inputPayloadExpr(kind, keyColumn, writable)}) AS r, p.payload AS pl ` +
        `FROM sync.push_session_rows p LEFT JOIN LATERAL (SELECT e FROM ${rel} e WHERE e.${scope} = $2 ` +
        `AND e.${key} = ${keyFromBytesExpr(kind, 'p.key_bytes')} AND NOT ${wholeRow} OFFSET 0) pre ON true ` +
        `WHERE p.user_id = $2 AND p.push_id = $1 AND p.table_id = ${tableId} AND p.op_code <> 3 ORDER BY p.row_ordinal OFFSET 0) x ` +
        `ON CONFLICT (${scope}, ${key}) DO UPDATE SET ${setList.join(', ')}`,
      // The keys in the column's own type, probed through the (scope, key) index: a join here
      // could become a scan of the user's rows once statistics exist.
      deleteSql:
        `DELETE FROM ${rel} t WHERE t.${scope} = $2 AND t.${key} = ANY (ARRAY(SELECT ${keyFromBytesExpr(kind, 'p.key_bytes')} ` +
        `FROM sync.push_session_rows p WHERE p.user_id = $2 AND p.push_id = $1 AND p.table_id = ${tableId} AND p.op_code = 3))`,
      snapshotSql: snapshotSql(2),
      snapshotV1Sql: jsonColumns.length ? snapshotSql(1) : null,
      jsonColumns: jsonColumns.length ? jsonColumns : null,
      snapshotArraySql: snapshotSql('arrays'),
      rowArrayHeader: JSON.stringify({ schema: info.schema, table: info.table, columns: visible.map((c) => c.name) }),
      lookupSql:
        `SELECT ${payloadExpr('t', visible)} FROM ${rel} t WHERE t.${scope} = $1 AND t.${key} = ${keyFromBytesExpr(kind, '$2')}`,
      hashRowsSql: (() => {
        const alias = { keyBytes: 'b.key_bytes', opCode: 'b.op_code', payload: 'b.payload', version: 'b.bundle_seq' };
        const v1 = canonicalCommittedRowParts(info, keyColumn, kind, visible, alias, 1);
        const v2 = canonicalCommittedRowParts(info, keyColumn, kind, visible, alias, 2);
        return `SELECT b.row_ordinal AS o, ${v1.head} || b.row_ordinal || ${v1.tail} AS t, ` +
          `${jsonColumns.length ? `${v2.head} || b.row_ordinal || ${v2.tail}` : 'NULL::text'} AS t2 FROM sync.bundle_rows b ` +
          `WHERE b.user_id = $1 AND b.bundle_seq = $2 AND b.table_id = ${tableId}`;
      })(),
      // Pushed row: {base_row_version, key, op, payload, schema, table}. Payloads come from the
      // client, so every value is inspected; json values in the form the session's client sent
      // (the request hash is defined on it), read once per statement from the session.
      // Each value's JSON text is read once, in a LATERAL subquery kept apart by OFFSET 0 (flattened,
      // its expressions would be copied into every place that reads them).
      requestRowsSql: (() => {
        const plain = visible.filter((c) => wireCategory(c.type) !== 'json');
        const texts = new Map(plain.map((c, i) => [c.name, `v.c${i}`] as const));
        const lateral = plain.length
          ? ` CROSS JOIN LATERAL (SELECT ${plain.map((c, i) => `(r.payload->${quoteLiteral(c.name)})::text AS c${i}`).join(', ')} OFFSET 0) v`
          : '';
        return `SELECT r.row_ordinal AS o, '{"base_row_version":' || r.base_row_version || ` +
          `${quoteLiteral(`,"key":{${JSON.stringify(keyColumn)}:`)} || to_json(${keyTextExpr(kind, 'r.key_bytes')})::text || '},"op":"' || ` +
          `${OP_NAME('r.op_code')} || '","payload":' || ${canonicalPayloadExpr('r.payload', visible, false, SESSION_FORM, texts)} || ` +
          `${quoteLiteral(`,"schema":${JSON.stringify(info.schema)},"table":${JSON.stringify(info.table)}}`)} AS t ` +
          `FROM sync.push_session_rows r${lateral} WHERE r.user_id = $2 AND r.push_id = $1 AND r.table_id = ${tableId}`;
      })(),
      rowJsonPrefix: `{"schema":${JSON.stringify(info.schema)},"table":${JSON.stringify(info.table)},"key":{${JSON.stringify(keyColumn)}:`,
    };
  });
}

/**
 * Adoption at a fresh bootstrap: every existing row of every scope, as snapshot-shaped rows with
 * their canonical text split around the ordinal. `catalog[i]` is the entry of `infos[i]`.
 */
export function adoptionSourceSql(infos: readonly TableDeclaration[], catalog: readonly CatalogEntry[]): string {
  return infos
    .map((info, i) => {
      const entry = catalog[i] as CatalogEntry;
      const visible = info.columns.filter((c) => c.name !== SCOPE_COLUMN);
      const { head, tail } = canonicalCommittedRowParts(info, entry.keyColumn, entry.keyKind, visible, {
        keyBytes: 'x.key_bytes', opCode: '1', payload: 'x.payload', version: '1',
      });
      return (
        `SELECT x.*, ${head} AS canon_head, ${tail} AS canon_tail FROM (` +
        `SELECT t.${q(SCOPE_COLUMN)} AS scope, ${entry.tableId}::smallint AS table_id, ${entry.applyOrder} AS apply_order, ` +
        `${keyBytesExpr(entry.keyKind, `t.${q(entry.keyColumn)}`)} AS key_bytes, ${payloadExpr('t', visible)} AS payload ` +
        `FROM ${q(info.schema)}.${q(info.table)} t) x`
      );
    })
    .join(' UNION ALL ');
}
