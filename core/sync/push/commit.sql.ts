/**
 * Commit: optimistic concurrency, the business upsert and delete under deferred constraints, and
 * the captured changes turned into one committed bundle.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * A committed bundle's summary. `bundle_hash` is over its rows in protocol 1's form;
 * `bundle_hash_v2`, present when a json value makes protocol 2's rows differ, over those. The
 * edge answers each client the one of its protocol (core/sync/wire-form.ts).
 */
export const bundleAnswerSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.bundle_answer(p_user text, p_seq bigint) RETURNS jsonb LANGUAGE sql STABLE AS $fn$
  SELECT jsonb_build_object('bundle_seq', b.bundle_seq, 'source_id', b.source_id,
    'source_bundle_id', b.source_bundle_id, 'row_count', b.row_count, 'bundle_hash', b.bundle_hash)
    || CASE WHEN b.bundle_hash_v2 IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('bundle_hash_v2', b.bundle_hash_v2) END
  FROM sync.bundle_log b WHERE b.user_id = p_user AND b.bundle_seq = p_seq
$fn$
`);

/**
 * Turns this transaction's captured changes into committed bundle p_seq: coalesce per key in
 * capture order, classify against row_state, write bundle_rows/row_state/bundle_log, hash.
 * Each committed row is stored with its rendered pull text and its size on the wire (escaped as
 * Lambda counts it, sync.wire_bytes), so reads concatenate and budget without rendering; a row
 * larger than p_max_row_bytes could never be served, so the whole statement fails with SQLSTATE
 * LS413 and the row's schema, table and key as JSON in DETAIL (the callers answer 413
 * payload_too_large naming the row; nothing is committed). Rows are stored in protocol 2's form
 * (json_form 2); the bundle is hashed in both forms, protocol 2's kept only when it differs (a
 * json value in the bundle).
 */
export const finalizeBundleSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.finalize_bundle(p_user text, p_seq bigint, p_source text, p_source_bundle_id bigint,
  p_request_hash text, p_retained integer, p_max_row_bytes bigint DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_xact bigint := txid_current();
  v_count integer;
  v_bytes bigint;
  v_wire bigint;
  v_max_row bigint;
  v_hash text;
  v_hash_v2 text;
  v_union text;
  v_text text;
  v_text_v2 text;
  v_differs boolean;
  v_json boolean;
  v_big record;
BEGIN
  -- One statement writes the bundle's rows and their row versions from one pass over the capture.
  -- row_state is written per key by what the probe found: keys it never held by a plain INSERT,
  -- the others by the upsert. The caller holds the user's state row (FOR UPDATE), so no other
  -- transaction writes this user's row_state meanwhile; an upsert of every key cost twice a plain
  -- insert of new ones (10k new keys: 55 → 25 ms).
  WITH y AS MATERIALIZED (
    SELECT (row_number() OVER (ORDER BY x.first_id))::integer - 1 AS ordinal, x.table_id, x.key_bytes, x.op_code, x.payload, x.known,
           tc.row_json_prefix, tc.key_kind
    FROM (
      SELECT f.table_id, f.key_bytes, f.first_id, f.payload, rs.deleted IS NOT NULL AS known,
             CASE WHEN f.deleted THEN CASE WHEN rs.deleted IS FALSE THEN 3 END
                  WHEN rs.deleted IS FALSE THEN 2 ELSE 1 END::smallint AS op_code
      FROM (
        SELECT DISTINCT ON (cr.table_id, cr.key_bytes) cr.table_id, cr.key_bytes, cr.deleted, cr.payload,
               min(cr.capture_id) OVER (PARTITION BY cr.table_id, cr.key_bytes) AS first_id
        FROM sync.capture_rows cr WHERE cr.user_id = p_user AND cr.xact = v_xact
        ORDER BY cr.table_id, cr.key_bytes, cr.capture_id DESC
      ) f
      -- A probe of row_state's primary key per captured row: OFFSET 0 keeps the subquery from being
      -- flattened into a join the planner could turn into a scan of all the user's row state once
      -- statistics exist. The work is the bundle's, never the user's history.
      LEFT JOIN LATERAL (
        SELECT r.deleted FROM sync.row_state r
         WHERE r.user_id = p_user AND r.table_id = f.table_id AND r.key_bytes = f.key_bytes OFFSET 0
      ) rs ON true
    ) x JOIN sync.table_catalog tc ON tc.table_id = x.table_id
    WHERE x.op_code IS NOT NULL
  ), ins AS (
    INSERT INTO sync.bundle_rows (user_id, bundle_seq, row_ordinal, table_id, key_bytes, op_code, payload, row_text, wire_bytes)
    SELECT p_user, p_seq, z.ordinal, z.table_id, z.key_bytes, z.op_code, z.payload, z.row_text, sync.wire_bytes(z.row_text)
      -- Rendered here, not in y: the texts would double what y holds in memory. OFFSET 0 renders
      -- each row once (flattened, the text would be rendered again for its size).
      FROM (SELECT y.*, sync.committed_row_text(y.row_json_prefix, y.key_kind, y.key_bytes, y.op_code, p_seq, y.payload) AS row_text
              FROM y OFFSET 0) z
    RETURNING wire_bytes
  ), fresh AS (
    INSERT INTO sync.row_state (user_id, table_id, key_bytes, row_version, deleted)
    SELECT p_user, y.table_id, y.key_bytes, p_seq, y.op_code = 3 FROM y WHERE NOT y.known
  ), known AS (
    INSERT INTO sync.row_state AS rs (user_id, table_id, key_bytes, row_version, deleted)
    SELECT p_user, y.table_id, y.key_bytes, p_seq, y.op_code = 3 FROM y WHERE y.known
    ON CONFLICT (user_id, table_id, key_bytes) DO UPDATE SET row_version = EXCLUDED.row_version, deleted = EXCLUDED.deleted
  )
  SELECT count(*), coalesce(sum(wire_bytes + 1), 0), coalesce(max(wire_bytes), 0) INTO v_count, v_wire, v_max_row FROM ins;
  IF v_max_row > coalesce(p_max_row_bytes, 4191232) THEN
    SELECT c.schema_name, c.table_name, c.key_column, sync.key_text(c.key_kind, b.key_bytes) AS key, b.wire_bytes INTO v_big
      FROM sync.bundle_rows b JOIN sync.table_catalog c ON c.table_id = b.table_id
     WHERE b.user_id = p_user AND b.bundle_seq = p_seq ORDER BY b.wire_bytes DESC LIMIT 1;
    -- DETAIL names the row, so the client can set that row aside and push the rest.
    RAISE EXCEPTION 'row %.% %=% would be % bytes on the wire, over the % bytes a response can carry',
      v_big.schema_name, v_big.table_name, v_big.key_column, v_big.key, v_big.wire_bytes, coalesce(p_max_row_bytes, 4191232)
      USING ERRCODE = 'LS413', DETAIL = jsonb_build_object('schema', v_big.schema_name, 'table', v_big.table_name,
        'key', jsonb_build_object(v_big.key_column, v_big.key))::text;
  END IF;
  DELETE FROM sync.capture_rows WHERE user_id = p_user AND xact = v_xact;

  -- bundle_hash: RFC 8785 text of each committed row from SQL generated per table at bootstrap
  -- (keys pre-sorted, value types known), so hashing is concatenation, not JSON walking.
  SELECT string_agg(c.hash_rows_sql, ' UNION ALL ' ORDER BY c.table_id), bool_or(c.json_columns IS NOT NULL) INTO v_union, v_json
    FROM sync.table_catalog c
   WHERE c.table_id IN (SELECT DISTINCT table_id FROM sync.bundle_rows WHERE user_id = p_user AND bundle_seq = p_seq);
  IF v_union IS NOT NULL THEN
    -- OFFSET 0: a bundle of one table would otherwise be flattened into the aggregates, and the
    -- row text computed once per aggregate that reads it. Protocol 2's text (t2) exists only for
    -- tables with a json column; for the others its aggregates would be a second sort of t.
    EXECUTE 'SELECT string_agg(t, '','' ORDER BY o), sum(octet_length(t)), '
      || CASE WHEN v_json THEN 'string_agg(coalesce(t2, t), '','' ORDER BY o), coalesce(bool_or(t2 <> t), false)' ELSE 'NULL::text, false' END
      || ' FROM (SELECT * FROM (' || v_union || ') u OFFSET 0) x'
      INTO v_text, v_bytes, v_text_v2, v_differs USING p_user, p_seq;
  END IF;
  v_hash := encode(sha256(convert_to('[' || coalesce(v_text, '') || ']', 'UTF8')), 'hex');
  IF v_differs THEN
    v_hash_v2 := encode(sha256(convert_to('[' || v_text_v2 || ']', 'UTF8')), 'hex');
  END IF;
  -- The canonical text is a close estimate of each row's JSON size on the wire.
  v_bytes := coalesce(v_bytes, 0) + 64 * v_count;

  INSERT INTO sync.bundle_log (user_id, bundle_seq, source_id, source_bundle_id, row_count, byte_count, bundle_hash,
    request_hash, committed_at, wire_bytes, json_form, bundle_hash_v2)
  VALUES (p_user, p_seq, p_source, p_source_bundle_id, v_count, v_bytes, v_hash, p_request_hash, now(), v_wire, 2, v_hash_v2);
  UPDATE sync.user_state SET latest_bundle_seq = p_seq,
    retained_floor = greatest(retained_floor, p_seq - p_retained) WHERE user_id = p_user;
  UPDATE sync.source_state SET last_source_bundle_id = p_source_bundle_id, status = 'active'
   WHERE user_id = p_user AND source_id = p_source;
  DELETE FROM sync.bundle_context WHERE user_id = p_user AND xact = txid_current();
  -- Counted by this transaction: a bundle whose transaction dies after this point is not counted.
  PERFORM sync.count(p_user, 'bundles_committed', 1);
  RETURN jsonb_build_object('bundle_seq', p_seq, 'source_id', p_source, 'source_bundle_id', p_source_bundle_id,
    'row_count', v_count, 'bundle_hash', v_hash)
    || CASE WHEN v_hash_v2 IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('bundle_hash_v2', v_hash_v2) END;
END
$fn$
`);

