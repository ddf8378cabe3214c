/**
 * The read path: pull pages of complete bundles and pages of one committed bundle, rendered as
 * JSON text by concatenation.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';
import { joinedPageReader } from '../shared.sql.js';

/** Rows render by concatenation: table_catalog.row_json_prefix holds {"schema":…,"table":…,"key":{"<key>":. */
export const committedRowTextSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.committed_row_text(p_prefix text, p_kind text, p_key_bytes bytea, p_op smallint, p_version bigint, p_payload jsonb)
RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT p_prefix || to_json(CASE WHEN p_kind = 'uuid' THEN encode(p_key_bytes, 'hex')::uuid::text ELSE convert_from(p_key_bytes, 'UTF8') END)::text
    || '},"op":"' || CASE p_op WHEN 1 THEN 'INSERT' WHEN 2 THEN 'UPDATE' ELSE 'DELETE' END
    || '","row_version":' || p_version || ',"payload":' || coalesce(p_payload::text, 'null') || '}'
$fn$
`);

/**
 * A committed row's text in protocol `p_form`'s json form (docs/protocol.md §4.2): the stored text
 * when the bundle was stored in that form (`p_stored`: bundle_log.json_form) or the table has no
 * json column; otherwise rendered from the payload with its json values converted. Protocol 1's
 * text of a jsonb value is never longer than protocol 2's (the same rendering inline instead of in
 * a JSON string), so pages of tables without a plain json column are budgeted by the stored size;
 * a json column's text may grow when rendered as a value (numbers lose their exponent), so rows of
 * such tables are measured in protocol 1's form (sync.pull, sync.committed_rows).
 */
export const committedRowInFormSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.committed_row_in_form(p_prefix text, p_kind text, p_json text[], p_key_bytes bytea, p_op smallint,
  p_version bigint, p_payload jsonb, p_text text, p_stored smallint, p_form smallint)
RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT CASE WHEN p_stored = p_form OR p_json IS NULL
              THEN coalesce(p_text, sync.committed_row_text(p_prefix, p_kind, p_key_bytes, p_op, p_version, p_payload))
              ELSE sync.committed_row_text(p_prefix, p_kind, p_key_bytes, p_op, p_version, sync.json_payload_form(p_payload, p_json, p_form)) END
$fn$
`);

/** '{"bundle_seq":…,"source_id":…,"source_bundle_id":…,"row_count":…,"bundle_hash":"…"' (object left open). */
export const bundleHeadTextSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.bundle_head_text(p_seq bigint, p_source text, p_source_bundle_id bigint, p_rows integer, p_hash text)
RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT '{"bundle_seq":' || p_seq || ',"source_id":' || to_json(p_source)::text || ',"source_bundle_id":' || p_source_bundle_id
    || ',"row_count":' || p_rows || ',"bundle_hash":' || to_json(p_hash)::text
