/**
 * Managed functions of the `sync` schema. Each hot endpoint is a single statement that calls one
 * of these, so it costs one round trip, runs as one implicit transaction (pool-safe behind a
 * transaction pooler), and does its row work set-based inside PostgreSQL.
 *
 * Conventions:
 * - Functions return `jsonb` answers; an error answer is `{error, message, ...}` with a code from
 *   `core/errors.ts`. Page readers return `(error jsonb, body text)` so a page's JSON text goes to
 *   the client without being parsed and re-serialised in the Lambda.
 * - The bundle context is two transaction-local settings, `lockstep.scope` (the user id = hidden
 *   scope) and `lockstep.user_pk`; the guard trigger rejects registered-table writes without it.
 * - Counters are sequences: `nextval` survives the rollback of the write it counts.
 */

const GUARD = String.raw`
CREATE FUNCTION sync.guard() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF coalesce(current_setting('lockstep.scope', true), '') = '' THEN
    PERFORM nextval('sync.counter_rejected_direct_writes');
    RAISE EXCEPTION 'lockstep: direct % on registered table %.% is rejected outside a sync bundle', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
      USING ERRCODE = '42501', HINT = 'Write through a push session or the server write API.';
  END IF;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION sync.guard_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM nextval('sync.counter_rejected_direct_writes');
  RAISE EXCEPTION 'lockstep: TRUNCATE of registered table %.% is rejected', TG_TABLE_SCHEMA, TG_TABLE_NAME
    USING ERRCODE = '42501';
END
$fn$;

-- Statement-level capture with transition tables: one call per statement, set-based inserts.
-- Rows changed by cascades and business triggers land here too, so they join the bundle.
CREATE FUNCTION sync.capture() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_scope text := current_setting('lockstep.scope', true);
  v_cat sync.table_catalog;
  v_bad boolean;
BEGIN
  IF coalesce(v_scope, '') = '' THEN
    RAISE EXCEPTION 'lockstep: capture without bundle context on %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = '42501';
  END IF;
  SELECT * INTO STRICT v_cat FROM sync.table_catalog WHERE table_id = TG_ARGV[0]::smallint;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM lockstep_new WHERE _sync_scope_id IS DISTINCT FROM $1)' INTO v_bad USING v_scope;
    IF v_bad THEN
      RAISE EXCEPTION 'lockstep: a write inside the bundle of one user touched a row of another scope in %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '42501';
    END IF;
    EXECUTE v_cat.capture_new_sql;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM lockstep_old WHERE _sync_scope_id IS DISTINCT FROM $1)' INTO v_bad USING v_scope;
    IF v_bad THEN
      RAISE EXCEPTION 'lockstep: a write inside the bundle of one user touched a row of another scope in %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '42501';
    END IF;
    IF TG_OP = 'DELETE' THEN
      EXECUTE v_cat.capture_old_sql;
    ELSE
      -- A key change is DELETE(old key) + INSERT(new key).
      EXECUTE v_cat.capture_keychange_sql;
    END IF;
  END IF;
  RETURN NULL;
END
$fn$;
`;

const HELPERS = String.raw`
CREATE FUNCTION sync.err(p_code text, p_message text, p_extra jsonb DEFAULT '{}'::jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT jsonb_build_object('error', p_code, 'message', p_message) || p_extra
$fn$;

CREATE FUNCTION sync.rfc3339(p_ts timestamptz) RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT to_char(p_ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$fn$;

CREATE FUNCTION sync.key_bytes(p_kind text, p_key text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN p_kind = 'uuid' THEN uuid_send(p_key::uuid) ELSE convert_to(p_key, 'UTF8') END
$fn$;

CREATE FUNCTION sync.key_text(p_kind text, p_bytes bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN p_kind = 'uuid' THEN encode(p_bytes, 'hex')::uuid::text ELSE convert_from(p_bytes, 'UTF8') END
$fn$;

CREATE FUNCTION sync.op_name(p_op smallint) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE p_op WHEN 1 THEN 'INSERT' WHEN 2 THEN 'UPDATE' WHEN 3 THEN 'DELETE' END
$fn$;

-- Rough JSON size of one row envelope; page byte budgets use it without rendering the rows.
CREATE FUNCTION sync.row_bytes(p_payload jsonb, p_key_bytes bytea) RETURNS bigint LANGUAGE sql IMMUTABLE AS $fn$
  SELECT coalesce(octet_length(p_payload::text), 4)::bigint + 2 * octet_length(p_key_bytes) + 160
$fn$;

-- UTF-16 code units, big-endian: RFC 8785 sorts object keys by them. Used only when a key
-- holds a character outside the BMP, where UTF-16 order differs from code point order.
CREATE FUNCTION sync.utf16be(p_text text) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
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
$fn$;

-- ECMAScript Number.prototype.toString of the IEEE double nearest to p_n (RFC 8785 §3.2.2.3).
-- PostgreSQL prints the shortest round-trip digits of a float8 (extra_float_digits = 1); this
-- re-lays those digits out the way ECMAScript does.
CREATE FUNCTION sync.jcs_number(p_n numeric) RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT
SET extra_float_digits = 1 AS $fn$
DECLARE
  v_s text := (p_n::float8)::text;
  v_m text[];
  v_digits text;
  v_point integer;
  v_k integer;
  v_trimmed text;
BEGIN
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
$fn$;

-- RFC 8785 (JCS) canonical JSON text of a jsonb value. PostgreSQL's own string escaping
-- (\" \\ \b \f \n \r \t, other controls as \u00xx, nothing else) is exactly JCS's.
CREATE FUNCTION sync.jcs(p_value jsonb) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $fn$
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
$fn$;

CREATE FUNCTION sync.ensure_user(p_user text) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_pk bigint;
BEGIN
  SELECT user_pk INTO v_pk FROM sync.user_state WHERE user_id = p_user;
  IF FOUND THEN
    RETURN v_pk;
  END IF;
  INSERT INTO sync.user_state (user_pk, user_id, latest_bundle_seq, retained_floor, pruned_through, created_at)
  VALUES (nextval('sync.user_pk_seq'), p_user, 0, 0, 0, now())
  ON CONFLICT (user_id) DO NOTHING
  RETURNING user_pk INTO v_pk;
  IF v_pk IS NULL THEN
    SELECT user_pk INTO STRICT v_pk FROM sync.user_state WHERE user_id = p_user;
  ELSE
    INSERT INTO sync.scope_state (user_pk, status, updated_at) VALUES (v_pk, 'uninitialized', now());
  END IF;
  RETURN v_pk;
END
$fn$;

-- NULL when the source may act; an error answer when it was retired. Unknown sources are
-- registered when p_register is set (push, connect, snapshot), never by pure reads.
CREATE FUNCTION sync.check_source(p_user_pk bigint, p_source text, p_register boolean) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_src sync.source_state;
BEGIN
  SELECT * INTO v_src FROM sync.source_state WHERE user_pk = p_user_pk AND source_id = p_source;
  IF NOT FOUND THEN
    IF p_register THEN
      INSERT INTO sync.source_state (user_pk, source_id, status, last_source_bundle_id, created_at)
      VALUES (p_user_pk, p_source, 'active', 0, now()) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
  END IF;
  IF v_src.status = 'retired' THEN
    RETURN sync.err('source_retired',
      format('source %s was retired and replaced by %s', p_source, v_src.replaced_by_source_id),
      jsonb_build_object('source_id', p_source, 'replaced_by_source_id', v_src.replaced_by_source_id));
  END IF;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION sync.check_push_scope(p_user_pk bigint, p_source text, p_init uuid) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_sc sync.scope_state;
BEGIN
  SELECT * INTO STRICT v_sc FROM sync.scope_state WHERE user_pk = p_user_pk;
  IF v_sc.status = 'initialized' THEN
    IF p_init IS NOT NULL AND p_init IS DISTINCT FROM v_sc.initialization_id THEN
      RETURN sync.err('initialization_stale', 'the initialization_id is not the one that initialized this scope; connect again');
    END IF;
    RETURN NULL;
  ELSIF v_sc.status = 'initializing' THEN
    IF v_sc.lease_source_id IS DISTINCT FROM p_source THEN
      IF v_sc.lease_expires_at <= now() THEN
        RETURN sync.err('scope_uninitialized', 'the scope is not initialized (another device''s lease expired); connect first');
      END IF;
      RETURN sync.err('scope_initializing', 'another device is initializing this scope', jsonb_build_object(
        'retry_after_seconds', greatest(1, ceil(extract(epoch FROM v_sc.lease_expires_at - now())))::integer));
    END IF;
    IF p_init IS DISTINCT FROM v_sc.initialization_id THEN
      RETURN sync.err('initialization_stale', 'the initialization_id is missing, wrong or superseded; connect again');
    END IF;
    IF v_sc.lease_expires_at <= now() THEN
      RETURN sync.err('initialization_expired', 'the initialization lease expired; connect again');
    END IF;
    RETURN NULL;
  END IF;
  RETURN sync.err('scope_uninitialized', 'the scope is not initialized; connect first');
END
$fn$;

CREATE FUNCTION sync.check_read_scope(p_user_pk bigint) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_sc sync.scope_state;
BEGIN
  SELECT * INTO v_sc FROM sync.scope_state WHERE user_pk = p_user_pk;
  IF v_sc.status = 'initialized' THEN
    RETURN NULL;
  ELSIF v_sc.status = 'initializing' AND v_sc.lease_expires_at > now() THEN
    RETURN sync.err('scope_initializing', 'another device is initializing this scope', jsonb_build_object(
      'retry_after_seconds', greatest(1, ceil(extract(epoch FROM v_sc.lease_expires_at - now())))::integer));
  END IF;
  RETURN sync.err('scope_uninitialized', 'the scope is not initialized; connect first');
END
$fn$;

CREATE FUNCTION sync.bundle_answer(p_user_pk bigint, p_seq bigint) RETURNS jsonb LANGUAGE sql STABLE AS $fn$
  SELECT jsonb_build_object('bundle_seq', b.bundle_seq, 'source_id', b.source_id,
    'source_bundle_id', b.source_bundle_id, 'row_count', b.row_count, 'bundle_hash', b.bundle_hash)
  FROM sync.bundle_log b WHERE b.user_pk = p_user_pk AND b.bundle_seq = p_seq
$fn$;
`;

