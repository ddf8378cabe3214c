/**
 * Push notifications: the WebSocket connections of each user (API Gateway's connection ids, kept
 * here because Lambda keeps nothing between invocations), and the commit signal a long-running
 * server listens to.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * Registers a connection of `p_user` at `$connect`. The user's expired rows (a `$disconnect` that
 * never came) go first; over `p_max` open connections the answer is `rate_limited`, so one user
 * cannot fill the table (the client falls back to long polls). Answers the user's latest
 * bundle_seq, so the socket can tell the device at once whether it is behind.
 */
export const wsConnectSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.ws_connect(p_user text, p_source text, p_connection text, p_ttl_seconds integer, p_max integer)
RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  v_user text := sync.ensure_user(p_user);
  v_open integer;
BEGIN
  DELETE FROM sync.ws_connections WHERE user_id = v_user AND expires_at <= now();
  -- Serialises this user's $connects, so two at once cannot both pass the cap.
  PERFORM 1 FROM sync.user_state WHERE user_id = v_user FOR UPDATE;
  SELECT count(*) INTO v_open FROM sync.ws_connections WHERE user_id = v_user AND connection_id <> p_connection;
  IF v_open >= p_max THEN
    RETURN sync.err('rate_limited', format('%s WebSocket connections are open for this user (at most %s); use long polls or close one', v_open, p_max),
      jsonb_build_object('retry_after_seconds', 60));
  END IF;
  INSERT INTO sync.ws_connections (connection_id, user_id, source_id, connected_at, expires_at)
  VALUES (p_connection, v_user, p_source, now(), now() + make_interval(secs => p_ttl_seconds))
  ON CONFLICT (user_id, connection_id) DO UPDATE SET source_id = EXCLUDED.source_id,
    connected_at = EXCLUDED.connected_at, expires_at = EXCLUDED.expires_at;
  RETURN jsonb_build_object('latest_bundle_seq', (SELECT latest_bundle_seq FROM sync.user_state WHERE user_id = v_user));
END
$fn$
`);

/**
 * Forgets connections: `$disconnect`, and those API Gateway answered 410 Gone for. PL/pgSQL, as
 * every function that writes the sync tables: the managed-table guard admits those (0009).
 */
export const wsDisconnectSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.ws_disconnect(p_user text, p_connections text[]) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
  v_gone integer;
BEGIN
  DELETE FROM sync.ws_connections WHERE user_id = p_user AND connection_id = ANY (p_connections);
  GET DIAGNOSTICS v_gone = ROW_COUNT;
  RETURN v_gone;
END
$fn$
`);

/**
 * The open connections of a user and the latest bundle_seq to send them: one probe of the user
 * and an index range of that user's connections, never a scan.
 */
export const wsTargetsSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.ws_targets(p_user text) RETURNS TABLE (connection_id text, latest_bundle_seq bigint)
LANGUAGE sql STABLE AS $fn$
  SELECT c.connection_id, u.latest_bundle_seq
    FROM sync.user_state u JOIN sync.ws_connections c ON c.user_id = u.user_id
   WHERE u.user_id = p_user AND c.expires_at > now()
   ORDER BY c.connected_at DESC
$fn$
`);

/**
 * Every committed bundle signals channel `lockstep_commit` with `{"user_id": …, "bundle_seq": …}`.
 * PostgreSQL delivers it when (and only if) the transaction commits, so a listener never hears of
 * a bundle it cannot read yet; pushes, server writes and adoption all insert into bundle_log, so
 * all of them signal. NOTIFY is fine behind a transaction pooler (it travels with the commit); only
 * LISTEN needs a session, and that stays on one dedicated connection per long-running process,
 * never on the request path (core/sync/notify/commit-feed.ts).
 */
export const notifyCommitSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.notify_commit() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM pg_notify('lockstep_commit', json_build_object('user_id', u.user_id, 'bundle_seq', NEW.bundle_seq)::text)
     FROM sync.user_state u WHERE u.user_id = NEW.user_id;
  RETURN NULL;
END
$fn$
`);