$fn$
`);

/**
 * A page of complete bundles after `p_after`, rows and hashes in protocol `p_form`'s json form
 * (sync.committed_row_in_form; `bundle_hash_v2` for protocol 2 where the forms differ), as the
 * parts of its body in order (layout 27): the page's head, each bundle (a comma before all but the
 * first), its tail. The edge passes them on as parts. One text of the whole page cost PostgreSQL a fresh copy
 * of it at every step on its way out (the concatenations around the aggregate, the function's
 * result, the output conversion, the message), each a megabyte or more of newly faulted memory: a
 * page of 2,500 rows took 29 ms as one text against 13 ms in parts.
 */
export const pullPartsSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.pull_parts(p_user text, p_source text, p_after bigint, p_max integer, p_target bigint, p_budget bigint,
  p_form smallint DEFAULT 1)
RETURNS TABLE (error jsonb, body text) LANGUAGE plpgsql AS $fn$
DECLARE
  v_us sync.user_state;
  v_err jsonb;
  v_stable bigint;
  -- Protocol 1's rows of a table with a plain json column can be longer than the stored ones.
  v_measure boolean := p_form = 1 AND EXISTS (SELECT 1 FROM sync.table_catalog WHERE columns @> '[{"type": "json"}]');
BEGIN
  SELECT * INTO v_us FROM sync.user_state WHERE user_id = p_user;
  IF NOT FOUND THEN
    RETURN QUERY SELECT sync.err('scope_uninitialized', 'the scope is not initialized; connect first'), NULL::text;
    RETURN;
  END IF;
  v_err := coalesce(sync.check_source(v_us.user_id, p_source, false), sync.check_read_scope(v_us.user_id));
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
    PERFORM sync.count(p_user, 'history_pruned', 1);
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
  -- Budgets are in escaped bytes (sync.wire_bytes), what the response costs inside a Lambda
  -- function result. Each bundle costs its head plus its stored rows' sizes (rows committed before
  -- layout 5, and rows asked for in a longer form than stored, are measured here); 96 bytes cover
  -- the page's own envelope.
  RETURN QUERY
  WITH page AS (
    SELECT b.*, sum(b.cost) OVER (ORDER BY b.bundle_seq) + 96 AS cumulative
    FROM (SELECT l.*, CASE WHEN p_form = 2 THEN coalesce(l.bundle_hash_v2, l.bundle_hash) ELSE l.bundle_hash END AS hash,
                 sync.wire_bytes(sync.bundle_head_text(l.bundle_seq, l.source_id, l.source_bundle_id, l.row_count, l.bundle_hash)
                   || ',"rows_omitted":false,"rows":[]},') + coalesce(CASE WHEN l.json_form = p_form OR (l.json_form > p_form AND NOT v_measure) THEN l.wire_bytes END, (
                   SELECT sum(coalesce(CASE WHEN tc.json_columns IS NULL OR l.json_form = p_form
                                              OR (l.json_form > p_form AND NOT tc.columns @> '[{"type": "json"}]') THEN r.wire_bytes END,
                            sync.wire_bytes(sync.committed_row_in_form(tc.row_json_prefix, tc.key_kind, tc.json_columns, r.key_bytes, r.op_code,
                              r.bundle_seq, r.payload, NULL, l.json_form, p_form))) + 1)
                     FROM sync.bundle_rows r JOIN sync.table_catalog tc ON tc.table_id = r.table_id
                    WHERE r.user_id = l.user_id AND r.bundle_seq = l.bundle_seq), 0) AS cost
          FROM sync.bundle_log l WHERE l.user_id = v_us.user_id AND l.bundle_seq > p_after AND l.bundle_seq <= v_stable
          ORDER BY l.bundle_seq LIMIT p_max) b
  ), chosen AS (
    -- The first bundle always goes; one too large for a response goes without its rows.
    SELECT page.*, page.cumulative > p_budget AS omitted FROM page
     WHERE page.cumulative <= p_budget OR page.bundle_seq = p_after + 1
  )
  -- The body is JSON text built by concatenation end to end: stored row texts (rendered once at
  -- commit) are joined, nothing is parsed back into json, and the edge joins the parts as they are.
  SELECT NULL::jsonb, x.piece FROM (
    SELECT 0 AS part, 0::bigint AS seq, '{"stable_bundle_seq":' || v_stable || ',"bundles":[' AS piece
    UNION ALL
    SELECT 1, c.bundle_seq, CASE WHEN c.bundle_seq = (SELECT min(f.bundle_seq) FROM chosen f) THEN '' ELSE ',' END
      || sync.bundle_head_text(c.bundle_seq, c.source_id, c.source_bundle_id, c.row_count, c.hash)
      || ',"rows_omitted":' || c.omitted::text || ',"rows":[' || CASE WHEN c.omitted THEN '' ELSE (
          -- A row stored in the asked form is its stored text; only the others read their table's
          -- catalog entry (a join for every row was a fifth of the statement, layout 22).
          SELECT coalesce(string_agg(CASE WHEN c.json_form = p_form AND r.row_text IS NOT NULL THEN r.row_text ELSE (
                   SELECT sync.committed_row_in_form(tc.row_json_prefix, tc.key_kind, tc.json_columns, r.key_bytes,
                     r.op_code, r.bundle_seq, r.payload, r.row_text, c.json_form, p_form)
                     FROM sync.table_catalog tc WHERE tc.table_id = r.table_id) END, ',' ORDER BY r.row_ordinal), '')
            FROM sync.bundle_rows r
           WHERE r.user_id = v_us.user_id AND r.bundle_seq = c.bundle_seq) END || ']}'
      FROM chosen c
    UNION ALL
    SELECT 2, 0, '],"has_more":' || (coalesce((SELECT max(l.bundle_seq) FROM chosen l), p_after) < v_stable)::text || '}'
  ) x ORDER BY x.part, x.seq;
END
$fn$
`);

/** Layout 27's sync.pull_parts as one text, for builds before it (a rolling deploy). */
export const pullSql = joinedPageReader('pull',
  'p_user text, p_source text, p_after bigint, p_max integer, p_target bigint, p_budget bigint, p_form smallint DEFAULT 1',
  'p_user, p_source, p_after, p_max, p_target, p_budget, p_form');

/**
 * A page of one committed bundle's rows, in protocol `p_form`'s json form, as the parts of its
 * body in order (see sync.pull_parts): the head, the rows 128 at a time (a comma before all but
 * the first run), the tail.
 */
export const committedRowsPartsSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.committed_rows_parts(p_user text, p_seq bigint, p_after bigint, p_max integer, p_budget bigint,
  p_form smallint DEFAULT 1)
RETURNS TABLE (error jsonb, body text) LANGUAGE plpgsql AS $fn$
DECLARE
  v_us sync.user_state;
  v_b sync.bundle_log;
  v_head text;
  v_envelope integer;
