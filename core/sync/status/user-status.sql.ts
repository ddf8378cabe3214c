/**
 * Operator status of one user (issue 17 item 7): what an operator asks when a user says "my
 * phone does not sync". Every read is a probe of a primary key or of the leading columns of an
 * index, bounded by this one user's rows: no table scan, nothing of other users.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/** The table the outcome notes live in (one row per user who ever had a conflict or a rejection). */
export const USER_OUTCOMES_DDL = `CREATE TABLE sync.user_outcomes (
  user_pk bigint PRIMARY KEY,
  last_conflict_at timestamptz,
  last_conflict jsonb,
  last_rejection_at timestamptz,
  last_rejection jsonb
)`;

/**
 * Keeps a user's last conflict or last rejection: the source, the bundle it tried, and what the
 * answer said (the first conflict, or the violation). Called by the runtime after a commit answered
 * push_conflict or push_rejected; one upsert of the user's row.
 */
export const noteOutcomeSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.note_outcome(p_user_id text, p_source_id text, p_kind text, p_detail jsonb)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  v_user text;
  v_note jsonb;
  v_bytes bigint;
BEGIN
  SELECT user_id INTO v_user FROM sync.user_state WHERE user_id = p_user_id;
  IF v_user IS NULL OR p_kind NOT IN ('conflict', 'rejection') THEN
    RETURN;
  END IF;
  v_note := jsonb_build_object('source_id', p_source_id) || coalesce(p_detail, '{}'::jsonb);
  INSERT INTO sync.user_outcomes AS o (user_id, last_conflict_at, last_conflict, last_rejection_at, last_rejection)
  VALUES (v_user,
          CASE WHEN p_kind = 'conflict' THEN now() END, CASE WHEN p_kind = 'conflict' THEN v_note END,
          CASE WHEN p_kind = 'rejection' THEN now() END, CASE WHEN p_kind = 'rejection' THEN v_note END)
  ON CONFLICT (user_id) DO UPDATE SET
    last_conflict_at = CASE WHEN p_kind = 'conflict' THEN now() ELSE o.last_conflict_at END,
    last_conflict = CASE WHEN p_kind = 'conflict' THEN v_note ELSE o.last_conflict END,
    last_rejection_at = CASE WHEN p_kind = 'rejection' THEN now() ELSE o.last_rejection_at END,
    last_rejection = CASE WHEN p_kind = 'rejection' THEN v_note ELSE o.last_rejection END;
  -- The rejected session is closed with its answer (layout 14): a repeated commit gets the same
  -- answer from sync.push_commit without applying the bundle again or searching for the row, and
  -- the session no longer counts against the user's caps.
  IF p_kind = 'rejection' AND p_detail ? 'push_id' THEN
    UPDATE sync.push_sessions SET status = 'rejected', rejection = jsonb_build_object('error', 'push_rejected',
        'message', p_detail->>'message', 'violation', p_detail->'violation')
     WHERE user_id = v_user AND push_id = (p_detail->>'push_id')::uuid AND status = 'staging'
    RETURNING byte_count INTO v_bytes;
    IF FOUND THEN
      UPDATE sync.user_quota SET open_push_sessions = open_push_sessions - 1, staged_bytes = staged_bytes - v_bytes
       WHERE user_id = v_user;
      DELETE FROM sync.push_session_rows WHERE user_id = v_user AND push_id = (p_detail->>'push_id')::uuid;
    END IF;
  END IF;