export const pushCommitSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.push_commit(p_user text, p_source text, p_push uuid, p_max_conflicts integer, p_retained integer,
  p_max_row_bytes bigint DEFAULT NULL)
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
  v_delete_tables smallint[];
  v_hash text;
  v_result jsonb;
  v_state text; v_msg text; v_detail text; v_constraint text; v_schema text; v_table text; v_column text;
  -- The table whose statement is running: a data exception (22xxx) names none, this does.
  v_running smallint;
BEGIN
  SELECT s.* INTO v_ps FROM sync.push_sessions s
   WHERE s.user_id = p_user AND s.push_id = p_push AND s.source_id = p_source FOR UPDATE OF s;
  IF NOT FOUND THEN
    RETURN sync.err('push_session_not_found', format('push session %s does not exist', p_push));
  END IF;
  IF v_ps.status = 'committed' THEN
    RETURN jsonb_build_object('status', 'committed') || sync.bundle_answer(v_ps.user_id, v_ps.bundle_seq);
  END IF;
  -- A rejected session answers its rejection again, as sync.note_outcome remembered it.
  IF v_ps.status = 'rejected' THEN
    RETURN v_ps.rejection || jsonb_build_object('remembered', true);
  END IF;
  IF v_ps.expires_at <= now() THEN
    RETURN sync.err('push_session_expired', format('push session %s expired', p_push));
  END IF;
  IF v_ps.next_row_ordinal < v_ps.planned_row_count THEN
    RETURN sync.err('push_incomplete', format('%s of %s planned rows were uploaded', v_ps.next_row_ordinal,
      v_ps.planned_row_count), jsonb_build_object('next_expected_row_ordinal', v_ps.next_row_ordinal));
  END IF;

  -- Serialise this user's commits on the user's state row; other users never wait.
  SELECT * INTO STRICT v_us FROM sync.user_state WHERE user_id = v_ps.user_id FOR UPDATE;

  SELECT bundle_seq INTO v_existing FROM sync.bundle_log
   WHERE user_id = v_ps.user_id AND source_id = v_ps.source_id AND source_bundle_id = v_ps.source_bundle_id;
  IF FOUND THEN
    -- Another session of the same (source, source_bundle_id) committed first. Unless this
    -- session's rows are the committed ones, they were never applied: answering "committed"
    -- would make the client drop them, so it is the mismatch push-session create reports. The
    -- rows are compared by their request hash, computed here from what was staged (a client
    -- may have sent none); a bundle committed without a stored hash cannot be matched.
    v_hash := sync.push_request_hash(p_user, p_push);
    IF v_ps.request_hash IS NOT NULL AND v_ps.request_hash <> v_hash THEN
      RETURN sync.err('invalid_request', 'request_hash does not match the uploaded rows (RFC 8785 + SHA-256 of the pushed rows)');
    END IF;
    IF (SELECT request_hash FROM sync.bundle_log WHERE user_id = v_ps.user_id AND bundle_seq = v_existing) IS DISTINCT FROM v_hash THEN
      RETURN sync.err('push_request_mismatch', format(
        'source bundle %s of source %s was committed by another session with other rows',
        v_ps.source_bundle_id, v_ps.source_id));
    END IF;
    UPDATE sync.push_sessions SET status = 'committed', bundle_seq = v_existing WHERE user_id = p_user AND push_id = p_push;
    DELETE FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push;
    UPDATE sync.user_quota SET open_push_sessions = open_push_sessions - 1, staged_bytes = staged_bytes - v_ps.byte_count
     WHERE user_id = v_ps.user_id;
    RETURN jsonb_build_object('status', 'committed') || sync.bundle_answer(v_ps.user_id, v_existing);
  END IF;
  v_err := sync.check_source(v_ps.user_id, v_ps.source_id, true);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  IF v_ps.source_bundle_id <> (SELECT last_source_bundle_id + 1 FROM sync.source_state
                                 WHERE user_id = v_ps.user_id AND source_id = v_ps.source_id) THEN
    RETURN sync.err('source_sequence_out_of_order', format(
      'source bundle %s of source %s is no longer the next one to commit', v_ps.source_bundle_id, v_ps.source_id));
  END IF;
  v_err := sync.check_push_scope(v_ps.user_id, v_ps.source_id, v_ps.initialization_id);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  -- The hash of the staged rows is stored with the bundle even when the client sent none, so a
  -- later session of the same (source, source_bundle_id) is compared by its rows, never trusted.
  v_hash := sync.push_request_hash(p_user, p_push);
  IF v_ps.request_hash IS NOT NULL AND v_ps.request_hash <> v_hash THEN
    RETURN sync.err('invalid_request', 'request_hash does not match the uploaded rows (RFC 8785 + SHA-256 of the pushed rows)');
  END IF;

  -- Optimistic concurrency: every base_row_version must equal the server's version (0 = never
  -- seen). Each staged row probes row_state's primary key (a correlated subquery is never turned
  -- into a join), so the check costs the bundle's size whatever the user's history.
  SELECT count(*) INTO v_conflict_count FROM sync.push_session_rows p
   WHERE p.user_id = p_user AND p.push_id = p_push AND p.base_row_version <> coalesce((SELECT r.row_version FROM sync.row_state r
           WHERE r.user_id = v_ps.user_id AND r.table_id = p.table_id AND r.key_bytes = p.key_bytes), 0);
  IF v_conflict_count > 0 THEN
    FOR v_row IN
      SELECT p.row_ordinal, p.key_bytes, p.op_code, p.base_row_version, rs.row_version AS server_version,
             rs.deleted AS server_deleted, c.schema_name, c.table_name, c.key_column, c.key_kind, c.lookup_sql, c.json_columns
        FROM sync.push_session_rows p
        JOIN sync.table_catalog c ON c.table_id = p.table_id
        LEFT JOIN LATERAL (
          SELECT r.row_version, r.deleted FROM sync.row_state r
           WHERE r.user_id = v_ps.user_id AND r.table_id = p.table_id AND r.key_bytes = p.key_bytes OFFSET 0
        ) rs ON true
       WHERE p.user_id = p_user AND p.push_id = p_push AND p.base_row_version <> coalesce(rs.row_version, 0)
       ORDER BY p.row_ordinal LIMIT p_max_conflicts
    LOOP
      v_server_row := NULL;
      IF v_row.server_deleted IS FALSE THEN
        EXECUTE v_row.lookup_sql INTO v_server_row USING p_user, v_row.key_bytes;
        -- lookup_sql renders protocol 2's form; a protocol 1 session's client gets the values.
        IF v_ps.json_form = 1 THEN
          v_server_row := sync.json_payload_form(v_server_row, v_row.json_columns, 1::smallint);
        END IF;
      END IF;
      v_conflicts := v_conflicts || jsonb_build_array(jsonb_build_object(
        'schema', v_row.schema_name, 'table', v_row.table_name,
        'key', jsonb_build_object(v_row.key_column, sync.key_text(v_row.key_kind, v_row.key_bytes)),
        'op', sync.op_name(v_row.op_code), 'base_row_version', v_row.base_row_version,
        'server_row_version', coalesce(v_row.server_version, 0), 'server_row_deleted', coalesce(v_row.server_deleted, false),
        'server_row', v_server_row));
    END LOOP;
    v_first := v_conflicts->0;
    PERFORM sync.count(p_user, 'push_conflicts', 1);
    RETURN sync.err('push_conflict', format('push conflict: %s on %s.%s key %s expected row_version %s but the server has %s%s',
        v_first->>'op', v_first->>'schema', v_first->>'table', v_first->'key', v_first->>'base_row_version',
        v_first->>'server_row_version',
        CASE WHEN (v_first->>'server_row_deleted')::boolean THEN ' (deleted)' ELSE '' END
        || CASE WHEN v_conflict_count > 1 THEN format(' (and %s more conflicting rows)', v_conflict_count - 1) ELSE '' END),
      jsonb_build_object('conflict', v_first, 'conflicts', v_conflicts, 'conflict_count', v_conflict_count));
  END IF;

  v_seq := v_us.latest_bundle_seq + 1;
  -- The bundle context: the business writes below pass the guards, and capture records them.
  INSERT INTO sync.bundle_context (xact, user_id, source, kind) VALUES (txid_current(), p_user, v_ps.source_id, 'push');
  PERFORM set_config('lockstep.bundle_user', p_user, true);
  -- Only the statements the bundle needs: an upsert per table with inserts or updates, a delete
  -- per table with deletes (a bundle without deletes runs none).
  SELECT array_agg(DISTINCT table_id) FILTER (WHERE op_code <> 3), array_agg(DISTINCT table_id) FILTER (WHERE op_code = 3)
    INTO v_tables, v_delete_tables FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push;
  BEGIN
    SET CONSTRAINTS ALL DEFERRED;
    FOR v_cat IN SELECT * FROM sync.table_catalog WHERE table_id = ANY (v_tables) ORDER BY apply_order LOOP
      v_running := v_cat.table_id;
      EXECUTE v_cat.upsert_sql USING p_push, p_user;
    END LOOP;
    FOR v_cat IN SELECT * FROM sync.table_catalog WHERE table_id = ANY (v_delete_tables) ORDER BY apply_order DESC LOOP
      v_running := v_cat.table_id;
      EXECUTE v_cat.delete_sql USING p_push, p_user;
    END LOOP;
    v_running := NULL;
    -- Deferred checks run here, inside the block, so a violation is a typed answer, not a failed COMMIT.
    SET CONSTRAINTS ALL IMMEDIATE;
  -- Whatever the bundle's rows make fail is a rejection, not a 500: constraints, data exceptions,
  -- a value too large for a business index (54000), an app trigger's refusal with any SQLSTATE.
  -- Failures that say nothing about the rows (sync.row_fault) propagate: a lost connection, a
  -- serialization failure, a lock or statement timeout (57014 is never caught by OTHERS), a bug.
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL,
      v_constraint = CONSTRAINT_NAME, v_schema = SCHEMA_NAME, v_table = TABLE_NAME, v_column = COLUMN_NAME;
    IF NOT sync.row_fault(v_state) THEN
      RAISE;
    END IF;
    -- Variables keep their values through the rollback of the block: the table whose statement
    -- failed names a data exception's table (its row is found by sync.first_unstorable_row).
    IF coalesce(v_table, '') = '' AND v_running IS NOT NULL THEN
      SELECT schema_name, table_name INTO v_schema, v_table FROM sync.table_catalog WHERE table_id = v_running;
    END IF;
    DELETE FROM sync.bundle_context WHERE user_id = p_user AND xact = txid_current();
    PERFORM sync.count(p_user, 'push_rejected', 1);
    RETURN sync.err('push_rejected', 'the bundle breaks a business constraint: ' || v_msg, jsonb_build_object(
      'violation', jsonb_build_object('sqlstate', v_state, 'constraint', nullif(v_constraint, ''),
        'schema', nullif(v_schema, ''), 'table', nullif(v_table, ''), 'column', nullif(v_column, ''), 'key', NULL),
      '_detail', v_detail));
  END;

  v_result := sync.finalize_bundle(v_ps.user_id, v_seq, v_ps.source_id, v_ps.source_bundle_id, v_hash, p_retained,
    p_max_row_bytes);
  UPDATE sync.push_sessions SET status = 'committed', bundle_seq = v_seq WHERE user_id = p_user AND push_id = p_push;
  DELETE FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push;
  UPDATE sync.scope_state SET status = 'initialized', lease_source_id = NULL, lease_expires_at = NULL, updated_at = now()
   WHERE user_id = v_ps.user_id AND status <> 'initialized';
  -- Last, so the user's quota row is held only to the end of this statement.
  UPDATE sync.user_quota SET open_push_sessions = open_push_sessions - 1, staged_bytes = staged_bytes - v_ps.byte_count
   WHERE user_id = v_ps.user_id;
  RETURN jsonb_build_object('status', 'committed') || v_result;
