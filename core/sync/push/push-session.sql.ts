/**
 * Push sessions: create, chunk upload, delete, and the request hash over the staged rows.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * Opens a staging session. `p_form` is the protocol whose json form the client sends (1 or 2,
 * docs/protocol.md §4.2): its chunks must use the same, and the request hash is computed on it.
 */
export const pushCreateSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.push_create(p_user text, p_source text, p_source_bundle_id bigint, p_planned integer,
  p_init uuid, p_request_hash text, p_ttl_seconds integer, p_max_open integer DEFAULT 64, p_reap_seconds integer DEFAULT 300,
  p_form smallint DEFAULT 1) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_user text := sync.ensure_user(p_user);
  v_err jsonb;
  v_last bigint;
  v_bundle sync.bundle_log;
  v_id uuid := gen_random_uuid();
  v_expires timestamptz := now() + make_interval(secs => p_ttl_seconds);
BEGIN
  v_err := sync.check_source(v_user, p_source, true);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  SELECT * INTO v_bundle FROM sync.bundle_log
   WHERE user_id = v_user AND source_id = p_source AND source_bundle_id = p_source_bundle_id;
  IF FOUND THEN
    IF p_request_hash IS NOT NULL THEN
      IF v_bundle.request_hash IS NOT NULL AND v_bundle.request_hash <> p_request_hash THEN
        RETURN sync.err('push_request_mismatch', format(
          'source bundle %s of source %s was committed with a different request_hash', p_source_bundle_id, p_source));
      END IF;
      RETURN jsonb_build_object('status', 'already_committed') || sync.bundle_answer(v_user, v_bundle.bundle_seq);
    END IF;
    -- Without a hash nobody can tell these rows from other rows under the same id, and answering
    -- "already committed" would make a client drop rows that were never applied. A staging
    -- session takes the rows; commit compares them with the committed ones (push_commit).
  ELSE
    SELECT last_source_bundle_id INTO STRICT v_last FROM sync.source_state WHERE user_id = v_user AND source_id = p_source;
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
  END IF;
  v_err := sync.check_push_scope(v_user, p_source, p_init);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  -- One more open session, unless the user is at max_open_push_sessions_per_user: one row read
  -- and written, whatever the number of sessions.
  INSERT INTO sync.user_quota AS q (user_id, open_push_sessions, open_snapshot_sessions, staged_bytes) VALUES (v_user, 1, 0, 0)
  ON CONFLICT (user_id) DO UPDATE SET open_push_sessions = q.open_push_sessions + 1 WHERE q.open_push_sessions < p_max_open;
  IF NOT FOUND THEN
    RETURN sync.rate_limited(v_user, 'push', 'max_open_push_sessions_per_user', p_max_open, p_reap_seconds);
  END IF;
  INSERT INTO sync.push_sessions (push_id, user_id, source_id, source_bundle_id, planned_row_count, next_row_ordinal,
    status, request_hash, initialization_id, byte_count, created_at, expires_at, json_form)
  VALUES (v_id, v_user, p_source, p_source_bundle_id, p_planned, 0, 'staging', p_request_hash, p_init, 0, now(), v_expires, p_form);
  RETURN jsonb_build_object('push_id', v_id, 'status', 'staging', 'planned_row_count', p_planned,
    'next_expected_row_ordinal', 0, 'expires_at', sync.rfc3339(v_expires));