END
$fn$
`);

/**
 * One user's status as one jsonb, or NULL for a user the server never saw:
 * - the stream: latest bundle, retained floor (a checkpoint below it answers history_pruned),
 *   what maintenance pruned, the scope's initialization state;
 * - each source (device), newest first, at most `p_max_sources`: its state, its last pushed
 *   bundle (source_bundle_id, the bundle_seq it became and when) and its lag, the bundles
 *   committed to the stream since that one (the server does not know a device's pull checkpoint,
 *   which stays on the device);
 * - open push and snapshot sessions and staged bytes (the per-user cap counters), and the oldest
 *   open session's expiry;
 * - the last conflict and the last rejection, with their reasons.
 * Reads: user_state by user_id (unique), scope_state, user_quota, user_outcomes by user_id
 * (primary keys), source_state by its (user_id, …) primary key prefix, bundle_log by its
 * (user_id, source_id, source_bundle_id) unique key, sessions by their (user_id, expires_at)
 * indexes.
 */
export const userStatusSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.user_status(p_user_id text, p_max_sources integer)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  v_user sync.user_state;
  v_scope sync.scope_state;
  v_quota sync.user_quota;
  v_outcomes sync.user_outcomes;
  v_sources jsonb;
  v_source_count integer;
BEGIN
  SELECT * INTO v_user FROM sync.user_state WHERE user_id = p_user_id;
  IF v_user.user_id IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT * INTO v_scope FROM sync.scope_state WHERE user_id = v_user.user_id;
  SELECT * INTO v_quota FROM sync.user_quota WHERE user_id = v_user.user_id;
  SELECT * INTO v_outcomes FROM sync.user_outcomes WHERE user_id = v_user.user_id;
  SELECT count(*)::integer INTO v_source_count FROM sync.source_state WHERE user_id = v_user.user_id;
  SELECT coalesce(jsonb_agg(s ORDER BY s.created_at DESC, s.source_id), '[]'::jsonb) INTO v_sources FROM (
    SELECT src.source_id, src.status, src.replaced_by_source_id, src.created_at,
           nullif(src.last_source_bundle_id, 0) AS last_source_bundle_id,
           b.bundle_seq AS last_bundle_seq, b.committed_at AS last_committed_at, b.row_count AS last_row_count,
           CASE WHEN b.bundle_seq IS NOT NULL THEN v_user.latest_bundle_seq - b.bundle_seq END AS bundles_since_last_push
      FROM sync.source_state src
      LEFT JOIN sync.bundle_log b
        ON b.user_id = src.user_id AND b.source_id = src.source_id AND b.source_bundle_id = src.last_source_bundle_id
     WHERE src.user_id = v_user.user_id
     ORDER BY src.created_at DESC, src.source_id
     LIMIT p_max_sources) s;
  RETURN jsonb_build_object(
    'user_id', v_user.user_id,
    'created_at', v_user.created_at,
    'latest_bundle_seq', v_user.latest_bundle_seq,
    'latest_committed_at', (SELECT committed_at FROM sync.bundle_log WHERE user_id = v_user.user_id AND bundle_seq = v_user.latest_bundle_seq),
    'retained_floor', v_user.retained_floor,
    'pruned_through', v_user.pruned_through,
    'scope', CASE WHEN v_scope.user_id IS NULL THEN NULL ELSE jsonb_build_object(
      'status', v_scope.status, 'lease_source_id', v_scope.lease_source_id, 'lease_expires_at', v_scope.lease_expires_at) END,
    'source_count', v_source_count,
    'sources', v_sources,
    'open_push_sessions', coalesce(v_quota.open_push_sessions, 0),
    'open_snapshot_sessions', coalesce(v_quota.open_snapshot_sessions, 0),
    'staged_bytes', coalesce(v_quota.staged_bytes, 0),
    'oldest_push_session_expires_at', (SELECT min(expires_at) FROM sync.push_sessions WHERE user_id = v_user.user_id),
    'oldest_snapshot_session_expires_at', (SELECT min(expires_at) FROM sync.snapshot_sessions WHERE user_id = v_user.user_id),
    'last_conflict', CASE WHEN v_outcomes.last_conflict IS NULL THEN NULL
      ELSE v_outcomes.last_conflict || jsonb_build_object('at', v_outcomes.last_conflict_at) END,
    'last_rejection', CASE WHEN v_outcomes.last_rejection IS NULL THEN NULL
      ELSE v_outcomes.last_rejection || jsonb_build_object('at', v_outcomes.last_rejection_at) END);
END
$fn$
`);
