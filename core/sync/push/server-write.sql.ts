/**
 * Server-originated writes: open a bundle context, let the application write, finish the bundle.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * Server-originated writes: begin opens the bundle context of this transaction (a row of
 * sync.bundle_context only these functions write), the application writes business rows, finish
 * turns what was captured into one committed bundle and closes it. A transaction that begins and
 * never finishes cannot commit (sync.check_bundle_finished).
 */
export const serverBundleBeginSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.server_bundle_begin(p_user text, p_source text) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_user text := sync.ensure_user(p_user);
  v_err jsonb;
  v_latest bigint;
BEGIN
  -- The transaction's open bundle, whoever's it is, is named by the setting its opener made.
  IF EXISTS (SELECT 1 FROM sync.bundle_context WHERE user_id = current_setting('lockstep.bundle_user', true) AND xact = txid_current()) THEN
    RAISE EXCEPTION 'lockstep: a bundle is already open in this transaction' USING ERRCODE = '55000';
  END IF;
  v_err := sync.check_source(v_user, p_source, true);
  IF v_err IS NOT NULL THEN
    RAISE EXCEPTION 'lockstep: %', v_err->>'message' USING ERRCODE = '55000';
  END IF;
  SELECT latest_bundle_seq INTO v_latest FROM sync.user_state WHERE user_id = v_user FOR UPDATE;
  INSERT INTO sync.bundle_context (xact, user_id, source, kind) VALUES (txid_current(), v_user, p_source, 'server');
  PERFORM set_config('lockstep.bundle_user', v_user, true);
  RETURN v_latest;
END
$fn$
`);

export const serverBundleFinishSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.server_bundle_finish(p_user text, p_retained integer, p_max_row_bytes bigint DEFAULT NULL) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_ctx sync.bundle_context;
  v_seq bigint;
  v_sbid bigint;
BEGIN
  SELECT * INTO v_ctx FROM sync.bundle_context WHERE user_id = p_user AND xact = txid_current();
  IF NOT FOUND OR v_ctx.kind <> 'server' THEN
    RAISE EXCEPTION 'lockstep: no server bundle is open in this transaction' USING ERRCODE = '55000';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM sync.capture_rows WHERE user_id = p_user AND xact = txid_current()) THEN
    DELETE FROM sync.bundle_context WHERE user_id = p_user AND xact = txid_current();
    RETURN NULL;
  END IF;
  SELECT latest_bundle_seq + 1 INTO STRICT v_seq FROM sync.user_state WHERE user_id = v_ctx.user_id;
  SELECT last_source_bundle_id + 1 INTO STRICT v_sbid FROM sync.source_state WHERE user_id = v_ctx.user_id AND source_id = v_ctx.source;
  UPDATE sync.scope_state SET status = 'initialized', initialization_id = NULL, lease_source_id = NULL,
    lease_expires_at = NULL, updated_at = now() WHERE user_id = v_ctx.user_id AND status <> 'initialized';
  RETURN sync.finalize_bundle(v_ctx.user_id, v_seq, v_ctx.source, v_sbid, NULL, p_retained, p_max_row_bytes);
END
$fn$
`);
