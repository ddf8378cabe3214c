/**
 * Snapshot sessions (frozen, chunked copies of a user's rows) and source rotation.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';
import { joinedPageReader } from '../shared.sql.js';

export const snapshotRowTextSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_row_text(p_prefix text, p_kind text, p_key_bytes bytea, p_version bigint, p_payload jsonb)
RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT p_prefix || to_json(CASE WHEN p_kind = 'uuid' THEN encode(p_key_bytes, 'hex')::uuid::text ELSE convert_from(p_key_bytes, 'UTF8') END)::text
    || '},"row_version":' || p_version || ',"payload":' || p_payload::text || '}'
$fn$
`);

export const rotateSourceSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.rotate_source(p_user text, p_header text, p_prev text, p_new text, p_reason text) RETURNS jsonb
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
  PERFORM 1 FROM sync.user_state WHERE user_id = p_user FOR UPDATE;
  SELECT * INTO v_prev FROM sync.source_state WHERE user_id = p_user AND source_id = p_prev;
  SELECT * INTO v_new FROM sync.source_state WHERE user_id = p_user AND source_id = p_new;
  IF v_new.source_id IS NOT NULL THEN
    IF v_prev.status = 'retired' AND v_prev.replaced_by_source_id = p_new THEN
      RETURN NULL;  -- the same rotation, retried
    END IF;
    RETURN sync.err('source_replacement_invalid', format('new_source_id %s is already in use', p_new));
  END IF;
  IF v_prev.source_id IS NULL THEN
    INSERT INTO sync.source_state (user_id, source_id, status, last_source_bundle_id, replaced_by_source_id, created_at)
    VALUES (p_user, p_prev, 'retired', 0, p_new, now());
  ELSIF v_prev.status = 'retired' AND p_reason = 'source_retired' THEN
    -- A device whose source another device retired (a cloned database) asks for a fresh one:
    -- the previous source stays retired, replaced by the first rotation; nothing else moves.
    NULL;
  ELSIF v_prev.status = 'retired' THEN
    RETURN sync.err('source_replacement_invalid', format('previous source %s is already retired (replaced by %s)',
      p_prev, v_prev.replaced_by_source_id));
  ELSE
    UPDATE sync.source_state SET status = 'retired', replaced_by_source_id = p_new
     WHERE user_id = p_user AND source_id = p_prev;
  END IF;
  INSERT INTO sync.source_state (user_id, source_id, status, last_source_bundle_id, created_at)
  VALUES (p_user, p_new, 'reserved', 0, now());
  RETURN NULL;
END
$fn$
`);

/**
 * Rows per stored chunk of a snapshot, and bytes: a new chunk starts at every multiple of either
 * (see snapshotCreateSql). 500 divides the page sizes clients use (1,000 by default, 5,000 at
 * most), so their pages are whole chunks; the byte bound keeps a chunk of wide rows small enough
 * to cut cheaply.
 */
export const SNAPSHOT_CHUNK_ROWS = 500;
export const SNAPSHOT_CHUNK_BYTES = 262_144;

/**
 * From how many rows of a user a snapshot's render is planned in parallel whatever the planner
 * estimates (sync.snapshot_render). Where the tables are analyzed, the planner goes parallel for a
 * large user by itself, and forcing it changes little: renders of 20,000 / 40,000 / 60,000 /
 * 100,000 rows took 77 / 145 / 201 / 366 ms as planned and 88 / 146 / 203 / 351 ms forced (two
 * cores: the forced plan's second worker has no core of its own). Where they are not (a bulk
 * load, a new table, this bench), the planner renders serially from a guess of a few hundred
 * rows, and forcing pays: 83 → 68, 183 → 135, 288 → 203, 498 → 336 ms. Below ~5,000 rows a
 * worker's start (~5 ms: a 10-row render 1.0 → 5.7 ms) costs more than it saves either way.
 */
export const SNAPSHOT_PARALLEL_ROWS = 50_000;

/**
 * One table's arm of a snapshot render: its rows with the prefix of their text as a constant.
 * Forms 1 and 2 are objects in protocol 1's or 2's json form (table_catalog.snapshot_v1_sql for
 * 1); form 3 is arrays `[table_id, row_version, values…]` of protocol 2's values, in the order of
 * the table's row_array_header (docs/protocol.md §5.6). Null for form 3 where bootstrap has not
 * rendered the table's array SQL yet.
 */
