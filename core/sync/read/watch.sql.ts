/**
 * The long poll's read, as a managed function so that it carries the lock bound bootstrap
 * installs on every function a request calls (core/bootstrap/bounds.ts). As a plain SELECT it had
 * none: while an operator held `sync.user_state`, a watch asking to wait 1 s waited for the
 * client's query timeout (22 s) before it answered 503. Installed by the migrations; see
 * core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/** The user's latest committed bundle_seq; NULL for a user the database has never seen. */
export const watchLatestSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.watch_latest(p_user text) RETURNS bigint
LANGUAGE sql STABLE AS $fn$
  SELECT s.latest_bundle_seq FROM sync.user_state s WHERE s.user_id = p_user
$fn$
`);
