/**
 * Snapshot sessions (frozen, chunked copies of a user's rows) and source rotation.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

export const snapshotRowTextSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_row_text(p_prefix text, p_kind text, p_key_bytes bytea, p_version bigint, p_payload jsonb)
RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT p_prefix || to_json(CASE WHEN p_kind = 'uuid' THEN encode(p_key_bytes, 'hex')::uuid::text ELSE convert_from(p_key_bytes, 'UTF8') END)::text
    || '},"row_version":' || p_version || ',"payload":' || p_payload::text || '}'
$fn$
`);

export const rotateSourceSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.rotate_source(p_user_pk bigint, p_header text, p_prev text, p_new text, p_reason text) RETURNS jsonb
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
$fn$
`);

/**
 * A frozen snapshot in ONE statement: every registered table, row_state and the user's latest
 * bundle_seq are read under the same statement snapshot, without locking the write path. Each
 * row is stored rendered (its page text) with its size on the wire, so pages only concatenate.
 * The sort by key (the order a client writes fastest) stays in memory: work_mem is raised for
 * this function alone (a function's SET clause is undone when it returns, pooler-safe). Rows are
 * rendered in protocol `p_form`'s json form (table_catalog.snapshot_v1_sql for protocol 1), which
 * the session keeps: its pages are served in that form only.
 */
export const snapshotCreateSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_create(p_user text, p_source text, p_prev text, p_new text, p_reason text, p_ttl_seconds integer,
  p_max_open integer DEFAULT 8, p_reap_seconds integer DEFAULT 300, p_form smallint DEFAULT 1)
RETURNS jsonb LANGUAGE plpgsql SET work_mem = '64MB' AS $fn$
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
  -- Before any row is copied: one more open snapshot, unless the user is at
  -- max_open_snapshot_sessions_per_user. (A rotation above stays: retried, it is idempotent.)
  INSERT INTO sync.user_quota AS q (user_pk, open_push_sessions, open_snapshot_sessions, staged_bytes) VALUES (v_us.user_pk, 0, 1, 0)
  ON CONFLICT (user_pk) DO UPDATE SET open_snapshot_sessions = q.open_snapshot_sessions + 1 WHERE q.open_snapshot_sessions < p_max_open;
  IF NOT FOUND THEN
    RETURN sync.rate_limited(v_us.user_pk, 'snapshot', 'max_open_snapshot_sessions_per_user', p_max_open, p_reap_seconds);
  END IF;
  SELECT string_agg(CASE WHEN p_form = 1 THEN coalesce(snapshot_v1_sql, snapshot_sql) ELSE snapshot_sql END, ' UNION ALL ' ORDER BY table_id)
    INTO STRICT v_union FROM sync.table_catalog WHERE NOT retired;
  EXECUTE format($q$
    WITH latest AS (SELECT latest_bundle_seq FROM sync.user_state WHERE user_pk = $3),
    src AS (%s),
    ins AS (
      INSERT INTO sync.snapshot_session_rows (snapshot_id, row_ordinal, table_id, key_bytes, row_version, row_text, wire_bytes)
      SELECT $2, x.ordinal, x.table_id, x.key_bytes, x.row_version, x.row_text, sync.wire_bytes(x.row_text)
      FROM (SELECT (row_number() OVER (ORDER BY s.apply_order, s.table_id, s.key_bytes))::integer - 1 AS ordinal,
                   s.table_id, s.key_bytes, coalesce(rs.row_version, 0) AS row_version,
                   tc.row_json_prefix || s.key_json || '},"row_version":' || coalesce(rs.row_version, 0) || ',"payload":' || s.payload_text
                     || '}' AS row_text
              FROM src s
              JOIN sync.table_catalog tc ON tc.table_id = s.table_id
              LEFT JOIN sync.row_state rs ON rs.user_pk = $3 AND rs.table_id = s.table_id AND rs.key_bytes = s.key_bytes) x
      RETURNING wire_bytes)
    INSERT INTO sync.snapshot_sessions (snapshot_id, user_pk, source_id, snapshot_bundle_seq, row_count, byte_count, created_at, expires_at, json_form)
    SELECT $2, $3, $4, (SELECT latest_bundle_seq FROM latest), (SELECT count(*) FROM ins), (SELECT coalesce(sum(wire_bytes + 1), 0) FROM ins),
           now(), now() + make_interval(secs => $5), $6
  $q$, v_union) USING p_user, v_id, v_us.user_pk, coalesce(p_new, p_source), p_ttl_seconds, p_form;
  SELECT * INTO STRICT v_s FROM sync.snapshot_sessions WHERE snapshot_id = v_id;
  RETURN jsonb_build_object('snapshot_id', v_id, 'snapshot_bundle_seq', v_s.snapshot_bundle_seq, 'row_count', v_s.row_count,
    'byte_count', v_s.byte_count, 'expires_at', sync.rfc3339(v_s.expires_at));