END
$fn$
`);

/**
 * What the searches for a value PostgreSQL cannot store (a data exception, 22xxx, which names no
 * row) share, on the rejection path only: the session's owner and source, and the table's own
 * upsert (the commit's statement) restricted to a range of row ordinals ($3..$4). NULL `probe`
 * when the session is not this user's or the upsert has an unexpected shape.
 */
export const unstorableProbeSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.unstorable_probe(p_user text, p_push uuid, p_table_id smallint,
  OUT user_id text, OUT source_id text, OUT probe text)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  v_sql text;
BEGIN
  SELECT s.user_id, s.source_id INTO user_id, source_id FROM sync.push_sessions s
   WHERE s.user_id = p_user AND s.push_id = p_push;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT upsert_sql INTO v_sql FROM sync.table_catalog WHERE table_id = p_table_id;
  probe := replace(v_sql, 'AND p.op_code <> 3 ', 'AND p.op_code <> 3 AND p.row_ordinal BETWEEN $3 AND $4 ');
  IF probe = v_sql THEN
    probe := NULL;
  END IF;
END
$fn$
`);

/**
 * One try of a probe on the staged rows `p_lo`..`p_hi` (with `p_column`: row `p_lo` cut down to
 * that payload column first), always rolled back: true when PostgreSQL cannot store a value of
 * them, false when they were stored (a sentinel then undoes the writes), NULL when the try failed
 * otherwise (an app trigger's refusal, a NOT NULL column left out of a cut-down row). It opens
 * the bundle context the business tables' guards require; sync.guard_bundle_context allows that
 * only under sync.first_unstorable_row and sync.unstorable_column.
 */
