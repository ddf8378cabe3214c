/**
 * The counter ledger (see counters.ts): what committed is counted by the transaction that commits it.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * Adds to a ledger counter inside the caller's transaction: an insert of its own row in the user's
 * ledger (`''` for what no one user did: a runtime's pending counts), so counting
 * never makes two users' transactions wait for each other (maintenance folds the rows).
 * PL/pgSQL, not SQL: the guard of the sync tables recognises a managed writer on the call stack,
 * where a SQL function shows without its schema.
 */
export const countSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.count(p_user text, p_name text, p_delta bigint) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO sync.counter_deltas (user_id, name, delta) VALUES (p_user, p_name, p_delta);
END
$fn$
`);
