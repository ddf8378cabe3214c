/**
 * Wire forms of the values RFC 3339 and JSON cannot spell (protocol §4.2), used by the per-table
 * SQL that table-sql.ts generates: time values outside years 1–9999 (infinities, BC dates as ISO
 * 8601 expanded years in astronomical numbering: 44 BC is -0043), and arrays as JSON arrays of
 * their element's wire form. Floating-point NaN and infinities already render as the JSON strings
 * "NaN", "Infinity" and "-Infinity" (to_jsonb), numeric NaN and infinities as decimal text.
 * The output forms are PARALLEL SAFE (they only compute), so a snapshot's rows are rendered in
 * parallel (sync.snapshot_render); a function they call must be too, or the render runs serially.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/** PostgreSQL's year (…, -2 = 2 BC, -1 = 1 BC, 1, …) as an ISO 8601 year: 1 BC is 0000, 44 BC -0043, 10000 +10000. */
export const isoYearSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.iso_year(p_year integer) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT CASE WHEN p_year < -1 THEN '-' || lpad((-p_year - 1)::text, 4, '0')
              WHEN p_year = -1 THEN '0000'
              WHEN p_year > 9999 THEN '+' || p_year::text
              ELSE lpad(p_year::text, 4, '0') END
$fn$
`);

/**
 * timestamp (without time zone) → its wire jsonb: PostgreSQL's own ISO rendering in years 1–9999
 * (what this type always sent), "infinity"/"-infinity", else the expanded year without " BC".
 */
export const wireTimestampSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.wire_timestamp(p_ts timestamp) RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
  SELECT CASE WHEN p_ts >= '0001-01-01 00:00:00'::timestamp AND p_ts < '10000-01-01 00:00:00'::timestamp THEN to_jsonb(p_ts)
              WHEN NOT isfinite(p_ts) THEN to_jsonb(p_ts::text)
              ELSE to_jsonb(sync.iso_year(extract(year FROM p_ts)::integer) || regexp_replace(to_jsonb(p_ts) #>> '{}', '^[0-9]+| BC$', '', 'g')) END
$fn$
`);

/** date → its wire jsonb, like sync.wire_timestamp. */
export const wireDateSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.wire_date(p_date date) RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
  SELECT CASE WHEN p_date >= '0001-01-01'::date AND p_date < '10000-01-01'::date THEN to_jsonb(p_date)
              WHEN NOT isfinite(p_date) THEN to_jsonb(p_date::text)
              ELSE to_jsonb(sync.iso_year(extract(year FROM p_date)::integer) || regexp_replace(to_jsonb(p_date) #>> '{}', '^[0-9]+| BC$', '', 'g')) END
$fn$
`);

/**
 * A wire time value (timestamptz, timestamp or date) → text PostgreSQL's input accepts: an
 * expanded or zero year becomes PostgreSQL's era form (-0043-03-15T… → 0044-03-15T… BC); anything
 * else, the infinities included, is left to the type's own input.
 */
export const wireTimeInSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.wire_time_in(p_text text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $fn$
  SELECT CASE WHEN p_text ~ '^([+-][0-9]{4,}|0000)-' THEN (
           SELECT CASE WHEN x.y <= 0 THEN lpad((1 - x.y)::text, 4, '0') || x.rest || ' BC'
                       ELSE lpad(x.y::text, greatest(4, length(x.y::text)), '0') || x.rest END
             FROM (SELECT substring(p_text FROM '^([+-]?[0-9]+)-')::integer AS y, substring(p_text FROM '^[+-]?[0-9]+(-.*)$') AS rest) x)
         ELSE p_text END
$fn$
`);

/** A flat jsonb array of an array's elements, nested again by the array's dimensions. */
export const wireShapeSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.wire_shape(p_flat jsonb, p_lengths integer[]) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
  v_out jsonb := '[]'::jsonb;
  v_inner integer;
BEGIN
  IF coalesce(array_length(p_lengths, 1), 0) <= 1 THEN
    RETURN p_flat;
  END IF;
  v_inner := jsonb_array_length(p_flat) / p_lengths[1];
  FOR i IN 0 .. p_lengths[1] - 1 LOOP
    v_out := v_out || jsonb_build_array(sync.wire_shape(
      (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]'::jsonb) FROM jsonb_array_elements(p_flat) WITH ORDINALITY a(e, o)
        WHERE o > i * v_inner AND o <= (i + 1) * v_inner), p_lengths[2:]));
  END LOOP;
  RETURN v_out;
