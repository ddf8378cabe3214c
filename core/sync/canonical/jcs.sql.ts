/**
 * RFC 8785 (JCS) canonical JSON inside PostgreSQL, for `bundle_hash` and the request hash.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * UTF-16 code units, big-endian: RFC 8785 sorts object keys by them. Used only when a key
 * holds a character outside the BMP, where UTF-16 order differs from code point order.
 */
export const utf16beSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.utf16be(p_text text) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
DECLARE
  v_out text := '';
  v_cp integer;
  v_ch text;
BEGIN
  FOREACH v_ch IN ARRAY regexp_split_to_array(p_text, '') LOOP
    v_cp := ascii(v_ch);
    IF v_cp >= 65536 THEN
      v_cp := v_cp - 65536;
      v_out := v_out || lpad(to_hex(55296 + (v_cp >> 10)), 4, '0') || lpad(to_hex(56320 + (v_cp & 1023)), 4, '0');
    ELSE
      v_out := v_out || lpad(to_hex(v_cp), 4, '0');
    END IF;
  END LOOP;
  RETURN decode(v_out, 'hex');
END
$fn$
`);

/**
 * ECMAScript Number.prototype.toString of the IEEE double nearest to p_n (RFC 8785 §3.2.2.3).
 * PostgreSQL prints the shortest round-trip digits of a float8 (extra_float_digits = 1); this
 * re-lays those digits out the way ECMAScript does.
 *
 * A number beyond the double range (jsonb keeps `1e400`, and protocol 1's hash of a json value
 * canonicalises it as a number) has no RFC 8785 form: it is written as ECMAScript would after
 * JSON.parse, `null` for ±Infinity (JSON.stringify's spelling) and `0` for an underflow, instead
 * of failing the commit. Only such numbers pay for the guarded conversion.
 */
export const jcsNumberSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.jcs_number(p_n numeric) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT
SET extra_float_digits = 1 AS $fn$
DECLARE
  v_s text;
  v_m text[];
  v_digits text;
  v_point integer;
  v_k integer;
  v_trimmed text;
BEGIN
  IF p_n <> 0 AND (abs(p_n) > 1e308 OR abs(p_n) < 1e-323) THEN
    BEGIN
      v_s := (p_n::float8)::text;
    EXCEPTION WHEN numeric_value_out_of_range THEN
      RETURN CASE WHEN abs(p_n) > 1 THEN 'null' ELSE '0' END;
    END;
  ELSE
    v_s := (p_n::float8)::text;
  END IF;
  v_m := regexp_match(v_s, '^(-?)([0-9]+)(?:\.([0-9]+))?(?:e([+-][0-9]+))?$');
  IF v_m IS NULL THEN
    RAISE EXCEPTION 'lockstep: number % cannot be canonicalised', v_s USING ERRCODE = '22003';
  END IF;
  v_digits := v_m[2] || coalesce(v_m[3], '');
  v_point := length(v_m[2]) + coalesce(v_m[4]::integer, 0);
  v_trimmed := ltrim(v_digits, '0');
  v_point := v_point - (length(v_digits) - length(v_trimmed));
  v_digits := rtrim(v_trimmed, '0');
  IF v_digits = '' THEN
    RETURN '0';
  END IF;
  v_k := length(v_digits);
  RETURN v_m[1] || CASE
    WHEN v_k <= v_point AND v_point <= 21 THEN v_digits || repeat('0', v_point - v_k)
    WHEN 0 < v_point AND v_point <= 21 THEN left(v_digits, v_point) || '.' || substr(v_digits, v_point + 1)
    WHEN -6 < v_point AND v_point <= 0 THEN '0.' || repeat('0', -v_point) || v_digits
    ELSE left(v_digits, 1) || CASE WHEN v_k > 1 THEN '.' || substr(v_digits, 2) ELSE '' END
      || 'e' || CASE WHEN v_point - 1 >= 0 THEN '+' ELSE '-' END || abs(v_point - 1)::text
  END;
END
$fn$
`);

/**
 * RFC 8785 (JCS) canonical JSON text of a jsonb value. PostgreSQL's own string escaping
 * (\" \\ \b \f \n \r \t, other controls as \u00xx, nothing else) is exactly JCS's.
 */
export const jcsSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.jcs(p_value jsonb) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
  v_type text;
  v_out text;
BEGIN
  IF p_value IS NULL THEN
    RETURN 'null';
  END IF;
  v_type := jsonb_typeof(p_value);
  IF v_type = 'object' THEN
    IF p_value::text ~ '[\U00010000-\U0010FFFF]' THEN
      SELECT '{' || coalesce(string_agg(to_json(e.key)::text || ':' || sync.jcs(e.value), ',' ORDER BY sync.utf16be(e.key)), '') || '}'
        INTO v_out FROM jsonb_each(p_value) e;
    ELSE
      SELECT '{' || coalesce(string_agg(to_json(e.key)::text || ':' ||
          CASE jsonb_typeof(e.value)
            WHEN 'object' THEN sync.jcs(e.value)
            WHEN 'array' THEN sync.jcs(e.value)
            WHEN 'number' THEN CASE WHEN e.value::text ~ '^-?[0-9]{1,15}$' THEN e.value::text ELSE sync.jcs_number(e.value::numeric) END
            ELSE e.value::text
          END, ',' ORDER BY e.key COLLATE "C"), '') || '}'
        INTO v_out FROM jsonb_each(p_value) e;
    END IF;
    RETURN v_out;
  ELSIF v_type = 'array' THEN
    SELECT '[' || coalesce(string_agg(sync.jcs(e.value), ',' ORDER BY e.ord), '') || ']'
      INTO v_out FROM jsonb_array_elements(p_value) WITH ORDINALITY e(value, ord);
    RETURN v_out;
  ELSIF v_type = 'number' THEN
    v_out := p_value::text;
    IF v_out ~ '^-?[0-9]{1,15}$' THEN
      RETURN v_out;
    END IF;
    RETURN sync.jcs_number(p_value::numeric);
  END IF;
  RETURN p_value::text;
END
$fn$
`);
