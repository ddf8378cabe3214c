/**
 * Server-originated writes: open a bundle context, let the application write, finish the bundle.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/** Server-originated writes: begin, let the application write business rows, then finish. */
export const serverBundleBeginSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.server_bundle_begin(p_user text, p_source text) RETURNS bigint LANGUAGE plpgsql AS $fn$
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
$fn$
`);

export const serverBundleFinishSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.server_bundle_finish(p_retained integer, p_max_row_bytes bigint DEFAULT NULL) RETURNS jsonb LANGUAGE plpgsql AS $fn$
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
  RETURN sync.finalize_bundle(v_pk, v_seq, v_source, v_sbid, NULL, p_retained, p_max_row_bytes);
END
$fn$
`);
