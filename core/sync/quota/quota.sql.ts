/**
 * Per-user caps (protocol §8): open push sessions, open snapshot sessions and staged bytes per
 * user, kept as counters in `sync.user_quota` by the functions that open and close sessions
 * (create, commit, delete, maintenance), so enforcing a cap reads one row, never a session table.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 *
 * Lock order: a session row, or the user's state row, before the quota row; the quota row is
 * taken last and held only to the end of its short statement.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * The 429 answer for a user at a cap: Retry-After is when the user's oldest open session of that
 * kind expires (an index probe of this user's sessions), or the next maintenance run
 * (`p_reap_seconds`) once it has expired and only waits to be removed.
 */
export const rateLimitedSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.rate_limited(p_user text, p_kind text, p_limit text, p_value bigint, p_reap_seconds integer)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $fn$
DECLARE
  v_oldest timestamptz;
BEGIN
  IF p_kind = 'snapshot' THEN
    SELECT min(expires_at) INTO v_oldest FROM sync.snapshot_sessions WHERE user_id = p_user;
  ELSE
    SELECT min(expires_at) INTO v_oldest FROM sync.push_sessions WHERE user_id = p_user AND status = 'staging';
  END IF;
  RETURN sync.err('rate_limited', format('this user is at %s (%s); finish, delete or let expire an open session first', p_limit, p_value),
    jsonb_build_object('limit', p_limit, 'retry_after_seconds', greatest(1, CASE WHEN v_oldest IS NULL OR v_oldest <= now() THEN p_reap_seconds
      ELSE ceil(extract(epoch FROM v_oldest - now()))::integer END)));
END
$fn$
`);