export const snapshotRowSelectSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_row_select(p_table sync.table_catalog, p_form smallint) RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT 'SELECT ' || quote_literal(CASE WHEN p_form = 3 THEN '[' || p_table.table_id || ',' ELSE p_table.row_json_prefix END)
    || '::text AS prefix, x.* FROM ('
    || CASE p_form WHEN 3 THEN p_table.snapshot_array_sql WHEN 1 THEN coalesce(p_table.snapshot_v1_sql, p_table.snapshot_sql) ELSE p_table.snapshot_sql END
    || ') x'
$fn$
`);

/**
 * The rows of a user's snapshot, rendered and cut into chunks, in a query that only reads, so
 * PostgreSQL may split it across parallel workers (a statement that writes, the create's INSERT
 * included, never runs in parallel): the workers scan the tables, join row_state, render and sort
 * their share; the leader merges them in key order and cuts the chunks. 100k rows on two cores:
 * the create 640–690 → 510–555 ms. STABLE, so the query runs under the snapshot of the statement that
 * calls it (sync.snapshot_create's INSERT): the rows, their row versions and `snapshot_bundle_seq`
 * (the user's latest bundle_seq, on every row; one row with NULL chunk columns when the user has
 * no rows) are all read at one instant.
 *
 * Chunks are runs of consecutive rows, a new one at every multiple of p_rows rows or p_bytes
 * bytes of text (both bounds grow with the ordinal, so each pair is one run), the rows' texts one
 * per line (JSON text holds no raw line break). The function's own settings (a SET clause is
 * undone when it returns, pooler-safe): work_mem keeps the sorts in memory; no nested loops, so
 * the row versions are one join of the user's row_state whatever the statistics say (layout 21:
 * a nested loop by user and table re-read it per row, 22 s for 100k rows); and no JIT, which the
 * cost the disabled nested loop adds to the plan would otherwise switch on, and whose compilation
 * costs more than it saves on a statement run once. Rows are rendered in `p_form`
 * (sync.snapshot_row_select): protocol 1's or 2's json form as objects, or 3, rows as arrays.
 */
export const snapshotRenderSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_render(p_user text, p_form smallint, p_rows integer, p_bytes bigint, p_parallel_rows integer)
RETURNS TABLE (first_ordinal integer, row_count integer, body text, snapshot_bundle_seq bigint)
LANGUAGE plpgsql STABLE SET work_mem = '64MB' SET enable_nestloop = off SET jit = off AS $fn$
DECLARE
  v_union text;
  v_parallel boolean;
  v_saved text[];
BEGIN
  -- The planner weighs a parallel plan by its estimate of the user's rows, which is the average
  -- user's, or a guess where the table was never analyzed (a bulk load, a new table): a large
  -- user's render then runs serially. So where the user has p_parallel_rows rows or more
  -- (row_state, tombstones included; a probe that stops there), a parallel plan costs nothing to
  -- start in the planner's eyes; below, starting a worker (~5 ms) costs more than it saves. The
  -- operator's settings are put back before returning; max_parallel_workers_per_gather = 0
  -- still turns parallel plans off.
  v_parallel := (SELECT count(*) FROM (SELECT 1 FROM sync.row_state r WHERE r.user_id = p_user LIMIT p_parallel_rows) x) >= p_parallel_rows;
  IF v_parallel THEN
    v_saved := ARRAY[current_setting('parallel_setup_cost'), current_setting('parallel_tuple_cost'),
                     current_setting('min_parallel_table_scan_size'), current_setting('min_parallel_index_scan_size')];
    PERFORM set_config('parallel_setup_cost', '0', true), set_config('parallel_tuple_cost', '0', true),
            set_config('min_parallel_table_scan_size', '0', true), set_config('min_parallel_index_scan_size', '0', true);
  END IF;
  -- Each table's rows with its envelope's prefix as a constant, so a worker renders whole rows.
  SELECT string_agg(sync.snapshot_row_select(tc, p_form), ' UNION ALL ' ORDER BY tc.table_id)
    INTO v_union
    FROM sync.table_catalog tc WHERE NOT tc.retired;
  -- RETURN QUERY may run in parallel (PostgreSQL 14 and later). Two things keep the work in the
  -- workers: the order by (sort_key, row_text), which makes each row's text part of what a
  -- worker sorts (sort_key alone is unique, so row_text is never compared; ordered by sort_key
  -- alone, the planner renders after the merge, in the leader), and no OFFSET fence, which a
  -- parallel plan cannot cross.
  RETURN QUERY EXECUTE format($q$
    SELECT g.first_ordinal, g.row_count, g.body, l.latest_bundle_seq
      FROM (SELECT latest_bundle_seq FROM sync.user_state WHERE user_id = $1) l
      LEFT JOIN (
        SELECT min(r.ordinal) AS first_ordinal, count(*)::integer AS row_count, string_agg(r.row_text, E'\n' ORDER BY r.ordinal) AS body
          FROM (SELECT (row_number() OVER w)::integer - 1 AS ordinal, t.row_text,
                       sum(octet_length(t.row_text) + 1) OVER w - octet_length(t.row_text) - 1 AS bytes_before
                  FROM (SELECT
                          -- The order (apply_order, table_id, key_bytes) as one bytea (each
                          -- integer's sign bit flipped, big-endian): one memcmp per comparison
                          -- instead of three keys with the row deformed for each (layout 22).
                          int4send(s.apply_order # (-2147483648)::integer) || int2send(s.table_id # (-32768)::smallint) || s.key_bytes AS sort_key,
                          %s AS row_text
                          FROM (%s) s
                          LEFT JOIN sync.row_state rs ON rs.user_id = $1 AND rs.table_id = s.table_id AND rs.key_bytes = s.key_bytes
                         ORDER BY 1, 2) t
                WINDOW w AS (ORDER BY t.sort_key ROWS UNBOUNDED PRECEDING)) r
         GROUP BY r.ordinal / $2, r.bytes_before / $3) g ON true
  $q$, CASE WHEN p_form = 3 THEN $e$s.prefix || coalesce(rs.row_version, 0) || ',' || s.payload_text || ']'$e$
             ELSE $e$s.prefix || s.key_json || '},"row_version":' || coalesce(rs.row_version, 0) || ',"payload":' || s.payload_text || '}'$e$ END,
     v_union) USING p_user, p_rows, p_bytes;
  IF v_parallel THEN
    PERFORM set_config('parallel_setup_cost', v_saved[1], true), set_config('parallel_tuple_cost', v_saved[2], true),
            set_config('min_parallel_table_scan_size', v_saved[3], true), set_config('min_parallel_index_scan_size', v_saved[4], true);
  END IF;
END
$fn$
`);

