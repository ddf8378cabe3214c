/**
 * Maintenance: expired sessions and pruned history, deleted in bounded steps.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/** One bounded step of maintenance; the caller loops while it reports more work. */
export const maintenanceStepSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.maintenance_step(p_batch integer) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_push_rows integer; v_push integer; v_snap_rows integer; v_snap integer; v_bundle_rows integer := 0; v_n integer;
  v_pruned integer; v_folded integer;
  v_u record;
BEGIN
  -- One maintenance run at a time (the schedule, a local timer, an operator): a second one has
  -- nothing to do that the first is not doing, and would only contend for the same rows.
  IF NOT pg_try_advisory_xact_lock(7020140422) THEN
    RETURN jsonb_build_object('push_session_rows', 0, 'push_sessions', 0, 'snapshot_session_rows', 0, 'snapshot_sessions', 0,
      'bundle_rows', 0, 'counters_folded', 0, 'more', false, 'busy', true);
  END IF;
  -- History first: it locks user_state rows, which commits lock before the user's quota row, so
  -- taking quota rows (below) only after them keeps one lock order.
  FOR v_u IN SELECT user_id, pruned_through, retained_floor FROM sync.user_state WHERE pruned_through < retained_floor LIMIT 10 LOOP
    DELETE FROM sync.bundle_rows WHERE ctid = ANY (ARRAY(
      SELECT ctid FROM sync.bundle_rows WHERE user_id = v_u.user_id AND bundle_seq > v_u.pruned_through
         AND bundle_seq <= v_u.retained_floor LIMIT p_batch));
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_bundle_rows := v_bundle_rows + v_n;
    IF v_n < p_batch THEN
      DELETE FROM sync.bundle_log WHERE user_id = v_u.user_id AND bundle_seq > v_u.pruned_through AND bundle_seq <= v_u.retained_floor;
      GET DIAGNOSTICS v_pruned = ROW_COUNT;
      IF v_pruned > 0 THEN
        PERFORM sync.count(v_u.user_id, 'bundles_pruned', v_pruned);
      END IF;
      UPDATE sync.user_state SET pruned_through = v_u.retained_floor WHERE user_id = v_u.user_id;
    END IF;
  END LOOP;
  DELETE FROM sync.push_session_rows WHERE ctid = ANY (ARRAY(
    SELECT r.ctid FROM sync.push_sessions s JOIN sync.push_session_rows r ON r.user_id = s.user_id AND r.push_id = s.push_id
     WHERE s.expires_at <= now() LIMIT p_batch));
  GET DIAGNOSTICS v_push_rows = ROW_COUNT;
  -- An expired session that was still staging leaves its user's open sessions and staged bytes.
  WITH gone AS (
    DELETE FROM sync.push_sessions s USING (
      SELECT user_id, push_id FROM sync.push_sessions WHERE expires_at <= now() ORDER BY expires_at LIMIT p_batch) e
     WHERE s.user_id = e.user_id AND s.push_id = e.push_id
      AND NOT EXISTS (SELECT 1 FROM sync.push_session_rows r WHERE r.user_id = s.user_id AND r.push_id = s.push_id)
    RETURNING s.user_id, s.status, s.byte_count),
  freed AS (
    UPDATE sync.user_quota q SET open_push_sessions = q.open_push_sessions - g.n, staged_bytes = q.staged_bytes - g.bytes
      FROM (SELECT user_id, count(*) AS n, sum(byte_count) AS bytes FROM gone WHERE status = 'staging' GROUP BY user_id) g
     WHERE q.user_id = g.user_id RETURNING 1)
  SELECT count(*) INTO v_push FROM gone;
  DELETE FROM sync.snapshot_session_rows WHERE ctid = ANY (ARRAY(
    SELECT r.ctid FROM sync.snapshot_sessions s JOIN sync.snapshot_session_rows r ON r.user_id = s.user_id AND r.snapshot_id = s.snapshot_id
     WHERE s.expires_at <= now() LIMIT p_batch));
  GET DIAGNOSTICS v_snap_rows = ROW_COUNT;
  WITH gone AS (
    DELETE FROM sync.snapshot_sessions s USING (
      SELECT user_id, snapshot_id FROM sync.snapshot_sessions WHERE expires_at <= now() ORDER BY expires_at LIMIT p_batch) e
     WHERE s.user_id = e.user_id AND s.snapshot_id = e.snapshot_id
      AND NOT EXISTS (SELECT 1 FROM sync.snapshot_session_rows r WHERE r.user_id = s.user_id AND r.snapshot_id = s.snapshot_id)
    RETURNING s.user_id),
  freed AS (
    UPDATE sync.user_quota q SET open_snapshot_sessions = q.open_snapshot_sessions - g.n
      FROM (SELECT user_id, count(*) AS n FROM gone GROUP BY user_id) g
     WHERE q.user_id = g.user_id RETURNING 1)
  SELECT count(*) INTO v_snap FROM gone;
  -- Snapshot data sets past their expiry (the latest of their sessions', or the grace after the
  -- last one was deleted): chunks in batches, then the data set. Locked and skipped when locked,
  -- so a create that is sharing one (and extending its expiry) wins.
  DELETE FROM sync.snapshot_chunks WHERE ctid = ANY (ARRAY(
    SELECT c.ctid FROM (SELECT user_id, data_id FROM sync.snapshot_data WHERE expires_at <= now() ORDER BY expires_at LIMIT p_batch
                         FOR UPDATE SKIP LOCKED) d
      JOIN sync.snapshot_chunks c ON c.user_id = d.user_id AND c.data_id = d.data_id
     LIMIT p_batch));
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_snap_rows := v_snap_rows + v_n;
  DELETE FROM sync.snapshot_data d USING (
    SELECT user_id, data_id FROM sync.snapshot_data WHERE expires_at <= now() ORDER BY expires_at LIMIT p_batch FOR UPDATE SKIP LOCKED) e
   WHERE d.user_id = e.user_id AND d.data_id = e.data_id
    AND d.expires_at <= now() AND NOT EXISTS (SELECT 1 FROM sync.snapshot_chunks c WHERE c.user_id = d.user_id AND c.data_id = d.data_id);
  GET DIAGNOSTICS v_n = ROW_COUNT;
  v_snap_rows := v_snap_rows + v_n;
  -- Fold the counter ledger into its totals, a batch at a time; rows inserted meanwhile stay for
  -- the next step, and two runs never fold one row twice (each deletes what it returns).
  WITH moved AS (
    DELETE FROM sync.counter_deltas WHERE ctid = ANY (ARRAY(SELECT ctid FROM sync.counter_deltas LIMIT p_batch))
    RETURNING name, delta)
  INSERT INTO sync.counter_totals AS t (name, value) SELECT name, sum(delta) FROM moved GROUP BY name
  ON CONFLICT (name) DO UPDATE SET value = t.value + EXCLUDED.value;
  GET DIAGNOSTICS v_folded = ROW_COUNT;
  RETURN jsonb_build_object('push_session_rows', v_push_rows, 'push_sessions', v_push, 'snapshot_session_rows', v_snap_rows,
    'snapshot_sessions', v_snap, 'bundle_rows', v_bundle_rows, 'counters_folded', v_folded,
    'more', v_push_rows + v_push + v_snap_rows + v_snap + v_bundle_rows + v_folded > 0);
END
$fn$
`);

/**
 * Retires sources idle for `p_idle_seconds` (no commit, connect, push session, snapshot or server
 * write: sync.check_source notes activity at most daily), at most `p_batch` at a time, oldest
 * first, through the partial index of sources that are not retired. A retired source is answered
 * `source_retired` (replaced_by_source_id null) and recovers by rotation, as after any
 * retirement (docs/protocol.md §10.5); it no longer counts against the user's cap of sources.
 */
export const retireIdleSourcesSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.retire_idle_sources(p_idle_seconds integer, p_batch integer) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
  v_n integer;
BEGIN
  UPDATE sync.source_state s SET status = 'retired'
    FROM (SELECT user_id, source_id FROM sync.source_state
           WHERE status <> 'retired' AND coalesce(last_active_at, created_at) < now() - make_interval(secs => p_idle_seconds)
           ORDER BY coalesce(last_active_at, created_at) LIMIT p_batch FOR UPDATE SKIP LOCKED) idle
   WHERE s.user_id = idle.user_id AND s.source_id = idle.source_id;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  RETURN v_n;
END
$fn$
`);