const CONNECT = String.raw`
CREATE FUNCTION sync.connect(p_user text, p_source text, p_has_pending boolean, p_lease_seconds integer) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_pk bigint := sync.ensure_user(p_user);
  v_err jsonb;
  v_sc sync.scope_state;
  v_init uuid;
  v_expires timestamptz := now() + make_interval(secs => p_lease_seconds);
BEGIN
  v_err := sync.check_source(v_pk, p_source, true);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  SELECT * INTO STRICT v_sc FROM sync.scope_state WHERE user_pk = v_pk FOR UPDATE;
  IF v_sc.status = 'initialized' THEN
    RETURN jsonb_build_object('resolution', 'remote_authoritative', 'initialization_id', NULL, 'lease_expires_at', NULL);
  END IF;
  IF v_sc.status = 'initializing' AND v_sc.lease_expires_at > now() AND v_sc.lease_source_id <> p_source THEN
    RETURN jsonb_build_object('resolution', 'retry_later', 'initialization_id', NULL,
      'lease_expires_at', sync.rfc3339(v_sc.lease_expires_at),
      'retry_after_seconds', greatest(1, ceil(extract(epoch FROM v_sc.lease_expires_at - now())))::integer);
  END IF;
  IF p_has_pending THEN
    -- The live lease holder keeps its initialization_id; anyone else starts a new one.
    v_init := CASE WHEN v_sc.status = 'initializing' AND v_sc.lease_source_id = p_source AND v_sc.lease_expires_at > now()
                   THEN v_sc.initialization_id ELSE gen_random_uuid() END;
    UPDATE sync.scope_state SET status = 'initializing', initialization_id = v_init, lease_source_id = p_source,
      lease_expires_at = v_expires, updated_at = now() WHERE user_pk = v_pk;
    RETURN jsonb_build_object('resolution', 'initialize_local', 'initialization_id', v_init,
      'lease_expires_at', sync.rfc3339(v_expires));
  END IF;
  UPDATE sync.scope_state SET status = 'initialized', initialization_id = NULL, lease_source_id = NULL,
    lease_expires_at = NULL, updated_at = now() WHERE user_pk = v_pk;
  RETURN jsonb_build_object('resolution', 'initialize_empty', 'initialization_id', NULL, 'lease_expires_at', NULL);
END
$fn$;
`;