/**
 * A frozen snapshot in ONE statement: sync.snapshot_render reads every registered table,
 * row_state and the user's latest bundle_seq under this statement's snapshot, without locking
 * the write path, and its chunks are stored with each one's size on the wire, so a page joins a
 * few chunks instead of reading and sizing thousands of rows (layout 17).
 *
 * The chunks belong to a data set (`sync.snapshot_data`) that sessions point to. A second device
 * of the same user at the same ceiling (a reinstall, a second tab or device) shares a recent data
 * set instead of rendering again: the rows of a user at one bundle_seq are fixed (every write of
 * a registered table commits a bundle), as long as their rendering is (the render key: the
 * catalog's row SQL and the layout version). A data set lives at least as long as each session
 * that uses it (its expires_at is the latest of theirs), and SNAPSHOT_DATA_GRACE after the last
 * one is deleted; maintenance removes it once expired. The session keeps the form `p_form` its
 * rows were rendered in (sync.snapshot_row_select): its pages are served in that form only. A
 * data set of arrays (form 3) keeps the header that names their values (`row_tables`). Its own
 * work_mem keeps the rendered chunks, held once between the render and the insert, in memory.
 */
export const snapshotCreateSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_create(p_user text, p_source text, p_prev text, p_new text, p_reason text, p_ttl_seconds integer,
  p_max_open integer DEFAULT 8, p_reap_seconds integer DEFAULT 300, p_form smallint DEFAULT 1)