export const tryUnstorableSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.try_unstorable(p_user text, p_push uuid, p_source text, p_probe text,
  p_lo integer, p_hi integer, p_column text DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
  IF p_column IS NOT NULL THEN
    UPDATE sync.push_session_rows SET payload = jsonb_build_object(p_column, payload -> p_column)
     WHERE user_id = p_user AND push_id = p_push AND row_ordinal = p_lo;
  END IF;
  INSERT INTO sync.bundle_context (xact, user_id, source, kind) VALUES (txid_current(), p_user, p_source, 'push');
  PERFORM set_config('lockstep.bundle_user', p_user, true);
  -- Constraints stay deferred as in the commit, so only a value that cannot be stored fails.
  SET CONSTRAINTS ALL DEFERRED;
  EXECUTE p_probe USING p_push, p_user, p_lo, p_hi;
  RAISE EXCEPTION USING ERRCODE = 'LS000', MESSAGE = 'probe stored its rows';
EXCEPTION
  WHEN data_exception THEN RETURN true;
  WHEN SQLSTATE 'LS000' THEN RETURN false;
  WHEN OTHERS THEN RETURN NULL;
END
$fn$
`);

/**
 * The key of the first staged row of one table whose values PostgreSQL cannot store: the table's
 * upsert is tried on halves of the staged rows (about log2(n) tries, sync.try_unstorable). NULL
 * when no single row fails, or when a try fails for another reason.
 */
export const firstUnstorableRowSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.first_unstorable_row(p_user text, p_push uuid, p_table_id smallint) RETURNS bytea
LANGUAGE plpgsql AS $fn$
DECLARE
  v record;
  v_lo integer;
  v_hi integer;
  v_mid integer;
  v_failed boolean;
  v_key bytea;
BEGIN
  SELECT * INTO v FROM sync.unstorable_probe(p_user, p_push, p_table_id);
  IF v.probe IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT min(row_ordinal), max(row_ordinal) INTO v_lo, v_hi FROM sync.push_session_rows
   WHERE user_id = p_user AND push_id = p_push AND table_id = p_table_id AND op_code <> 3;
  IF v_lo IS NULL THEN
    RETURN NULL;
  END IF;
  WHILE v_lo < v_hi LOOP
    v_mid := v_lo + (v_hi - v_lo) / 2;
    v_failed := sync.try_unstorable(p_user, p_push, v.source_id, v.probe, v_lo, v_mid);
    IF v_failed IS NULL THEN
      RETURN NULL;
    END IF;
    IF v_failed THEN v_hi := v_mid; ELSE v_lo := v_mid + 1; END IF;
  END LOOP;
  -- The last candidate alone: it must fail by itself to be named.
  IF sync.try_unstorable(p_user, p_push, v.source_id, v.probe, v_lo, v_lo) THEN
    SELECT key_bytes INTO v_key FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push AND row_ordinal = v_lo;
  END IF;
  RETURN v_key;
END
$fn$
`);

