/**
 * POST /sync/connect: the first-connect lifecycle of a scope.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

export const connectSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.connect(p_user text, p_source text, p_has_pending boolean, p_lease_seconds integer) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_user text := sync.ensure_user(p_user);
  v_err jsonb;
  v_sc sync.scope_state;
  v_init uuid;
  v_expires timestamptz := now() + make_interval(secs => p_lease_seconds);
BEGIN
  v_err := sync.check_source(v_user, p_source, true);
  IF v_err IS NOT NULL THEN
    RETURN v_err;
  END IF;
  SELECT * INTO STRICT v_sc FROM sync.scope_state WHERE user_id = v_user FOR UPDATE;
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
      lease_expires_at = v_expires, updated_at = now() WHERE user_id = v_user;
    RETURN jsonb_build_object('resolution', 'initialize_local', 'initialization_id', v_init,
      'lease_expires_at', sync.rfc3339(v_expires));
  END IF;
  UPDATE sync.scope_state SET status = 'initialized', initialization_id = NULL, lease_source_id = NULL,
    lease_expires_at = NULL, updated_at = now() WHERE user_id = v_user;
  RETURN jsonb_build_object('resolution', 'initialize_empty', 'initialization_id', NULL, 'lease_expires_at', NULL);
END
$fn$
`);