RETURNS jsonb LANGUAGE plpgsql SET work_mem = '64MB' AS $fn$
DECLARE
  v_us sync.user_state;
  v_err jsonb;
  v_id uuid := gen_random_uuid();
  v_render text;
  v_tables text;
  v_data sync.snapshot_data;
  v_s sync.snapshot_sessions;
BEGIN
  SELECT * INTO v_us FROM sync.user_state WHERE user_id = p_user;
  IF NOT FOUND THEN
    RETURN sync.err('scope_uninitialized', 'the scope is not initialized; connect first');
  END IF;
  IF p_new IS NOT NULL THEN
    v_err := sync.rotate_source(v_us.user_id, p_source, p_prev, p_new, p_reason);
  ELSE
    v_err := sync.check_source(v_us.user_id, p_source, true);
  END IF;
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  v_err := sync.check_read_scope(v_us.user_id);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  -- Before any row is copied: one more open snapshot, unless the user is at
  -- max_open_snapshot_sessions_per_user. (A rotation above stays: retried, it is idempotent.)
  INSERT INTO sync.user_quota AS q (user_id, open_push_sessions, open_snapshot_sessions, staged_bytes) VALUES (v_us.user_id, 0, 1, 0)
  ON CONFLICT (user_id) DO UPDATE SET open_snapshot_sessions = q.open_snapshot_sessions + 1 WHERE q.open_snapshot_sessions < p_max_open;
  IF NOT FOUND THEN
    RETURN sync.rate_limited(v_us.user_id, 'snapshot', 'max_open_snapshot_sessions_per_user', p_max_open, p_reap_seconds);
  END IF;
  -- Rows as arrays need every table's array SQL, which bootstrap renders after the migration that
  -- added it: until then the rows are objects (a reader of arrays reads those too).
  IF p_form = 3 AND EXISTS (SELECT 1 FROM sync.table_catalog WHERE NOT retired AND snapshot_array_sql IS NULL) THEN
    p_form := 2;
  END IF;
  -- The render key covers the form (each table's row SQL and prefix in it) and, for arrays, the
  -- header that names their values.
  SELECT md5(string_agg(tc.table_id || ':' || tc.apply_order || ':' || sync.snapshot_row_select(tc, p_form)
                        || CASE WHEN p_form = 3 THEN tc.row_array_header ELSE '' END, ';' ORDER BY tc.table_id)
           || ';layout ' || coalesce((SELECT value FROM sync.meta WHERE key = 'layout_version'), '')),
         CASE WHEN p_form = 3 THEN '{' || coalesce(string_agg('"' || tc.table_id || '":' || tc.row_array_header, ',' ORDER BY tc.table_id), '') || '}' END
    INTO STRICT v_render, v_tables
    FROM sync.table_catalog tc WHERE NOT tc.retired;
  -- The rows at the user's latest bundle_seq, already rendered and not expired: shared, and kept
  -- for this session too. The lock orders this with maintenance and with the delete of the last
  -- session, which both re-check the expiry.
  SELECT * INTO v_data FROM sync.snapshot_data
   WHERE user_id = v_us.user_id AND snapshot_bundle_seq = v_us.latest_bundle_seq AND render_key = v_render AND expires_at > now()
   ORDER BY expires_at DESC LIMIT 1 FOR UPDATE;
  IF FOUND THEN
    UPDATE sync.snapshot_data SET expires_at = greatest(expires_at, now() + make_interval(secs => p_ttl_seconds)) WHERE user_id = v_us.user_id AND data_id = v_data.data_id;
    INSERT INTO sync.snapshot_sessions (snapshot_id, user_id, source_id, snapshot_bundle_seq, row_count, byte_count, created_at, expires_at, data_id, json_form)
    VALUES (v_id, v_us.user_id, coalesce(p_new, p_source), v_data.snapshot_bundle_seq, v_data.row_count, v_data.byte_count, now(),
            now() + make_interval(secs => p_ttl_seconds), v_data.data_id, p_form);
  ELSE
    WITH r AS MATERIALIZED (SELECT * FROM sync.snapshot_render(v_us.user_id, p_form, ${SNAPSHOT_CHUNK_ROWS}, ${SNAPSHOT_CHUNK_BYTES},
      ${SNAPSHOT_PARALLEL_ROWS})),
    chunks AS (
      -- The size on the wire as sync.wire_bytes counts it (each quote and backslash once more; a
      -- line break stands for the comma between rows), in one pass over the chunk.
      INSERT INTO sync.snapshot_chunks (user_id, data_id, first_ordinal, row_count, wire_bytes, body)
      SELECT v_us.user_id, v_id, r.first_ordinal, r.row_count, 2 * octet_length(r.body) - octet_length(replace(replace(r.body, '"', ''), '\', '')), r.body
        FROM r WHERE r.body IS NOT NULL
      RETURNING row_count, wire_bytes),
    data AS (
      INSERT INTO sync.snapshot_data (data_id, user_id, snapshot_bundle_seq, render_key, row_count, byte_count, created_at, expires_at, row_tables)
      SELECT v_id, v_us.user_id, (SELECT max(r.snapshot_bundle_seq) FROM r), v_render, (SELECT coalesce(sum(row_count), 0) FROM chunks),
             (SELECT coalesce(sum(wire_bytes + 1), 0) FROM chunks), now(), now() + make_interval(secs => p_ttl_seconds), v_tables
      RETURNING *)
    INSERT INTO sync.snapshot_sessions (snapshot_id, user_id, source_id, snapshot_bundle_seq, row_count, byte_count, created_at, expires_at, data_id, json_form)
    SELECT v_id, v_us.user_id, coalesce(p_new, p_source), d.snapshot_bundle_seq, d.row_count, d.byte_count, d.created_at, d.expires_at, d.data_id, p_form
      FROM data d;
  END IF;
  SELECT * INTO STRICT v_s FROM sync.snapshot_sessions WHERE user_id = v_us.user_id AND snapshot_id = v_id;
  RETURN jsonb_build_object('snapshot_id', v_id, 'snapshot_bundle_seq', v_s.snapshot_bundle_seq, 'row_count', v_s.row_count,
    'byte_count', v_s.byte_count, 'expires_at', sync.rfc3339(v_s.expires_at));
END
$fn$
`);

/**
 * One page: the rows [p_after, p_after + p_max) that fit p_budget (at least one). Pages of
 * sessions created since layout 17 join stored chunks, splitting the first or last one into its
 * lines where the page starts or ends inside it; those of older sessions (a rolling
 * deploy) are read row by row as before. Pages are served in the form the session was created
 * in: a client asking for another json form (it was upgraded while hydrating) is told the session
 * expired, so it starts a new one, unless no registered table has a json column (then both forms
 * are the same rows). Rows as arrays (form 3, protocol 2's json form) go only to a request of
 * form 3, which reads objects as well; their page names each table's values in `tables`.
 * The body comes as its parts in order (layout 27, see sync.pull_parts): the head, the chunks and
 * runs of rows (a comma before all but the first), the tail; a page of an older session is one part.
 */
export const snapshotPagePartsSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_page_parts(p_user text, p_snapshot uuid, p_after bigint, p_max integer, p_budget bigint,
  p_form smallint DEFAULT 1)
RETURNS TABLE (error jsonb, body text) LANGUAGE plpgsql AS $fn$
DECLARE
  v_s sync.snapshot_sessions;
  v_envelope integer;
  v_end bigint;
  v_next bigint := p_after;
  v_used bigint;
  v_parts text[] := '{}';
  v_c record;
  v_from integer;
  v_to integer;
  v_take integer;
  v_wire bigint;
  v_row_wire bigint;
  v_rows text[];
  v_head text := '';
BEGIN
  SELECT s.* INTO v_s FROM sync.snapshot_sessions s
   WHERE s.user_id = p_user AND s.snapshot_id = p_snapshot;
  IF NOT FOUND THEN
    RETURN QUERY SELECT sync.err('snapshot_session_not_found', format('snapshot session %s does not exist', p_snapshot)), NULL::text;
    RETURN;
  END IF;
  IF v_s.expires_at <= now() THEN
    RETURN QUERY SELECT sync.err('snapshot_session_expired', format('snapshot session %s expired', p_snapshot)), NULL::text;
    RETURN;
  END IF;
  -- Rows as arrays go only to a reader that asked for them (form 3), which reads objects too.
  IF v_s.json_form = 3 AND p_form <> 3 THEN
    RETURN QUERY SELECT sync.err('snapshot_session_expired', format(
      'snapshot session %s holds rows as arrays, which this request did not ask for; create a new one', p_snapshot)), NULL::text;
    RETURN;
  END IF;
  IF least(v_s.json_form, 2) <> least(p_form, 2) AND EXISTS (SELECT 1 FROM sync.table_catalog WHERE json_columns IS NOT NULL AND NOT retired) THEN
    RETURN QUERY SELECT sync.err('snapshot_session_expired', format(
      'snapshot session %s was rendered for Sync-Protocol-Version %s; create a new one', p_snapshot, least(v_s.json_form, 2))), NULL::text;
    RETURN;
  END IF;
  IF v_s.json_form = 3 THEN
    v_head := ',"tables":' || (SELECT d.row_tables FROM sync.snapshot_data d WHERE d.user_id = p_user AND d.data_id = v_s.data_id);
  END IF;
  -- Budgets are in escaped bytes (sync.wire_bytes): each row its stored size plus a comma, plus
  -- the page's own envelope.
  v_envelope := sync.wire_bytes('{"snapshot_id":"' || v_s.snapshot_id || '","snapshot_bundle_seq":' || v_s.snapshot_bundle_seq
    || ',"row_count":' || v_s.row_count || v_head || ',"rows":[],"next_row_ordinal":' || (p_after + p_max) || ',"has_more":false}');
  IF v_s.data_id IS NULL THEN
    RETURN QUERY
    WITH page AS (
      SELECT r.row_ordinal, r.row_text, r.table_id, r.key_bytes, r.row_version, r.payload,
             sum(coalesce(r.wire_bytes, sync.wire_bytes(sync.snapshot_row_text(tc.row_json_prefix, tc.key_kind, r.key_bytes, r.row_version,
               r.payload))) + 1) OVER (ORDER BY r.row_ordinal) + v_envelope AS cumulative
      -- Ordinals are dense, so the page is the range [p_after, p_after + p_max) of the primary key.
      FROM (SELECT * FROM sync.snapshot_session_rows WHERE user_id = p_user AND snapshot_id = p_snapshot
              AND row_ordinal >= p_after AND row_ordinal < p_after + p_max
            ORDER BY row_ordinal) r
      JOIN sync.table_catalog tc ON tc.table_id = r.table_id
    ), chosen AS (
      SELECT page.* FROM page WHERE page.cumulative <= p_budget OR page.row_ordinal = p_after
    )
    SELECT NULL::jsonb, '{"snapshot_id":"' || v_s.snapshot_id || '","snapshot_bundle_seq":' || v_s.snapshot_bundle_seq
      || ',"row_count":' || v_s.row_count
      || ',"rows":[' || coalesce(string_agg(coalesce(c.row_text, (SELECT sync.snapshot_row_text(tc.row_json_prefix, tc.key_kind, c.key_bytes,
           c.row_version, c.payload) FROM sync.table_catalog tc WHERE tc.table_id = c.table_id)), ',' ORDER BY c.row_ordinal), '')
      || '],"next_row_ordinal":' || (p_after + count(c.row_ordinal))
      || ',"has_more":' || (p_after + count(c.row_ordinal) < v_s.row_count)::text || '}'
    FROM chosen c;
    RETURN;
  END IF;
  v_used := v_envelope;
  v_end := least(p_after + p_max, v_s.row_count);
  IF p_after < v_end THEN
    -- The chunk holding row p_after, then the following ones up to the page's end.
    FOR v_c IN SELECT c.first_ordinal, c.row_count, c.wire_bytes, c.body FROM sync.snapshot_chunks c
                WHERE c.user_id = p_user AND c.data_id = v_s.data_id AND c.first_ordinal < v_end
                  AND c.first_ordinal >= (SELECT max(x.first_ordinal) FROM sync.snapshot_chunks x WHERE x.user_id = p_user AND x.data_id = v_s.data_id AND x.first_ordinal <= p_after)
                ORDER BY c.first_ordinal LOOP
      v_from := (v_next - v_c.first_ordinal)::integer;
      v_to := (least(v_end, v_c.first_ordinal + v_c.row_count) - v_c.first_ordinal)::integer;
      IF v_from = 0 AND v_to = v_c.row_count AND v_used + v_c.wire_bytes + 1 <= p_budget THEN
        -- The whole chunk: the common case.
        v_parts := v_parts || replace(v_c.body, E'\n', ',');
        v_used := v_used + v_c.wire_bytes + 1;
        v_next := v_next + v_c.row_count;
        CONTINUE;
      END IF;
      -- Rows v_from .. v_to - 1 of the chunk, as many as the budget allows (the page's first row always).
      v_rows := string_to_array(v_c.body, E'\n');
      v_take := 0;
      v_wire := 0;
      WHILE v_from + v_take < v_to LOOP
        v_row_wire := 2 * octet_length(v_rows[v_from + v_take + 1]) - octet_length(replace(replace(v_rows[v_from + v_take + 1], '"', ''), '\', '')) + 1;
        EXIT WHEN v_used + v_wire + v_row_wire > p_budget AND v_next + v_take > p_after;
        v_wire := v_wire + v_row_wire;
        v_take := v_take + 1;
      END LOOP;
      IF v_take > 0 THEN
        v_parts := v_parts || array_to_string(v_rows[v_from + 1:v_from + v_take], ',');
        v_used := v_used + v_wire;
        v_next := v_next + v_take;
      END IF;
      -- The budget ended the page inside this chunk.
      EXIT WHEN v_from + v_take < v_to;
    END LOOP;
  END IF;
  -- JSON text by concatenation of the rows rendered at create, never cast to json (see sync.pull_parts).
  RETURN QUERY SELECT NULL::jsonb, '{"snapshot_id":"' || v_s.snapshot_id || '","snapshot_bundle_seq":' || v_s.snapshot_bundle_seq
    || ',"row_count":' || v_s.row_count || v_head || ',"rows":[';
  RETURN QUERY SELECT NULL::jsonb, CASE WHEN u.o = 1 THEN u.part ELSE ',' || u.part END
    FROM unnest(v_parts) WITH ORDINALITY AS u(part, o) ORDER BY u.o;
  RETURN QUERY SELECT NULL::jsonb, '],"next_row_ordinal":' || v_next || ',"has_more":' || (v_next < v_s.row_count)::text || '}';
END
$fn$
`);

/** Layout 27's sync.snapshot_page_parts as one text, for builds before it (a rolling deploy). */
export const snapshotPageSql = joinedPageReader('snapshot_page',
  'p_user text, p_snapshot uuid, p_after bigint, p_max integer, p_budget bigint, p_form smallint DEFAULT 1',
  'p_user, p_snapshot, p_after, p_max, p_budget, p_form');

/**
 * How long a data set outlives the delete of its last session, for another device at the same
 * ceiling (a reinstall right after a hydration); maintenance then removes it.
 */
export const SNAPSHOT_DATA_GRACE = '2 minutes';

/** Ends a session; the last session of a data set leaves it SNAPSHOT_DATA_GRACE to live. */
export const snapshotDeleteSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.snapshot_delete(p_user text, p_snapshot uuid) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_data uuid;
BEGIN
  DELETE FROM sync.snapshot_sessions s
   WHERE s.user_id = p_user AND s.snapshot_id = p_snapshot
  RETURNING s.data_id INTO v_data;
  IF NOT FOUND THEN
    RETURN sync.err('snapshot_session_not_found', format('snapshot session %s does not exist', p_snapshot));
  END IF;
  DELETE FROM sync.snapshot_session_rows WHERE user_id = p_user AND snapshot_id = p_snapshot;
  IF v_data IS NOT NULL THEN
    -- Locked first, so a create sharing the data set meanwhile (it extends the expiry) and a
    -- concurrent delete of its other session are seen.
    PERFORM 1 FROM sync.snapshot_data WHERE user_id = p_user AND data_id = v_data FOR UPDATE;
    UPDATE sync.snapshot_data d SET expires_at = least(d.expires_at, now() + interval '${SNAPSHOT_DATA_GRACE}')
     WHERE d.user_id = p_user AND d.data_id = v_data AND NOT EXISTS (SELECT 1 FROM sync.snapshot_sessions s WHERE s.user_id = p_user AND s.data_id = v_data);
  END IF;
  UPDATE sync.user_quota SET open_snapshot_sessions = open_snapshot_sessions - 1 WHERE user_id = p_user;
  RETURN jsonb_build_object('deleted', true);
END
$fn$
`);