END
$fn$
`);

/** Each array of a type whose elements need a wire form of their own, element by element, any dimensions. */
function arrayOut(elementType: string, name: string, element: string) {
  return managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.${name}(p_value ${elementType}[]) RETURNS jsonb LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $fn$
  SELECT sync.wire_shape(coalesce((SELECT jsonb_agg(${element} ORDER BY u.i) FROM unnest(p_value) WITH ORDINALITY u(e, i)), '[]'::jsonb),
    ARRAY(SELECT array_length(p_value, d) FROM generate_series(1, array_ndims(p_value)) d))
$fn$
`);
}

export const wireTimestamptzArraySql = arrayOut('timestamptz', 'wire_timestamptz_array', 'to_jsonb(sync.rfc3339(u.e))');
export const wireTimestampArraySql = arrayOut('timestamp', 'wire_timestamp_array', 'sync.wire_timestamp(u.e)');
export const wireDateArraySql = arrayOut('date', 'wire_date_array', 'sync.wire_date(u.e)');
export const wireByteaArraySql = arrayOut('bytea', 'wire_bytea_array', String.raw`to_jsonb(translate(encode(u.e, 'base64'), E'\n', ''))`);

/**
 * A pushed array of bytea ('bytea': base64 elements) or time values ('time') → the jsonb that
 * jsonb_populate_record reads: base64 becomes bytea's hex input, expanded years the era form.
 */
export const wireArrayInSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.wire_array_in(p_value jsonb, p_kind text) RETURNS jsonb LANGUAGE sql IMMUTABLE STRICT AS $fn$
  SELECT CASE jsonb_typeof(p_value)
    WHEN 'array' THEN (SELECT coalesce(jsonb_agg(sync.wire_array_in(a.e, p_kind) ORDER BY a.o), '[]'::jsonb)
                         FROM jsonb_array_elements(p_value) WITH ORDINALITY a(e, o))
    WHEN 'string' THEN to_jsonb(CASE WHEN p_kind = 'bytea' THEN '\x' || encode(decode(p_value #>> '{}', 'base64'), 'hex')
                                     ELSE sync.wire_time_in(p_value #>> '{}') END)
    ELSE p_value END
$fn$
`);

/**
 * A json column's stored value (protocol 2: a JSON string of the value's text) as protocol 1 had
 * it: the JSON value itself. A json text jsonb cannot hold (a `\u0000` or lone-surrogate escape,
 * which the json type keeps as written) stays the string: a protocol-1 client gets its text
 * instead of a failed read. Anything but a string (SQL NULL's null) is already the same in both.
 */
export const jsonV1Sql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.json_v1(p_value jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $fn$
  SELECT CASE WHEN jsonb_typeof(p_value) = 'string' AND pg_input_is_valid(p_value #>> '{}', 'jsonb') THEN (p_value #>> '{}')::jsonb
              ELSE p_value END
$fn$
`);

/**
 * A payload with its json columns (`p_columns`) in protocol `p_form`'s form (docs/protocol.md
 * §4.2): 1 turns protocol 2's strings into the values they hold (sync.json_v1), 2 turns protocol
 * 1's values into strings of their text. Null stays null in both (protocol 1 cannot tell JSON null
 * from SQL NULL; a protocol-1 null is read as SQL NULL). Columns the payload leaves out stay out.
 */
export const jsonPayloadFormSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.json_payload_form(p_payload jsonb, p_columns text[], p_form smallint) RETURNS jsonb
LANGUAGE sql STABLE AS $fn$
  SELECT CASE WHEN p_columns IS NULL OR jsonb_typeof(p_payload) IS DISTINCT FROM 'object' THEN p_payload
    ELSE p_payload || coalesce((
      SELECT jsonb_object_agg(c, CASE WHEN p_form = 1 THEN sync.json_v1(p_payload -> c) ELSE to_jsonb((p_payload -> c)::text) END)
        FROM unnest(p_columns) c
       WHERE CASE WHEN p_form = 1 THEN jsonb_typeof(p_payload -> c) = 'string' ELSE jsonb_typeof(p_payload -> c) <> 'null' END), '{}'::jsonb) END
$fn$
`);