const PUSH = String.raw`
CREATE FUNCTION sync.push_create(p_user text, p_source text, p_source_bundle_id bigint, p_planned integer,
  p_init uuid, p_request_hash text, p_ttl_seconds integer) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_pk bigint := sync.ensure_user(p_user);
  v_err jsonb;
  v_last bigint;
  v_bundle sync.bundle_log;
  v_id uuid := gen_random_uuid();
  v_expires timestamptz := now() + make_interval(secs => p_ttl_seconds);
BEGIN
  v_err := sync.check_source(v_pk, p_source, true);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  SELECT * INTO v_bundle FROM sync.bundle_log
   WHERE user_pk = v_pk AND source_id = p_source AND source_bundle_id = p_source_bundle_id;
  IF FOUND THEN
    IF p_request_hash IS NOT NULL AND v_bundle.request_hash IS NOT NULL AND v_bundle.request_hash <> p_request_hash THEN
      RETURN sync.err('push_request_mismatch', format(
        'source bundle %s of source %s was committed with a different request_hash', p_source_bundle_id, p_source));
    END IF;
    RETURN jsonb_build_object('status', 'already_committed') || sync.bundle_answer(v_pk, v_bundle.bundle_seq);
  END IF;
  SELECT last_source_bundle_id INTO STRICT v_last FROM sync.source_state WHERE user_pk = v_pk AND source_id = p_source;
  IF p_source_bundle_id <= v_last THEN
    RETURN sync.err('source_sequence_changed', format(
      'source bundle %s of source %s is at or below its last committed bundle %s, which is no longer retained',
      p_source_bundle_id, p_source, v_last), jsonb_build_object('last_source_bundle_id', v_last));
  END IF;
  IF p_source_bundle_id > v_last + 1 THEN
    RETURN sync.err('source_sequence_out_of_order', format(
      'source bundle %s of source %s skips ahead: the next expected is %s', p_source_bundle_id, p_source, v_last + 1),
      jsonb_build_object('expected_source_bundle_id', v_last + 1));
  END IF;
  v_err := sync.check_push_scope(v_pk, p_source, p_init);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  INSERT INTO sync.push_sessions (push_id, user_pk, source_id, source_bundle_id, planned_row_count, next_row_ordinal,
    status, request_hash, initialization_id, byte_count, created_at, expires_at)
  VALUES (v_id, v_pk, p_source, p_source_bundle_id, p_planned, 0, 'staging', p_request_hash, p_init, 0, now(), v_expires);
  RETURN jsonb_build_object('push_id', v_id, 'status', 'staging', 'planned_row_count', p_planned,
    'next_expected_row_ordinal', 0, 'expires_at', sync.rfc3339(v_expires));
END
$fn$;

-- p_rows: [{t: table_id, k: key text, o: op_code, b: base_row_version, p: payload}], validated
-- by the edge against the catalog before it gets here.
CREATE FUNCTION sync.push_chunk(p_user text, p_source text, p_push uuid, p_start integer, p_rows jsonb,
  p_bytes bigint, p_digest text, p_max_bundle_bytes bigint) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_ps sync.push_sessions;
  v_n integer := jsonb_array_length(p_rows);
BEGIN
  SELECT s.* INTO v_ps FROM sync.push_sessions s JOIN sync.user_state u ON u.user_pk = s.user_pk
   WHERE s.push_id = p_push AND u.user_id = p_user AND s.source_id = p_source FOR UPDATE OF s;
  IF NOT FOUND THEN
    RETURN sync.err('push_session_not_found', format('push session %s does not exist', p_push));
  END IF;
  -- Re-sending the chunk that was accepted last is idempotent.
  IF v_ps.last_chunk_start = p_start AND v_ps.last_chunk_digest = p_digest AND v_ps.next_row_ordinal = p_start + v_n THEN
    RETURN jsonb_build_object('push_id', p_push, 'next_expected_row_ordinal', v_ps.next_row_ordinal);
  END IF;
  IF v_ps.status <> 'staging' THEN
    RETURN sync.err('push_chunk_out_of_order', 'the push session is already committed',
      jsonb_build_object('next_expected_row_ordinal', v_ps.next_row_ordinal));
  END IF;
  IF v_ps.expires_at <= now() THEN
    RETURN sync.err('push_session_expired', format('push session %s expired', p_push));
  END IF;
  IF p_start <> v_ps.next_row_ordinal THEN
    RETURN sync.err('push_chunk_out_of_order', format('chunk starts at row %s but the session expects row %s',
      p_start, v_ps.next_row_ordinal), jsonb_build_object('next_expected_row_ordinal', v_ps.next_row_ordinal));
  END IF;
  IF p_start + v_n > v_ps.planned_row_count THEN
    RETURN sync.err('invalid_request', format('chunk ends at row %s, beyond planned_row_count %s',
      p_start + v_n, v_ps.planned_row_count));
  END IF;
  IF v_ps.byte_count + p_bytes > p_max_bundle_bytes THEN
    RETURN sync.err('payload_too_large', format('the bundle would exceed max_bytes_per_bundle (%s bytes)', p_max_bundle_bytes));
  END IF;
  BEGIN
    INSERT INTO sync.push_session_rows (push_id, row_ordinal, table_id, key_bytes, op_code, base_row_version, payload)
    SELECT p_push, p_start + (e.ord - 1)::integer, c.table_id, sync.key_bytes(c.key_kind, e.r->>'k'),
           (e.r->>'o')::smallint, (e.r->>'b')::bigint, nullif(e.r->'p', 'null'::jsonb)
      FROM jsonb_array_elements(p_rows) WITH ORDINALITY e(r, ord)
      JOIN sync.table_catalog c ON c.table_id = (e.r->>'t')::smallint;
  EXCEPTION WHEN unique_violation THEN
    RETURN sync.err('invalid_request', 'a key appears more than once in the bundle; send one row per key');
  END;
  UPDATE sync.push_sessions SET next_row_ordinal = p_start + v_n, byte_count = byte_count + p_bytes,
    last_chunk_start = p_start, last_chunk_digest = p_digest WHERE push_id = p_push;
  RETURN jsonb_build_object('push_id', p_push, 'next_expected_row_ordinal', p_start + v_n);
END
$fn$;

CREATE FUNCTION sync.push_delete(p_user text, p_source text, p_push uuid) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_ps sync.push_sessions;
BEGIN
  SELECT s.* INTO v_ps FROM sync.push_sessions s JOIN sync.user_state u ON u.user_pk = s.user_pk
   WHERE s.push_id = p_push AND u.user_id = p_user AND s.source_id = p_source FOR UPDATE OF s;
  IF NOT FOUND THEN
    RETURN sync.err('push_session_not_found', format('push session %s does not exist', p_push));
  END IF;
  DELETE FROM sync.push_session_rows WHERE push_id = p_push;
  -- A committed session stays until it expires so a retried commit still gets its answer.
  IF v_ps.status = 'staging' THEN
    DELETE FROM sync.push_sessions WHERE push_id = p_push;
  END IF;
  RETURN jsonb_build_object('deleted', true);
END
$fn$;

-- The request hash the client computed: RFC 8785 over the pushed rows in ordinal order. Each
-- table's canonical row text comes from SQL generated at bootstrap (table_catalog.request_rows_sql).
CREATE FUNCTION sync.push_request_hash(p_push uuid) RETURNS text LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  v_union text;
  v_text text;
BEGIN
  SELECT string_agg(c.request_rows_sql, ' UNION ALL ' ORDER BY c.table_id) INTO v_union
    FROM sync.table_catalog c
   WHERE c.table_id IN (SELECT DISTINCT table_id FROM sync.push_session_rows WHERE push_id = p_push);
  IF v_union IS NULL THEN
    RETURN encode(sha256(convert_to('[]', 'UTF8')), 'hex');
  END IF;
  EXECUTE 'SELECT string_agg(t, '','' ORDER BY o) FROM (' || v_union || ') x' INTO v_text USING p_push;
  RETURN encode(sha256(convert_to('[' || coalesce(v_text, '') || ']', 'UTF8')), 'hex');
END
$fn$;

-- Turns this transaction's captured changes into committed bundle p_seq: coalesce per key in
-- capture order, classify against row_state, write bundle_rows/row_state/bundle_log, hash.
CREATE FUNCTION sync.finalize_bundle(p_user_pk bigint, p_seq bigint, p_source text, p_source_bundle_id bigint,
  p_request_hash text, p_retained integer) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_xact bigint := txid_current();
  v_count integer;
  v_bytes bigint;
  v_hash text;
  v_union text;
  v_text text;
BEGIN
  INSERT INTO sync.bundle_rows (user_pk, bundle_seq, row_ordinal, table_id, key_bytes, op_code, payload)
  SELECT p_user_pk, p_seq, (row_number() OVER (ORDER BY x.first_id))::integer - 1, x.table_id, x.key_bytes, x.op_code, x.payload
  FROM (
    SELECT f.table_id, f.key_bytes, f.first_id, f.payload,
           CASE WHEN f.deleted THEN CASE WHEN rs.deleted IS FALSE THEN 3 END
                WHEN rs.deleted IS FALSE THEN 2 ELSE 1 END::smallint AS op_code
    FROM (
      SELECT DISTINCT ON (cr.table_id, cr.key_bytes) cr.table_id, cr.key_bytes, cr.deleted, cr.payload,
             min(cr.capture_id) OVER (PARTITION BY cr.table_id, cr.key_bytes) AS first_id
      FROM sync.capture_rows cr WHERE cr.xact = v_xact
      ORDER BY cr.table_id, cr.key_bytes, cr.capture_id DESC
    ) f
    LEFT JOIN sync.row_state rs ON rs.user_pk = p_user_pk AND rs.table_id = f.table_id AND rs.key_bytes = f.key_bytes
  ) x WHERE x.op_code IS NOT NULL;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  DELETE FROM sync.capture_rows WHERE xact = v_xact;

  INSERT INTO sync.row_state AS rs (user_pk, table_id, key_bytes, row_version, deleted)
  SELECT p_user_pk, b.table_id, b.key_bytes, p_seq, b.op_code = 3
    FROM sync.bundle_rows b WHERE b.user_pk = p_user_pk AND b.bundle_seq = p_seq
  ON CONFLICT (user_pk, table_id, key_bytes) DO UPDATE SET row_version = EXCLUDED.row_version, deleted = EXCLUDED.deleted;

  -- bundle_hash: RFC 8785 text of each committed row from SQL generated per table at bootstrap
  -- (keys pre-sorted, value types known), so hashing is concatenation, not JSON walking.
  SELECT string_agg(c.hash_rows_sql, ' UNION ALL ' ORDER BY c.table_id) INTO v_union
    FROM sync.table_catalog c
   WHERE c.table_id IN (SELECT DISTINCT table_id FROM sync.bundle_rows WHERE user_pk = p_user_pk AND bundle_seq = p_seq);
  IF v_union IS NOT NULL THEN
    EXECUTE 'SELECT string_agg(t, '','' ORDER BY o), sum(octet_length(t)) FROM (' || v_union || ') x'
      INTO v_text, v_bytes USING p_user_pk, p_seq;
  END IF;
  v_hash := encode(sha256(convert_to('[' || coalesce(v_text, '') || ']', 'UTF8')), 'hex');
  -- The canonical text is a close estimate of each row's JSON size on the wire.
  v_bytes := coalesce(v_bytes, 0) + 64 * v_count;

  INSERT INTO sync.bundle_log (user_pk, bundle_seq, source_id, source_bundle_id, row_count, byte_count, bundle_hash,
    request_hash, committed_at)
  VALUES (p_user_pk, p_seq, p_source, p_source_bundle_id, v_count, v_bytes, v_hash, p_request_hash, now());
  UPDATE sync.user_state SET latest_bundle_seq = p_seq,
    retained_floor = greatest(retained_floor, p_seq - p_retained) WHERE user_pk = p_user_pk;
  UPDATE sync.source_state SET last_source_bundle_id = p_source_bundle_id, status = 'active'
   WHERE user_pk = p_user_pk AND source_id = p_source;
  PERFORM set_config('lockstep.scope', '', true), set_config('lockstep.user_pk', '', true);
  PERFORM nextval('sync.counter_bundles_committed');
  RETURN jsonb_build_object('bundle_seq', p_seq, 'source_id', p_source, 'source_bundle_id', p_source_bundle_id,
    'row_count', v_count, 'bundle_hash', v_hash);
END
$fn$;

CREATE FUNCTION sync.push_commit(p_user text, p_source text, p_push uuid, p_max_conflicts integer, p_retained integer)
RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_ps sync.push_sessions;
  v_us sync.user_state;
  v_err jsonb;
  v_existing bigint;
  v_seq bigint;
  v_conflicts jsonb := '[]'::jsonb;
  v_conflict_count integer;
  v_first jsonb;
  v_row record;
  v_server_row jsonb;
  v_cat record;
  v_tables smallint[];
  v_result jsonb;
  v_state text; v_msg text; v_detail text; v_constraint text; v_schema text; v_table text; v_column text;
BEGIN
  SELECT s.* INTO v_ps FROM sync.push_sessions s JOIN sync.user_state u ON u.user_pk = s.user_pk
   WHERE s.push_id = p_push AND u.user_id = p_user AND s.source_id = p_source FOR UPDATE OF s;
  IF NOT FOUND THEN
    RETURN sync.err('push_session_not_found', format('push session %s does not exist', p_push));
  END IF;
  IF v_ps.status = 'committed' THEN
    RETURN jsonb_build_object('status', 'committed') || sync.bundle_answer(v_ps.user_pk, v_ps.bundle_seq);
  END IF;
  IF v_ps.expires_at <= now() THEN
    RETURN sync.err('push_session_expired', format('push session %s expired', p_push));
  END IF;
  IF v_ps.next_row_ordinal < v_ps.planned_row_count THEN
    RETURN sync.err('push_incomplete', format('%s of %s planned rows were uploaded', v_ps.next_row_ordinal,
      v_ps.planned_row_count), jsonb_build_object('next_expected_row_ordinal', v_ps.next_row_ordinal));
  END IF;

  -- Serialise this user's commits on the user's state row; other users never wait.
  SELECT * INTO STRICT v_us FROM sync.user_state WHERE user_pk = v_ps.user_pk FOR UPDATE;

  SELECT bundle_seq INTO v_existing FROM sync.bundle_log
   WHERE user_pk = v_ps.user_pk AND source_id = v_ps.source_id AND source_bundle_id = v_ps.source_bundle_id;
  IF FOUND THEN
    -- Another session of the same (source, source_bundle_id) committed first. With other rows
    -- (a different request_hash) this session's rows were never applied: answering "committed"
    -- would make the client drop them, so it is the same mismatch push-session create reports.
    IF v_ps.request_hash IS NOT NULL AND EXISTS (SELECT 1 FROM sync.bundle_log WHERE user_pk = v_ps.user_pk
         AND bundle_seq = v_existing AND request_hash IS NOT NULL AND request_hash <> v_ps.request_hash) THEN
      RETURN sync.err('push_request_mismatch', format(
        'source bundle %s of source %s was committed by another session with a different request_hash',
        v_ps.source_bundle_id, v_ps.source_id));
    END IF;
    UPDATE sync.push_sessions SET status = 'committed', bundle_seq = v_existing WHERE push_id = p_push;
    DELETE FROM sync.push_session_rows WHERE push_id = p_push;
    RETURN jsonb_build_object('status', 'committed') || sync.bundle_answer(v_ps.user_pk, v_existing);
  END IF;
  v_err := sync.check_source(v_ps.user_pk, v_ps.source_id, true);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  IF v_ps.source_bundle_id <> (SELECT last_source_bundle_id + 1 FROM sync.source_state
                                 WHERE user_pk = v_ps.user_pk AND source_id = v_ps.source_id) THEN
    RETURN sync.err('source_sequence_out_of_order', format(
      'source bundle %s of source %s is no longer the next one to commit', v_ps.source_bundle_id, v_ps.source_id));
  END IF;
  v_err := sync.check_push_scope(v_ps.user_pk, v_ps.source_id, v_ps.initialization_id);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  IF v_ps.request_hash IS NOT NULL AND v_ps.request_hash <> sync.push_request_hash(p_push) THEN
    RETURN sync.err('invalid_request', 'request_hash does not match the uploaded rows (RFC 8785 + SHA-256 of the pushed rows)');
  END IF;

  -- Optimistic concurrency: every base_row_version must equal the server's version (0 = never seen).
  SELECT count(*) INTO v_conflict_count FROM sync.push_session_rows p
    LEFT JOIN sync.row_state rs ON rs.user_pk = v_ps.user_pk AND rs.table_id = p.table_id AND rs.key_bytes = p.key_bytes
   WHERE p.push_id = p_push AND p.base_row_version <> coalesce(rs.row_version, 0);
  IF v_conflict_count > 0 THEN
    FOR v_row IN
      SELECT p.row_ordinal, p.key_bytes, p.op_code, p.base_row_version, rs.row_version AS server_version,
             rs.deleted AS server_deleted, c.schema_name, c.table_name, c.key_column, c.key_kind, c.lookup_sql
        FROM sync.push_session_rows p
        JOIN sync.table_catalog c ON c.table_id = p.table_id
        LEFT JOIN sync.row_state rs ON rs.user_pk = v_ps.user_pk AND rs.table_id = p.table_id AND rs.key_bytes = p.key_bytes
       WHERE p.push_id = p_push AND p.base_row_version <> coalesce(rs.row_version, 0)
       ORDER BY p.row_ordinal LIMIT p_max_conflicts
    LOOP
      v_server_row := NULL;
      IF v_row.server_deleted IS FALSE THEN
        EXECUTE v_row.lookup_sql INTO v_server_row USING p_user, v_row.key_bytes;
      END IF;
      v_conflicts := v_conflicts || jsonb_build_array(jsonb_build_object(
        'schema', v_row.schema_name, 'table', v_row.table_name,
        'key', jsonb_build_object(v_row.key_column, sync.key_text(v_row.key_kind, v_row.key_bytes)),
        'op', sync.op_name(v_row.op_code), 'base_row_version', v_row.base_row_version,
        'server_row_version', coalesce(v_row.server_version, 0), 'server_row_deleted', coalesce(v_row.server_deleted, false),
        'server_row', v_server_row));
    END LOOP;
    v_first := v_conflicts->0;
    PERFORM nextval('sync.counter_push_conflicts');
    RETURN sync.err('push_conflict', format('push conflict: %s on %s.%s key %s expected row_version %s but the server has %s%s',
        v_first->>'op', v_first->>'schema', v_first->>'table', v_first->'key', v_first->>'base_row_version',
        v_first->>'server_row_version',
        CASE WHEN (v_first->>'server_row_deleted')::boolean THEN ' (deleted)' ELSE '' END
        || CASE WHEN v_conflict_count > 1 THEN format(' (and %s more conflicting rows)', v_conflict_count - 1) ELSE '' END),
      jsonb_build_object('conflict', v_first, 'conflicts', v_conflicts, 'conflict_count', v_conflict_count));
  END IF;

  v_seq := v_us.latest_bundle_seq + 1;
  PERFORM set_config('lockstep.scope', p_user, true), set_config('lockstep.user_pk', v_ps.user_pk::text, true);
  SELECT array_agg(DISTINCT table_id) INTO v_tables FROM sync.push_session_rows WHERE push_id = p_push;
  BEGIN
    SET CONSTRAINTS ALL DEFERRED;
    FOR v_cat IN SELECT * FROM sync.table_catalog WHERE table_id = ANY (v_tables) ORDER BY apply_order LOOP
      EXECUTE v_cat.upsert_sql USING p_push, p_user;
    END LOOP;
    FOR v_cat IN SELECT * FROM sync.table_catalog WHERE table_id = ANY (v_tables) ORDER BY apply_order DESC LOOP
      EXECUTE v_cat.delete_sql USING p_push, p_user;
    END LOOP;
    -- Deferred checks run here, inside the block, so a violation is a typed answer, not a failed COMMIT.
    SET CONSTRAINTS ALL IMMEDIATE;
  -- program_limit_exceeded: a pushed value too large for a business index (54000) is the
  -- client's data, so it is a rejection like a constraint, not a 500.
  EXCEPTION WHEN integrity_constraint_violation OR data_exception OR raise_exception OR insufficient_privilege
              OR program_limit_exceeded THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL,
      v_constraint = CONSTRAINT_NAME, v_schema = SCHEMA_NAME, v_table = TABLE_NAME, v_column = COLUMN_NAME;
    PERFORM set_config('lockstep.scope', '', true), set_config('lockstep.user_pk', '', true);
    PERFORM nextval('sync.counter_push_rejected');
    RETURN sync.err('push_rejected', 'the bundle breaks a business constraint: ' || v_msg, jsonb_build_object(
      'violation', jsonb_build_object('sqlstate', v_state, 'constraint', nullif(v_constraint, ''),
        'schema', nullif(v_schema, ''), 'table', nullif(v_table, ''), 'column', nullif(v_column, ''), 'key', NULL),
      '_detail', v_detail));
  END;

  v_result := sync.finalize_bundle(v_ps.user_pk, v_seq, v_ps.source_id, v_ps.source_bundle_id, v_ps.request_hash, p_retained);
  UPDATE sync.push_sessions SET status = 'committed', bundle_seq = v_seq WHERE push_id = p_push;
  DELETE FROM sync.push_session_rows WHERE push_id = p_push;
  UPDATE sync.scope_state SET status = 'initialized', lease_source_id = NULL, lease_expires_at = NULL, updated_at = now()
   WHERE user_pk = v_ps.user_pk AND status <> 'initialized';
  RETURN jsonb_build_object('status', 'committed') || v_result;
END
$fn$;

-- Server-originated writes: begin, let the application write business rows, then finish.
CREATE FUNCTION sync.server_bundle_begin(p_user text, p_source text) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_pk bigint := sync.ensure_user(p_user);
  v_err jsonb;
BEGIN
  IF coalesce(current_setting('lockstep.scope', true), '') <> '' THEN
    RAISE EXCEPTION 'lockstep: a bundle is already open in this transaction' USING ERRCODE = '55000';
  END IF;
  v_err := sync.check_source(v_pk, p_source, true);
  IF v_err IS NOT NULL THEN
    RAISE EXCEPTION 'lockstep: %', v_err->>'message' USING ERRCODE = '55000';
  END IF;
  PERFORM 1 FROM sync.user_state WHERE user_pk = v_pk FOR UPDATE;
  PERFORM set_config('lockstep.scope', p_user, true), set_config('lockstep.user_pk', v_pk::text, true),
          set_config('lockstep.source', p_source, true);
  RETURN v_pk;
END
$fn$;

CREATE FUNCTION sync.server_bundle_finish(p_retained integer) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_pk bigint := nullif(current_setting('lockstep.user_pk', true), '')::bigint;
  v_source text := current_setting('lockstep.source', true);
  v_seq bigint;
  v_sbid bigint;
BEGIN
  IF v_pk IS NULL THEN
    RAISE EXCEPTION 'lockstep: no server bundle is open in this transaction' USING ERRCODE = '55000';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM sync.capture_rows WHERE xact = txid_current()) THEN
    PERFORM set_config('lockstep.scope', '', true), set_config('lockstep.user_pk', '', true);
    RETURN NULL;
  END IF;
  SELECT latest_bundle_seq + 1 INTO STRICT v_seq FROM sync.user_state WHERE user_pk = v_pk;
  SELECT last_source_bundle_id + 1 INTO STRICT v_sbid FROM sync.source_state WHERE user_pk = v_pk AND source_id = v_source;
  UPDATE sync.scope_state SET status = 'initialized', initialization_id = NULL, lease_source_id = NULL,
    lease_expires_at = NULL, updated_at = now() WHERE user_pk = v_pk AND status <> 'initialized';
  RETURN sync.finalize_bundle(v_pk, v_seq, v_source, v_sbid, NULL, p_retained);
END
$fn$;
`;

