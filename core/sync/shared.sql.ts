/**
 * Small helpers every managed function uses: error answers, RFC 3339 text, sync key bytes, op names, row size estimates.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction, type ManagedFunction } from '../layout/managed-sql.js';

/**
 * A page reader under its name from before layout 27: its `_parts` function's rows joined into the
 * one `(error, body)` row that the builds before layout 27 read (a rolling deploy). `params` is
 * the parameter list, `args` the call's arguments.
 */
export function joinedPageReader(name: string, params: string, args: string): ManagedFunction {
  return managedFunction(`
CREATE OR REPLACE FUNCTION sync.${name}(${params})
RETURNS TABLE (error jsonb, body text) LANGUAGE sql AS $fn$
  SELECT max(p.error::text)::jsonb, string_agg(p.body, '' ORDER BY p.n)
    FROM sync.${name}_parts(${args}) WITH ORDINALITY AS p(error, body, n)
$fn$
`);
}

export const errSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.err(p_code text, p_message text, p_extra jsonb DEFAULT '{}'::jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT jsonb_build_object('error', p_code, 'message', p_message) || p_extra
$fn$
`);

/**
 * timestamptz → RFC 3339 in UTC with microseconds. Years 1–9999 take the to_char path alone (the
 * common case, one comparison more than before); the rest are the infinities or expanded years.
 * PARALLEL SAFE, like every function the snapshot's rows are rendered with (sync.snapshot_render).
 */
export const rfc3339Sql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.rfc3339(p_ts timestamptz) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
  SELECT CASE WHEN p_ts >= '0001-01-01 00:00:00+00'::timestamptz AND p_ts < '10000-01-01 00:00:00+00'::timestamptz
              THEN to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
              WHEN NOT isfinite(p_ts) THEN p_ts::text
              ELSE sync.iso_year(extract(year FROM p_ts AT TIME ZONE 'UTC')::integer)
                   || to_char(p_ts AT TIME ZONE 'UTC', '-MM-DD"T"HH24:MI:SS.US"Z"') END
$fn$
`);

export const keyBytesSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.key_bytes(p_kind text, p_key text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN p_kind = 'uuid' THEN uuid_send(p_key::uuid) ELSE convert_to(p_key, 'UTF8') END
$fn$
`);

export const keyTextSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.key_text(p_kind text, p_bytes bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN p_kind = 'uuid' THEN encode(p_bytes, 'hex')::uuid::text ELSE convert_from(p_bytes, 'UTF8') END
$fn$
`);

export const opNameSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.op_name(p_op smallint) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE p_op WHEN 1 THEN 'INSERT' WHEN 2 THEN 'UPDATE' WHEN 3 THEN 'DELETE' END
$fn$
`);

/** Rough JSON size of one row envelope; page byte budgets use it without rendering the rows. */
export const rowBytesSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.row_bytes(p_payload jsonb, p_key_bytes bytea) RETURNS bigint LANGUAGE sql IMMUTABLE AS $fn$
  SELECT coalesce(octet_length(p_payload::text), 4)::bigint + 2 * octet_length(p_key_bytes) + 160
$fn$
`);

/**
 * Bytes a text takes once embedded as a JSON string, as Lambda counts a response body inside its
 * function result (protocol §6: quotes, backslashes and control characters escaped; UTF-8
 * otherwise, as both PostgreSQL and JSON.stringify leave it). Page budgets are in these bytes.
 * Its argument is always JSON text, which holds no raw control characters, so the escaped size
 * is its UTF-8 length plus one byte per quote and backslash: two replace() passes, twice as
 * fast as escaping it with to_json.
 */
export const wireBytesSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.wire_bytes(p_text text) RETURNS integer LANGUAGE sql STABLE AS $fn$
  SELECT octet_length(p_text) * 3 - octet_length(replace(p_text, '"', '')) - octet_length(replace(p_text, '\', ''))
$fn$
`);