/**
 * Which column of a staged row PostgreSQL cannot store, once sync.first_unstorable_row named the
 * row: the row is tried with one payload column at a time (sync.try_unstorable). NULL when no
 * single column fails by itself.
 */
export const unstorableColumnSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.unstorable_column(p_user text, p_push uuid, p_table_id smallint, p_key bytea) RETURNS text
LANGUAGE plpgsql AS $fn$
DECLARE
  v record;
  v_ord integer;
  v_column text;
BEGIN
  SELECT * INTO v FROM sync.unstorable_probe(p_user, p_push, p_table_id);
  IF v.probe IS NULL OR p_key IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT row_ordinal INTO v_ord FROM sync.push_session_rows
   WHERE user_id = p_user AND push_id = p_push AND table_id = p_table_id AND key_bytes = p_key AND op_code <> 3;
  IF v_ord IS NULL THEN
    RETURN NULL;
  END IF;
  FOR v_column IN SELECT k FROM sync.push_session_rows r, jsonb_object_keys(coalesce(r.payload, '{}'::jsonb)) k
                   WHERE r.user_id = p_user AND r.push_id = p_push AND r.row_ordinal = v_ord ORDER BY k LOOP
    IF sync.try_unstorable(p_user, p_push, v.source_id, v.probe, v_ord, v_ord, v_column) THEN
      RETURN v_column;
    END IF;
  END LOOP;
  RETURN NULL;
