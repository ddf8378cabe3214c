/**
 * `/syncx/status`'s read, as a managed function so that it carries the lock bound bootstrap
 * installs on every function a request calls (core/bootstrap/bounds.ts). As a plain SELECT it had
 * none: while bootstrap or an operator held a `sync` table, status waited for the client's query
 * timeout (22 s) before it answered 503. Installed by the migrations; see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * The counters (counters.ts: the one sequence, the folded ledger totals and the rows maintenance
 * has not folded yet), the lifecycle keys of `sync.meta`, and the number of users.
 */
export const statusFactsSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.status_facts(OUT counters jsonb, OUT meta jsonb, OUT sessions jsonb)
LANGUAGE sql STABLE AS $fn$
  SELECT
    (SELECT jsonb_object_agg(c.name, c.value) FROM (
       SELECT u.name, sum(u.value)::bigint AS value FROM (
         SELECT 'rejected_direct_writes'::text AS name, CASE WHEN s.is_called THEN s.last_value ELSE 0 END AS value
           FROM sync.counter_rejected_direct_writes s
         UNION ALL SELECT t.name, t.value FROM sync.counter_totals t
         UNION ALL SELECT d.name, sum(d.delta) FROM sync.counter_deltas d GROUP BY d.name) u
       GROUP BY u.name) c),
    (SELECT jsonb_object_agg(m.key, m.value) FROM sync.meta m WHERE m.key IN ('ready', 'created_at')),
    jsonb_build_object('users', (SELECT count(*) FROM sync.user_state))
$fn$
`);