const READ = String.raw`
-- Rows render by concatenation: table_catalog.row_json_prefix holds {"schema":…,"table":…,"key":{"<key>":.
CREATE FUNCTION sync.committed_row_text(p_prefix text, p_kind text, p_key_bytes bytea, p_op smallint, p_version bigint, p_payload jsonb)
RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT p_prefix || to_json(CASE WHEN p_kind = 'uuid' THEN encode(p_key_bytes, 'hex')::uuid::text ELSE convert_from(p_key_bytes, 'UTF8') END)::text
    || '},"op":"' || CASE p_op WHEN 1 THEN 'INSERT' WHEN 2 THEN 'UPDATE' ELSE 'DELETE' END
    || '","row_version":' || p_version || ',"payload":' || coalesce(p_payload::text, 'null') || '}'
$fn$;

-- '{"bundle_seq":…,"source_id":…,"source_bundle_id":…,"row_count":…,"bundle_hash":"…"' (object left open).
CREATE FUNCTION sync.bundle_head_text(p_seq bigint, p_source text, p_source_bundle_id bigint, p_rows integer, p_hash text)
RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT '{"bundle_seq":' || p_seq || ',"source_id":' || to_json(p_source)::text || ',"source_bundle_id":' || p_source_bundle_id
    || ',"row_count":' || p_rows || ',"bundle_hash":' || to_json(p_hash)::text
$fn$;

CREATE FUNCTION sync.snapshot_row_text(p_prefix text, p_kind text, p_key_bytes bytea, p_version bigint, p_payload jsonb)
RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT p_prefix || to_json(CASE WHEN p_kind = 'uuid' THEN encode(p_key_bytes, 'hex')::uuid::text ELSE convert_from(p_key_bytes, 'UTF8') END)::text
    || '},"row_version":' || p_version || ',"payload":' || p_payload::text || '}'
$fn$;

CREATE FUNCTION sync.pull(p_user text, p_source text, p_after bigint, p_max integer, p_target bigint, p_budget bigint)
RETURNS TABLE (error jsonb, body text) LANGUAGE plpgsql AS $fn$
DECLARE
  v_us sync.user_state;
  v_err jsonb;
  v_stable bigint;
BEGIN
  SELECT * INTO v_us FROM sync.user_state WHERE user_id = p_user;
  IF NOT FOUND THEN
    RETURN QUERY SELECT sync.err('scope_uninitialized', 'the scope is not initialized; connect first'), NULL::text;
    RETURN;
  END IF;
  v_err := coalesce(sync.check_source(v_us.user_pk, p_source, false), sync.check_read_scope(v_us.user_pk));
  IF v_err IS NOT NULL THEN
    RETURN QUERY SELECT v_err, NULL::text;
    RETURN;
  END IF;
  IF p_target IS NOT NULL AND p_target > v_us.latest_bundle_seq THEN
    RETURN QUERY SELECT sync.err('invalid_request', format('target_bundle_seq %s is beyond the latest bundle %s',
      p_target, v_us.latest_bundle_seq)), NULL::text;
    RETURN;
  END IF;
  IF p_after > v_us.latest_bundle_seq OR p_after < v_us.retained_floor THEN
    PERFORM nextval('sync.counter_history_pruned');
    RETURN QUERY SELECT sync.err('history_pruned', CASE WHEN p_after > v_us.latest_bundle_seq
      THEN format('checkpoint %s is ahead of the server''s latest bundle %s; rebuild from a snapshot', p_after, v_us.latest_bundle_seq)
      ELSE format('checkpoint %s is below the retained history floor %s; rebuild from a snapshot', p_after, v_us.retained_floor) END,
      jsonb_build_object('retained_floor', v_us.retained_floor)), NULL::text;
    RETURN;
  END IF;
  v_stable := coalesce(p_target, v_us.latest_bundle_seq);
  IF p_after > v_stable THEN
    RETURN QUERY SELECT sync.err('invalid_request', format('after_bundle_seq %s is beyond target_bundle_seq %s',
      p_after, v_stable)), NULL::text;
    RETURN;
  END IF;
  RETURN QUERY
  WITH page AS (
    SELECT b.*, sum(b.byte_count + 200) OVER (ORDER BY b.bundle_seq) AS cumulative
    FROM (SELECT * FROM sync.bundle_log WHERE user_pk = v_us.user_pk AND bundle_seq > p_after AND bundle_seq <= v_stable
          ORDER BY bundle_seq LIMIT p_max) b
  ), chosen AS (
    -- The first bundle always goes; one too large for a response goes without its rows.
    SELECT page.*, page.cumulative > p_budget AS omitted FROM page
     WHERE page.cumulative <= p_budget OR page.bundle_seq = p_after + 1
  )
  -- The body is JSON text built by concatenation end to end: nothing is parsed back into json
  -- (a '::json' cast of each bundle's rows cost ~20 µs per row) and the edge sends it as is.
  SELECT NULL::jsonb, '{"stable_bundle_seq":' || v_stable || ',"bundles":[' || coalesce(string_agg(
      sync.bundle_head_text(c.bundle_seq, c.source_id, c.source_bundle_id, c.row_count, c.bundle_hash)
      || ',"rows_omitted":' || c.omitted::text || ',"rows":[' || CASE WHEN c.omitted THEN '' ELSE (
          SELECT coalesce(string_agg(sync.committed_row_text(tc.row_json_prefix, tc.key_kind, r.key_bytes, r.op_code, r.bundle_seq, r.payload),
                 ',' ORDER BY r.row_ordinal), '')
            FROM sync.bundle_rows r JOIN sync.table_catalog tc ON tc.table_id = r.table_id
           WHERE r.user_pk = v_us.user_pk AND r.bundle_seq = c.bundle_seq) END || ']}',
      ',' ORDER BY c.bundle_seq), '')
    || '],"has_more":' || (coalesce(max(c.bundle_seq), p_after) < v_stable)::text || '}'
  FROM chosen c;
END
$fn$;

CREATE FUNCTION sync.committed_rows(p_user text, p_seq bigint, p_after bigint, p_max integer, p_budget bigint)
RETURNS TABLE (error jsonb, body text) LANGUAGE plpgsql AS $fn$
DECLARE
  v_us sync.user_state;
  v_b sync.bundle_log;
BEGIN
  SELECT * INTO v_us FROM sync.user_state WHERE user_id = p_user;
  IF FOUND THEN
    SELECT * INTO v_b FROM sync.bundle_log WHERE user_pk = v_us.user_pk AND bundle_seq = p_seq;
  END IF;
  IF v_b.bundle_seq IS NULL THEN
    IF v_us.user_pk IS NOT NULL AND p_seq >= 1 AND p_seq <= v_us.retained_floor THEN
      PERFORM nextval('sync.counter_history_pruned');
      RETURN QUERY SELECT sync.err('history_pruned', format('bundle %s is below the retained history floor %s; rebuild from a snapshot',
        p_seq, v_us.retained_floor), jsonb_build_object('retained_floor', v_us.retained_floor)), NULL::text;
      RETURN;
    END IF;
    RETURN QUERY SELECT sync.err('committed_bundle_not_found', format('bundle %s does not exist', p_seq)), NULL::text;
    RETURN;
  END IF;
  IF p_seq <= v_us.retained_floor THEN
    PERFORM nextval('sync.counter_history_pruned');
    RETURN QUERY SELECT sync.err('history_pruned', format('bundle %s is below the retained history floor %s; rebuild from a snapshot',
      p_seq, v_us.retained_floor), jsonb_build_object('retained_floor', v_us.retained_floor)), NULL::text;
    RETURN;
  END IF;
  RETURN QUERY
  WITH page AS (
    SELECT r.*, sum(sync.row_bytes(r.payload, r.key_bytes)) OVER (ORDER BY r.row_ordinal) AS cumulative
    -- Ordinals are dense (0 … row_count - 1), so the page is the closed range [p_after, p_after + p_max):
    -- a range scan of the primary key (user_pk, bundle_seq, row_ordinal). Without the upper bound
    -- a bundle's whole remainder was read and sorted for every page.
    FROM (SELECT * FROM sync.bundle_rows WHERE user_pk = v_us.user_pk AND bundle_seq = p_seq
            AND row_ordinal >= p_after AND row_ordinal < p_after + p_max
          ORDER BY row_ordinal) r
  ), chosen AS (
    SELECT page.* FROM page WHERE page.cumulative <= p_budget OR page.row_ordinal = p_after
  )
  -- JSON text by concatenation, never cast to json (see sync.pull).
  SELECT NULL::jsonb, sync.bundle_head_text(v_b.bundle_seq, v_b.source_id, v_b.source_bundle_id, v_b.row_count, v_b.bundle_hash)
    || ',"rows":[' || coalesce(string_agg(sync.committed_row_text(tc.row_json_prefix, tc.key_kind, c.key_bytes, c.op_code, c.bundle_seq, c.payload),
        ',' ORDER BY c.row_ordinal), '')
    || '],"next_row_ordinal":' || (p_after + count(c.row_ordinal))
    || ',"has_more":' || (p_after + count(c.row_ordinal) < v_b.row_count)::text || '}'
  FROM chosen c LEFT JOIN sync.table_catalog tc ON tc.table_id = c.table_id;
END
$fn$;

CREATE FUNCTION sync.rotate_source(p_user_pk bigint, p_header text, p_prev text, p_new text, p_reason text) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_prev sync.source_state;
  v_new sync.source_state;
BEGIN
  IF p_prev = p_new THEN
    RETURN sync.err('source_replacement_invalid', 'new_source_id must differ from previous_source_id');
  END IF;
  IF p_header <> p_prev AND p_header <> p_new THEN
    RETURN sync.err('source_replacement_invalid', 'Sync-Source-ID must name previous_source_id or new_source_id');
  END IF;
  -- Rotations of one user serialise with its commits, briefly.
  PERFORM 1 FROM sync.user_state WHERE user_pk = p_user_pk FOR UPDATE;
  SELECT * INTO v_prev FROM sync.source_state WHERE user_pk = p_user_pk AND source_id = p_prev;
  SELECT * INTO v_new FROM sync.source_state WHERE user_pk = p_user_pk AND source_id = p_new;
  IF v_new.source_id IS NOT NULL THEN
    IF v_prev.status = 'retired' AND v_prev.replaced_by_source_id = p_new THEN
      RETURN NULL;  -- the same rotation, retried
    END IF;
    RETURN sync.err('source_replacement_invalid', format('new_source_id %s is already in use', p_new));
  END IF;
  IF v_prev.source_id IS NULL THEN
    INSERT INTO sync.source_state (user_pk, source_id, status, last_source_bundle_id, replaced_by_source_id, created_at)
    VALUES (p_user_pk, p_prev, 'retired', 0, p_new, now());
  ELSIF v_prev.status = 'retired' AND p_reason = 'source_retired' THEN
    -- A device whose source another device retired (a cloned database) asks for a fresh one:
    -- the previous source stays retired, replaced by the first rotation; nothing else moves.
    NULL;
  ELSIF v_prev.status = 'retired' THEN
    RETURN sync.err('source_replacement_invalid', format('previous source %s is already retired (replaced by %s)',
      p_prev, v_prev.replaced_by_source_id));
  ELSE
    UPDATE sync.source_state SET status = 'retired', replaced_by_source_id = p_new
     WHERE user_pk = p_user_pk AND source_id = p_prev;
  END IF;
  INSERT INTO sync.source_state (user_pk, source_id, status, last_source_bundle_id, created_at)
  VALUES (p_user_pk, p_new, 'reserved', 0, now());
  RETURN NULL;
END
$fn$;

-- A frozen snapshot in ONE statement: every registered table, row_state and the user's latest
-- bundle_seq are read under the same statement snapshot, without locking the write path.
CREATE FUNCTION sync.snapshot_create(p_user text, p_source text, p_prev text, p_new text, p_reason text, p_ttl_seconds integer)
RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_us sync.user_state;
  v_err jsonb;
  v_id uuid := gen_random_uuid();
  v_union text;
  v_s sync.snapshot_sessions;
BEGIN
  SELECT * INTO v_us FROM sync.user_state WHERE user_id = p_user;
  IF NOT FOUND THEN
    RETURN sync.err('scope_uninitialized', 'the scope is not initialized; connect first');
  END IF;
  IF p_new IS NOT NULL THEN
    v_err := sync.rotate_source(v_us.user_pk, p_source, p_prev, p_new, p_reason);
  ELSE
    v_err := sync.check_source(v_us.user_pk, p_source, true);
  END IF;
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  v_err := sync.check_read_scope(v_us.user_pk);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  SELECT string_agg(snapshot_sql, ' UNION ALL ' ORDER BY table_id) INTO STRICT v_union FROM sync.table_catalog;
  EXECUTE format($q$
    WITH latest AS (SELECT latest_bundle_seq FROM sync.user_state WHERE user_pk = $3),
    src AS (%s),
    ins AS (
      INSERT INTO sync.snapshot_session_rows (snapshot_id, row_ordinal, table_id, key_bytes, row_version, payload)
      SELECT $2, (row_number() OVER (ORDER BY s.apply_order, s.table_id, s.key_bytes))::integer - 1,
             s.table_id, s.key_bytes, coalesce(rs.row_version, 0), s.payload
        FROM src s
        LEFT JOIN sync.row_state rs ON rs.user_pk = $3 AND rs.table_id = s.table_id AND rs.key_bytes = s.key_bytes
      RETURNING sync.row_bytes(payload, key_bytes) AS bytes)
    INSERT INTO sync.snapshot_sessions (snapshot_id, user_pk, source_id, snapshot_bundle_seq, row_count, byte_count, created_at, expires_at)
    SELECT $2, $3, $4, (SELECT latest_bundle_seq FROM latest), (SELECT count(*) FROM ins), (SELECT coalesce(sum(bytes), 0) FROM ins),
           now(), now() + make_interval(secs => $5)
  $q$, v_union) USING p_user, v_id, v_us.user_pk, coalesce(p_new, p_source), p_ttl_seconds;
  SELECT * INTO STRICT v_s FROM sync.snapshot_sessions WHERE snapshot_id = v_id;
  RETURN jsonb_build_object('snapshot_id', v_id, 'snapshot_bundle_seq', v_s.snapshot_bundle_seq, 'row_count', v_s.row_count,
    'byte_count', v_s.byte_count, 'expires_at', sync.rfc3339(v_s.expires_at));
END
$fn$;

CREATE FUNCTION sync.snapshot_page(p_user text, p_snapshot uuid, p_after bigint, p_max integer, p_budget bigint)
RETURNS TABLE (error jsonb, body text) LANGUAGE plpgsql AS $fn$
DECLARE
  v_s sync.snapshot_sessions;
BEGIN
  SELECT s.* INTO v_s FROM sync.snapshot_sessions s JOIN sync.user_state u ON u.user_pk = s.user_pk
   WHERE s.snapshot_id = p_snapshot AND u.user_id = p_user;
  IF NOT FOUND THEN
    RETURN QUERY SELECT sync.err('snapshot_session_not_found', format('snapshot session %s does not exist', p_snapshot)), NULL::text;
    RETURN;
  END IF;
  IF v_s.expires_at <= now() THEN
    RETURN QUERY SELECT sync.err('snapshot_session_expired', format('snapshot session %s expired', p_snapshot)), NULL::text;
    RETURN;
  END IF;
  RETURN QUERY
  WITH page AS (
    SELECT r.*, sum(sync.row_bytes(r.payload, r.key_bytes)) OVER (ORDER BY r.row_ordinal) AS cumulative
    -- Ordinals are dense, so the page is the range [p_after, p_after + p_max) of the primary key
    -- (snapshot_id, row_ordinal). The upper bound matters: a fresh session has no statistics, and
    -- with only a lower bound the planner chose a bitmap scan plus an on-disk sort of the whole
    -- remaining snapshot (100k rows) to return one page.
    FROM (SELECT * FROM sync.snapshot_session_rows WHERE snapshot_id = p_snapshot
            AND row_ordinal >= p_after AND row_ordinal < p_after + p_max
          ORDER BY row_ordinal) r
  ), chosen AS (
    SELECT page.* FROM page WHERE page.cumulative <= p_budget OR page.row_ordinal = p_after
  )
  -- JSON text by concatenation, never cast to json (see sync.pull).
  SELECT NULL::jsonb, '{"snapshot_id":"' || v_s.snapshot_id || '","snapshot_bundle_seq":' || v_s.snapshot_bundle_seq
    || ',"row_count":' || v_s.row_count
    || ',"rows":[' || coalesce(string_agg(sync.snapshot_row_text(tc.row_json_prefix, tc.key_kind, c.key_bytes, c.row_version, c.payload),
        ',' ORDER BY c.row_ordinal), '')
    || '],"next_row_ordinal":' || (p_after + count(c.row_ordinal))
    || ',"has_more":' || (p_after + count(c.row_ordinal) < v_s.row_count)::text || '}'
  FROM chosen c LEFT JOIN sync.table_catalog tc ON tc.table_id = c.table_id;
END
$fn$;

CREATE FUNCTION sync.snapshot_delete(p_user text, p_snapshot uuid) RETURNS jsonb LANGUAGE plpgsql AS $fn$
BEGIN
  DELETE FROM sync.snapshot_sessions s USING sync.user_state u
   WHERE s.snapshot_id = p_snapshot AND u.user_pk = s.user_pk AND u.user_id = p_user;
  IF NOT FOUND THEN
    RETURN sync.err('snapshot_session_not_found', format('snapshot session %s does not exist', p_snapshot));
  END IF;
  DELETE FROM sync.snapshot_session_rows WHERE snapshot_id = p_snapshot;
  RETURN jsonb_build_object('deleted', true);
END
$fn$;

-- One bounded step of maintenance; the caller loops while it reports more work.
CREATE FUNCTION sync.maintenance_step(p_batch integer) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_push_rows integer; v_push integer; v_snap_rows integer; v_snap integer; v_bundle_rows integer := 0; v_n integer;
  v_u record;
BEGIN
  DELETE FROM sync.push_session_rows WHERE ctid = ANY (ARRAY(
    SELECT r.ctid FROM sync.push_sessions s JOIN sync.push_session_rows r ON r.push_id = s.push_id
     WHERE s.expires_at <= now() LIMIT p_batch));
  GET DIAGNOSTICS v_push_rows = ROW_COUNT;
  DELETE FROM sync.push_sessions s WHERE s.push_id = ANY (ARRAY(
    SELECT push_id FROM sync.push_sessions WHERE expires_at <= now() ORDER BY expires_at LIMIT p_batch))
    AND NOT EXISTS (SELECT 1 FROM sync.push_session_rows r WHERE r.push_id = s.push_id);
  GET DIAGNOSTICS v_push = ROW_COUNT;
  DELETE FROM sync.snapshot_session_rows WHERE ctid = ANY (ARRAY(
    SELECT r.ctid FROM sync.snapshot_sessions s JOIN sync.snapshot_session_rows r ON r.snapshot_id = s.snapshot_id
     WHERE s.expires_at <= now() LIMIT p_batch));
  GET DIAGNOSTICS v_snap_rows = ROW_COUNT;
  DELETE FROM sync.snapshot_sessions s WHERE s.snapshot_id = ANY (ARRAY(
    SELECT snapshot_id FROM sync.snapshot_sessions WHERE expires_at <= now() ORDER BY expires_at LIMIT p_batch))
    AND NOT EXISTS (SELECT 1 FROM sync.snapshot_session_rows r WHERE r.snapshot_id = s.snapshot_id);
  GET DIAGNOSTICS v_snap = ROW_COUNT;
  FOR v_u IN SELECT user_pk, pruned_through, retained_floor FROM sync.user_state WHERE pruned_through < retained_floor LIMIT 10 LOOP
    DELETE FROM sync.bundle_rows WHERE ctid = ANY (ARRAY(
      SELECT ctid FROM sync.bundle_rows WHERE user_pk = v_u.user_pk AND bundle_seq > v_u.pruned_through
         AND bundle_seq <= v_u.retained_floor LIMIT p_batch));
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_bundle_rows := v_bundle_rows + v_n;
    IF v_n < p_batch THEN
      DELETE FROM sync.bundle_log WHERE user_pk = v_u.user_pk AND bundle_seq > v_u.pruned_through AND bundle_seq <= v_u.retained_floor;
      UPDATE sync.user_state SET pruned_through = v_u.retained_floor WHERE user_pk = v_u.user_pk;
    END IF;
  END LOOP;
  RETURN jsonb_build_object('push_session_rows', v_push_rows, 'push_sessions', v_push, 'snapshot_session_rows', v_snap_rows,
    'snapshot_sessions', v_snap, 'bundle_rows', v_bundle_rows,
    'more', v_push_rows + v_push + v_snap_rows + v_snap + v_bundle_rows > 0);
END
$fn$;
`;

/** All managed functions, in creation order (later ones call earlier ones). */
export const LAYOUT_FUNCTIONS_SQL = [HELPERS, GUARD, CONNECT, PUSH, READ].join('\n');