END
$fn$
`);

/**
 * Whether an error raised while a bundle's rows were applied is about those rows (a constraint, a
 * data exception, an app trigger's refusal with any SQLSTATE), and so a rejection the client can
 * act on, rather than a failure of the database or of the code (a lost connection, a transaction
 * rollback such as a serialization failure or deadlock, a lock timeout, resources, an undefined
 * object or a syntax error: class 42 but for 42501, a refused privilege, which a guard raises).
 */
export const rowFaultSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.row_fault(p_state text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $fn$
  SELECT p_state IS NOT NULL AND left(p_state, 2) NOT IN ('08', '25', '40', '53', '55', '57', '58', 'F0', 'XX', '3D', '3F', 'LS')
     AND (left(p_state, 2) <> '42' OR p_state = '42501')
$fn$
`);

/**
 * One try of the row search (sync.first_failing_row): applies the staged rows `p_lo`..`p_hi` on top
 * of what the caller's block already holds — each table's upsert restricted to that range, then its
 * deletes, in the commit's order (`p_upserts`/`p_deletes`: the probes, `p_upsert_tables` and
 * `p_delete_tables` their tables) — and checks the deferred constraints. NULL when the rows were
 * stored: their writes stay, inside the caller's block, which always rolls back. Otherwise the
 * error as a violation (its own block rolled back), or a failure that is not the rows' fault
 * propagates.
 */
