/**
 * Users, sources and the scope lifecycle: what every push, read and connect checks first.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../layout/managed-sql.js';

/** The user's id, its state rows created on first sight (no sequence: the id is the key). */
export const ensureUserSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.ensure_user(p_user text) RETURNS text LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM 1 FROM sync.user_state WHERE user_id = p_user;
  IF FOUND THEN
    RETURN p_user;
  END IF;
  INSERT INTO sync.user_state (user_id, latest_bundle_seq, retained_floor, pruned_through, created_at)
  VALUES (p_user, 0, 0, 0, now())
  ON CONFLICT (user_id) DO NOTHING;
  IF FOUND THEN
    INSERT INTO sync.scope_state (user_id, status, updated_at) VALUES (p_user, 'uninitialized', now());
  END IF;
  RETURN p_user;
END
$fn$
`);

/**
 * NULL when the source may act; an error answer when it was retired. Unknown sources are
 * registered when p_register is set (push, connect, snapshot, server writes), never by pure
 * reads, up to the user's cap of sources that are not retired (`lockstep.max_sources_per_user`,
 * this function's SET clause, which bootstrap installs from the limits): beyond it, 429
 * rate_limited. A registering call notes the source's activity, at most once a day, so
 * maintenance can retire sources idle for long (sync.retire_idle_sources).
 */
export const checkSourceSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.check_source(p_user text, p_source text, p_register boolean) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_src sync.source_state;
  v_max integer := coalesce(nullif(current_setting('lockstep.max_sources_per_user', true), '')::integer, 64);
BEGIN
  SELECT * INTO v_src FROM sync.source_state WHERE user_id = p_user AND source_id = p_source;
  IF NOT FOUND THEN
    IF p_register THEN
      -- An index range of this user's rows, bounded by the cap itself.
      IF (SELECT count(*) FROM (SELECT 1 FROM sync.source_state WHERE user_id = p_user AND status <> 'retired' LIMIT v_max) s) >= v_max THEN
        RETURN sync.err('rate_limited', format('this user already has %s sources (devices); one idle for long is retired by maintenance', v_max),
          jsonb_build_object('limit', 'max_sources_per_user', 'retry_after_seconds', 3600));
      END IF;
      INSERT INTO sync.source_state (user_id, source_id, status, last_source_bundle_id, created_at, last_active_at)
      VALUES (p_user, p_source, 'active', 0, now(), now()) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
  END IF;
  IF v_src.status = 'retired' THEN
    RETURN sync.err('source_retired',
      format('source %s was retired and replaced by %s', p_source, coalesce(v_src.replaced_by_source_id, 'no other source (idle for long): rotate to a new one')),
      jsonb_build_object('source_id', p_source, 'replaced_by_source_id', v_src.replaced_by_source_id));
  END IF;
  IF p_register AND coalesce(v_src.last_active_at, v_src.created_at) < now() - interval '1 day' THEN
    UPDATE sync.source_state SET last_active_at = now() WHERE user_id = p_user AND source_id = p_source;
  END IF;
  RETURN NULL;
END
$fn$
`);

export const checkPushScopeSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.check_push_scope(p_user text, p_source text, p_init uuid) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
  v_sc sync.scope_state;
BEGIN
  SELECT * INTO STRICT v_sc FROM sync.scope_state WHERE user_id = p_user;
  IF v_sc.status = 'initialized' THEN
    IF p_init IS NOT NULL AND p_init IS DISTINCT FROM v_sc.initialization_id THEN
      RETURN sync.err('initialization_stale', 'the initialization_id is not the one that initialized this scope; connect again');
    END IF;
    RETURN NULL;
  ELSIF v_sc.status = 'initializing' THEN
    IF v_sc.lease_source_id IS DISTINCT FROM p_source THEN
      IF v_sc.lease_expires_at <= now() THEN
        RETURN sync.err('scope_uninitialized', 'the scope is not initialized (another device''s lease expired); connect first');
      END IF;
      RETURN sync.err('scope_initializing', 'another device is initializing this scope', jsonb_build_object(
        'retry_after_seconds', greatest(1, ceil(extract(epoch FROM v_sc.lease_expires_at - now())))::integer));
    END IF;
    IF p_init IS DISTINCT FROM v_sc.initialization_id THEN
      RETURN sync.err('initialization_stale', 'the initialization_id is missing, wrong or superseded; connect again');
    END IF;
    IF v_sc.lease_expires_at <= now() THEN
      RETURN sync.err('initialization_expired', 'the initialization lease expired; connect again');
    END IF;
    RETURN NULL;
  END IF;
  RETURN sync.err('scope_uninitialized', 'the scope is not initialized; connect first');
END
$fn$
`);

export const checkReadScopeSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.check_read_scope(p_user text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_sc sync.scope_state;
BEGIN
  SELECT * INTO v_sc FROM sync.scope_state WHERE user_id = p_user;
  IF v_sc.status = 'initialized' THEN
    RETURN NULL;
  ELSIF v_sc.status = 'initializing' AND v_sc.lease_expires_at > now() THEN
    RETURN sync.err('scope_initializing', 'another device is initializing this scope', jsonb_build_object(
      'retry_after_seconds', greatest(1, ceil(extract(epoch FROM v_sc.lease_expires_at - now())))::integer));
  END IF;
  RETURN sync.err('scope_uninitialized', 'the scope is not initialized; connect first');
END
$fn$
`);