END
$fn$
`);

/**
 * p_rows: [{t: table_id, k: key text, o: op_code, b: base_row_version, p: payload}], validated
 * by the edge against the catalog before it gets here, in the json form of protocol `p_form`
 * (the session's). Rows are staged in one form whatever the client sent: json values as protocol
 * 2's strings, so the upsert reads one form; the request hash is computed on the session's form.
 * p_text (layout 28 on): the chunk's rows as the request hash covers them, their RFC 8785 texts
 * joined by commas, which the edge rendered from the rows it validated. It is kept with the
 * chunk's first row and counted in the session's text_rows, so the commit hashes these texts
 * instead of rendering every staged row again (sync.push_request_hash). A chunk without it (a
 * build before layout 28) leaves the count short, and the commit renders the rows.
 */
export const pushChunkSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.push_chunk(p_user text, p_source text, p_push uuid, p_start integer, p_rows jsonb,
  p_bytes bigint, p_digest text, p_max_bundle_bytes bigint, p_max_staged bigint DEFAULT 268435456, p_reap_seconds integer DEFAULT 300,
  p_form smallint DEFAULT 1, p_text text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_ps sync.push_sessions;
  v_n integer := jsonb_array_length(p_rows);
BEGIN
  SELECT s.* INTO v_ps FROM sync.push_sessions s
   WHERE s.user_id = p_user AND s.push_id = p_push AND s.source_id = p_source FOR UPDATE OF s;
  IF NOT FOUND THEN
    RETURN sync.err('push_session_not_found', format('push session %s does not exist', p_push));
  END IF;
  -- Re-sending the chunk that was accepted last is idempotent.
  IF v_ps.last_chunk_start = p_start AND v_ps.last_chunk_digest = p_digest AND v_ps.next_row_ordinal = p_start + v_n THEN
    RETURN jsonb_build_object('push_id', p_push, 'next_expected_row_ordinal', v_ps.next_row_ordinal);
  END IF;
  IF v_ps.json_form <> p_form THEN
    RETURN sync.err('invalid_request', format('push session %s was opened with Sync-Protocol-Version %s; send its chunks with the same',
      p_push, v_ps.json_form));
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
    -- The user's staged bytes, checked and counted before anything is staged (the block undoes
    -- the count if staging fails).
    UPDATE sync.user_quota SET staged_bytes = staged_bytes + p_bytes WHERE user_id = v_ps.user_id AND staged_bytes + p_bytes <= p_max_staged;
    IF NOT FOUND THEN
      RETURN sync.rate_limited(v_ps.user_id, 'push', 'max_staged_bytes_per_user', p_max_staged, p_reap_seconds);
    END IF;
    INSERT INTO sync.push_session_rows (user_id, push_id, row_ordinal, table_id, key_bytes, op_code, base_row_version, payload, request_text)
    -- The key's bytes as sync.key_bytes computes them, written out: that function is never inlined
    -- (IMMUTABLE, but convert_to is STABLE), and its call cost ~1.8 µs a row.
    SELECT v_ps.user_id, p_push, p_start + (e.ord - 1)::integer, c.table_id,
           CASE WHEN c.key_kind = 'uuid' THEN uuid_send((e.r->>'k')::uuid) ELSE convert_to(e.r->>'k', 'UTF8') END,
           (e.r->>'o')::smallint, (e.r->>'b')::bigint,
           -- Only tables with a json column: the call is not inlined, and costs ~6 µs a row even when it changes nothing.
           CASE WHEN p_form = 1 AND c.json_columns IS NOT NULL THEN sync.json_payload_form(nullif(e.r->'p', 'null'::jsonb), c.json_columns, 2::smallint)
                ELSE nullif(e.r->'p', 'null'::jsonb) END,
           CASE WHEN e.ord = 1 THEN p_text END
      FROM jsonb_array_elements(p_rows) WITH ORDINALITY e(r, ord)
      JOIN sync.table_catalog c ON c.table_id = (e.r->>'t')::smallint;
  EXCEPTION WHEN unique_violation THEN
    RETURN sync.err('invalid_request', 'a key appears more than once in the bundle; send one row per key');
  END;
  UPDATE sync.push_sessions SET next_row_ordinal = p_start + v_n, byte_count = byte_count + p_bytes,
    last_chunk_start = p_start, last_chunk_digest = p_digest, text_rows = text_rows + CASE WHEN p_text IS NULL THEN 0 ELSE v_n END
   WHERE user_id = v_ps.user_id AND push_id = p_push;
  RETURN jsonb_build_object('push_id', p_push, 'next_expected_row_ordinal', p_start + v_n);
END
$fn$
`);

export const pushDeleteSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.push_delete(p_user text, p_source text, p_push uuid) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_ps sync.push_sessions;
BEGIN
  SELECT s.* INTO v_ps FROM sync.push_sessions s
   WHERE s.user_id = p_user AND s.push_id = p_push AND s.source_id = p_source FOR UPDATE OF s;
  IF NOT FOUND THEN
    RETURN sync.err('push_session_not_found', format('push session %s does not exist', p_push));
  END IF;
  DELETE FROM sync.push_session_rows WHERE user_id = v_ps.user_id AND push_id = p_push;
  -- A committed session stays until it expires so a retried commit still gets its answer.
  IF v_ps.status = 'staging' THEN
    DELETE FROM sync.push_sessions WHERE user_id = v_ps.user_id AND push_id = p_push;
    UPDATE sync.user_quota SET open_push_sessions = open_push_sessions - 1, staged_bytes = staged_bytes - v_ps.byte_count
     WHERE user_id = v_ps.user_id;
  END IF;
  RETURN jsonb_build_object('deleted', true);
END
$fn$
`);

/**
 * The request hash the client computed: RFC 8785 over the pushed rows in ordinal order. When every
 * staged row came with its chunk's text (text_rows: layout 28's push_chunk), the hash is over
 * those texts; otherwise over the rows rendered again (sync.push_request_rows_hash).
 */
export const pushRequestHashSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.push_request_hash(p_user text, p_push uuid) RETURNS text LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  v_text_rows integer;
  v_staged integer;
  v_text text;
BEGIN
  SELECT text_rows, next_row_ordinal INTO v_text_rows, v_staged FROM sync.push_sessions WHERE user_id = p_user AND push_id = p_push;
  -- Staged rows are contiguous from ordinal 0, so next_row_ordinal counts them.
  IF v_text_rows > 0 AND v_text_rows = v_staged THEN
    SELECT string_agg(r.request_text, ',' ORDER BY r.row_ordinal) INTO v_text FROM sync.push_session_rows r
     WHERE r.user_id = p_user AND r.push_id = p_push AND r.request_text IS NOT NULL;
    RETURN encode(sha256(convert_to('[' || coalesce(v_text, '') || ']', 'UTF8')), 'hex');
  END IF;
  RETURN sync.push_request_rows_hash(p_user, p_push);
END
$fn$
`);

/**
 * The request hash rendered from the staged rows: each table's canonical row text comes from SQL
 * generated at bootstrap (table_catalog.request_rows_sql).
 */
export const pushRequestRowsHashSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.push_request_rows_hash(p_user text, p_push uuid) RETURNS text LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  v_union text;
  v_text text;
BEGIN
  SELECT string_agg(c.request_rows_sql, ' UNION ALL ' ORDER BY c.table_id) INTO v_union
    FROM sync.table_catalog c
   WHERE c.table_id IN (SELECT DISTINCT table_id FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push);
  IF v_union IS NULL THEN
    RETURN encode(sha256(convert_to('[]', 'UTF8')), 'hex');
  END IF;
  EXECUTE 'SELECT string_agg(t, '','' ORDER BY o) FROM (' || v_union || ') x' INTO v_text USING p_push, p_user;
  RETURN encode(sha256(convert_to('[' || coalesce(v_text, '') || ']', 'UTF8')), 'hex');
END
$fn$
`);