BEGIN
  SELECT * INTO v_us FROM sync.user_state WHERE user_id = p_user;
  IF FOUND THEN
    SELECT * INTO v_b FROM sync.bundle_log WHERE user_id = v_us.user_id AND bundle_seq = p_seq;
  END IF;
  IF v_b.bundle_seq IS NULL THEN
    IF v_us.user_id IS NOT NULL AND p_seq >= 1 AND p_seq <= v_us.retained_floor THEN
      PERFORM sync.count(p_user, 'history_pruned', 1);
      RETURN QUERY SELECT sync.err('history_pruned', format('bundle %s is below the retained history floor %s; rebuild from a snapshot',
        p_seq, v_us.retained_floor), jsonb_build_object('retained_floor', v_us.retained_floor)), NULL::text;
      RETURN;
    END IF;
    RETURN QUERY SELECT sync.err('committed_bundle_not_found', format('bundle %s does not exist', p_seq)), NULL::text;
    RETURN;
  END IF;
  IF p_seq <= v_us.retained_floor THEN
    PERFORM sync.count(p_user, 'history_pruned', 1);
    RETURN QUERY SELECT sync.err('history_pruned', format('bundle %s is below the retained history floor %s; rebuild from a snapshot',
      p_seq, v_us.retained_floor), jsonb_build_object('retained_floor', v_us.retained_floor)), NULL::text;
    RETURN;
  END IF;
  -- Budgets are in escaped bytes (sync.wire_bytes): each row its stored size plus a comma (rows
  -- committed before layout 5 are measured here), plus the page's own envelope.
  v_head := sync.bundle_head_text(v_b.bundle_seq, v_b.source_id, v_b.source_bundle_id, v_b.row_count,
    CASE WHEN p_form = 2 THEN coalesce(v_b.bundle_hash_v2, v_b.bundle_hash) ELSE v_b.bundle_hash END);
  v_envelope := sync.wire_bytes(v_head || ',"rows":[],"next_row_ordinal":' || (p_after + p_max) || ',"has_more":false}');
  RETURN QUERY
  WITH page AS (
    SELECT r.row_ordinal, r.row_text, r.table_id, r.key_bytes, r.op_code, r.payload,
           tc.row_json_prefix, tc.key_kind, tc.json_columns,
           sum(coalesce(CASE WHEN tc.json_columns IS NULL OR v_b.json_form = p_form
                               OR (v_b.json_form > p_form AND NOT tc.columns @> '[{"type": "json"}]') THEN r.wire_bytes END,
             sync.wire_bytes(sync.committed_row_in_form(tc.row_json_prefix, tc.key_kind, tc.json_columns, r.key_bytes, r.op_code,
               r.bundle_seq, r.payload, NULL, v_b.json_form, p_form))) + 1) OVER (ORDER BY r.row_ordinal) + v_envelope AS cumulative
    -- Ordinals are dense (0 … row_count - 1), so the page is the closed range [p_after, p_after + p_max):
    -- a range scan of the primary key (user_id, bundle_seq, row_ordinal). Without the upper bound
    -- a bundle's whole remainder was read and sorted for every page.
    FROM (SELECT * FROM sync.bundle_rows WHERE user_id = v_us.user_id AND bundle_seq = p_seq
            AND row_ordinal >= p_after AND row_ordinal < p_after + p_max
          ORDER BY row_ordinal) r
    JOIN sync.table_catalog tc ON tc.table_id = r.table_id
  ), chosen AS (
    SELECT page.* FROM page WHERE page.cumulative <= p_budget OR page.row_ordinal = p_after
  )
  -- JSON text by concatenation of the rows rendered at commit, never cast to json (see sync.pull_parts).
  -- The page's rows are a contiguous run from p_after (its first row always goes), so run 0 is first.
  SELECT NULL::jsonb, x.piece FROM (
    SELECT 0 AS part, 0::bigint AS run, v_head || ',"rows":[' AS piece
    UNION ALL
    SELECT 1, (c.row_ordinal - p_after) / 128, CASE WHEN (c.row_ordinal - p_after) / 128 = 0 THEN '' ELSE ',' END
      || string_agg(sync.committed_row_in_form(c.row_json_prefix, c.key_kind, c.json_columns, c.key_bytes, c.op_code, p_seq,
           c.payload, c.row_text, v_b.json_form, p_form), ',' ORDER BY c.row_ordinal)
      FROM chosen c GROUP BY (c.row_ordinal - p_after) / 128
    UNION ALL
    SELECT 2, 0, '],"next_row_ordinal":' || (p_after + count(t.row_ordinal))
      || ',"has_more":' || (p_after + count(t.row_ordinal) < v_b.row_count)::text || '}' FROM chosen t
  ) x ORDER BY x.part, x.run;
END
$fn$
`);

/** Layout 27's sync.committed_rows_parts as one text, for builds before it (a rolling deploy). */
export const committedRowsSql = joinedPageReader('committed_rows',
  'p_user text, p_seq bigint, p_after bigint, p_max integer, p_budget bigint, p_form smallint DEFAULT 1',
  'p_user, p_seq, p_after, p_max, p_budget, p_form');