END
$fn$
`);

/**
 * A page of a snapshot session, in the json form it was created in. A client asking for another
 * form (it was upgraded while hydrating) is told the session expired, so it starts a new one,
 * unless no registered table has a json column (then both forms are the same rows).
 */
export const snapshotPageSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_page(p_user text, p_snapshot uuid, p_after bigint, p_max integer, p_budget bigint,
  p_form smallint DEFAULT 1)
RETURNS TABLE (error jsonb, body text) LANGUAGE plpgsql AS $fn$
DECLARE
  v_s sync.snapshot_sessions;
  v_envelope integer;
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
  IF v_s.json_form <> p_form AND EXISTS (SELECT 1 FROM sync.table_catalog WHERE json_columns IS NOT NULL AND NOT retired) THEN
    RETURN QUERY SELECT sync.err('snapshot_session_expired', format(
      'snapshot session %s was rendered for Sync-Protocol-Version %s; create a new one', p_snapshot, v_s.json_form)), NULL::text;
    RETURN;
  END IF;
  -- Budgets are in escaped bytes (sync.wire_bytes): each row its stored size plus a comma (rows
  -- of sessions created before layout 5 are measured here), plus the page's own envelope.
  v_envelope := sync.wire_bytes('{"snapshot_id":"' || v_s.snapshot_id || '","snapshot_bundle_seq":' || v_s.snapshot_bundle_seq
    || ',"row_count":' || v_s.row_count || ',"rows":[],"next_row_ordinal":' || (p_after + p_max) || ',"has_more":false}');
  RETURN QUERY
  WITH page AS (
    SELECT r.row_ordinal, r.row_text, r.table_id, r.key_bytes, r.row_version, r.payload,
           sum(coalesce(r.wire_bytes, sync.wire_bytes(sync.snapshot_row_text(tc.row_json_prefix, tc.key_kind, r.key_bytes, r.row_version,
             r.payload))) + 1) OVER (ORDER BY r.row_ordinal) + v_envelope AS cumulative
    -- Ordinals are dense, so the page is the range [p_after, p_after + p_max) of the primary key
    -- (snapshot_id, row_ordinal). The upper bound matters: a fresh session has no statistics, and
    -- with only a lower bound the planner chose a bitmap scan plus an on-disk sort of the whole
    -- remaining snapshot (100k rows) to return one page.
    FROM (SELECT * FROM sync.snapshot_session_rows WHERE snapshot_id = p_snapshot
            AND row_ordinal >= p_after AND row_ordinal < p_after + p_max
          ORDER BY row_ordinal) r
    JOIN sync.table_catalog tc ON tc.table_id = r.table_id
  ), chosen AS (
    SELECT page.* FROM page WHERE page.cumulative <= p_budget OR page.row_ordinal = p_after
  )
  -- JSON text by concatenation of the rows rendered at create, never cast to json (see sync.pull).
  SELECT NULL::jsonb, '{"snapshot_id":"' || v_s.snapshot_id || '","snapshot_bundle_seq":' || v_s.snapshot_bundle_seq
    || ',"row_count":' || v_s.row_count
    || ',"rows":[' || coalesce(string_agg(coalesce(c.row_text, (SELECT sync.snapshot_row_text(tc.row_json_prefix, tc.key_kind, c.key_bytes,
         c.row_version, c.payload) FROM sync.table_catalog tc WHERE tc.table_id = c.table_id)), ',' ORDER BY c.row_ordinal), '')
    || '],"next_row_ordinal":' || (p_after + count(c.row_ordinal))
    || ',"has_more":' || (p_after + count(c.row_ordinal) < v_s.row_count)::text || '}'
  FROM chosen c;
END
$fn$
`);

export const snapshotDeleteSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_delete(p_user text, p_snapshot uuid) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_user_pk bigint;
BEGIN
  DELETE FROM sync.snapshot_sessions s USING sync.user_state u
   WHERE s.snapshot_id = p_snapshot AND u.user_pk = s.user_pk AND u.user_id = p_user
  RETURNING s.user_pk INTO v_user_pk;
  IF NOT FOUND THEN
    RETURN sync.err('snapshot_session_not_found', format('snapshot session %s does not exist', p_snapshot));
  END IF;
  DELETE FROM sync.snapshot_session_rows WHERE snapshot_id = p_snapshot;
  UPDATE sync.user_quota SET open_snapshot_sessions = open_snapshot_sessions - 1 WHERE user_pk = v_user_pk;
  RETURN jsonb_build_object('deleted', true);
END
$fn$
`);