export const tryRowsSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.try_rows(p_user text, p_push uuid, p_lo integer, p_hi integer,
  p_upserts text[], p_upsert_tables smallint[], p_deletes text[], p_delete_tables smallint[]) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_i integer;
  v_running smallint;
  v_state text; v_msg text; v_constraint text; v_schema text; v_table text; v_column text;
BEGIN
  FOR v_i IN 1 .. coalesce(array_length(p_upserts, 1), 0) LOOP
    v_running := p_upsert_tables[v_i];
    EXECUTE p_upserts[v_i] USING p_push, p_user, p_lo, p_hi;
  END LOOP;
  FOR v_i IN 1 .. coalesce(array_length(p_deletes, 1), 0) LOOP
    v_running := p_delete_tables[v_i];
    EXECUTE p_deletes[v_i] USING p_push, p_user, p_lo, p_hi;
  END LOOP;
  v_running := NULL;
  -- Deferred checks of everything applied so far (earlier tries' were checked already).
  SET CONSTRAINTS ALL IMMEDIATE;
  SET CONSTRAINTS ALL DEFERRED;
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_constraint = CONSTRAINT_NAME,
    v_schema = SCHEMA_NAME, v_table = TABLE_NAME, v_column = COLUMN_NAME;
  IF NOT sync.row_fault(v_state) THEN
    RAISE;
  END IF;
  IF coalesce(v_table, '') = '' AND v_running IS NOT NULL THEN
    SELECT schema_name, table_name INTO v_schema, v_table FROM sync.table_catalog WHERE table_id = v_running;
  END IF;
  RETURN jsonb_build_object('sqlstate', v_state, 'message', v_msg, 'constraint', nullif(v_constraint, ''),
    'error_schema', nullif(v_schema, ''), 'error_table', nullif(v_table, ''), 'column', nullif(v_column, ''));
END
$fn$
`);

/**
 * The row a rejected bundle is refused for, whatever the error was: the first staged row, in
 * bundle order, at which applying the bundle in order stops being possible. The search applies
 * halves of the remaining rows on top of the rows that passed (sync.try_rows; about log2(n) tries,
 * each rolled back when it fails, all rolled back at the end), so it costs about twice the
 * commit's own work and names a row for every error a row can cause: constraints (deferred ones
 * too), data exceptions, an app trigger's refusal. The answer is that row's own violation
 * (`sqlstate`, `message`, `constraint`, `schema`/`table`/`key` of the row, `column` where
 * PostgreSQL or sync.unstorable_column tells it); NULL when no row can be named (the bundle
 * passes now, the session is gone, or a table's statements have an unexpected shape).
 */
export const firstFailingRowSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.first_failing_row(p_user text, p_push uuid) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_user text;
  v_source text;
  v_lo integer;
  v_hi integer;
  v_mid integer;
  v_upserts text[];
  v_upsert_tables smallint[];
  v_deletes text[];
  v_delete_tables smallint[];
  v_err jsonb;
  v_found jsonb;
  v_row record;
BEGIN
  SELECT s.user_id, s.source_id INTO v_user, v_source FROM sync.push_sessions s
   WHERE s.user_id = p_user AND s.push_id = p_push AND s.status <> 'committed';
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  SELECT min(row_ordinal), max(row_ordinal) INTO v_lo, v_hi FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push;
  IF v_lo IS NULL THEN
    RETURN NULL;
  END IF;
  -- Each table's own statements, restricted to a range of ordinals ($3..$4), in the commit's order.
  SELECT array_agg(replace(c.upsert_sql, 'AND p.op_code <> 3 ', 'AND p.op_code <> 3 AND p.row_ordinal BETWEEN $3 AND $4 ') ORDER BY c.apply_order),
         array_agg(c.table_id ORDER BY c.apply_order)
    INTO v_upserts, v_upsert_tables FROM sync.table_catalog c
   WHERE c.table_id IN (SELECT table_id FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push AND op_code <> 3);
  SELECT array_agg(replace(c.delete_sql, 'AND p.op_code = 3))', 'AND p.op_code = 3 AND p.row_ordinal BETWEEN $3 AND $4))') ORDER BY c.apply_order DESC),
         array_agg(c.table_id ORDER BY c.apply_order DESC)
    INTO v_deletes, v_delete_tables FROM sync.table_catalog c
   WHERE c.table_id IN (SELECT table_id FROM sync.push_session_rows WHERE user_id = p_user AND push_id = p_push AND op_code = 3);
  IF EXISTS (SELECT 1 FROM unnest(v_upserts) q WHERE q NOT LIKE '%BETWEEN $3 AND $4%')
     OR EXISTS (SELECT 1 FROM unnest(v_deletes) q WHERE q NOT LIKE '%BETWEEN $3 AND $4%') THEN
    RETURN NULL;
  END IF;
  BEGIN
    INSERT INTO sync.bundle_context (xact, user_id, source, kind) VALUES (txid_current(), p_user, v_source, 'push');
    PERFORM set_config('lockstep.bundle_user', p_user, true);
    SET CONSTRAINTS ALL DEFERRED;
    -- Rows before v_lo are applied and pass; the first failing row is in v_lo..v_hi.
    WHILE v_lo < v_hi LOOP
      v_mid := v_lo + (v_hi - v_lo) / 2;
      IF sync.try_rows(p_user, p_push, v_lo, v_mid, v_upserts, v_upsert_tables, v_deletes, v_delete_tables) IS NULL THEN
        v_lo := v_mid + 1;
      ELSE
        v_hi := v_mid;
      END IF;
    END LOOP;
    -- The last candidate alone, on top of the rows before it: its own error names it.
    v_err := sync.try_rows(p_user, p_push, v_lo, v_lo, v_upserts, v_upsert_tables, v_deletes, v_delete_tables);
    RAISE EXCEPTION USING ERRCODE = 'LS000', MESSAGE = 'the row search stored rows';
  EXCEPTION WHEN SQLSTATE 'LS000' THEN
    NULL;
  END;
  IF v_err IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT r.table_id, r.key_bytes, c.schema_name, c.table_name, c.key_column, sync.key_text(c.key_kind, r.key_bytes) AS key_text
    INTO v_row FROM sync.push_session_rows r JOIN sync.table_catalog c ON c.table_id = r.table_id
   WHERE r.user_id = p_user AND r.push_id = p_push AND r.row_ordinal = v_lo;
  v_found := v_err || jsonb_build_object('schema', v_row.schema_name, 'table', v_row.table_name,
    'key', jsonb_build_object(v_row.key_column, v_row.key_text));
  -- A data exception names no column: try the row's columns one at a time.
  IF v_err ->> 'column' IS NULL AND v_err ->> 'sqlstate' LIKE '22%' THEN
    v_found := v_found || jsonb_build_object('column', sync.unstorable_column(p_user, p_push, v_row.table_id, v_row.key_bytes));
  END IF;
  RETURN v_found;
END
$fn$
`);
