/**
 * Time bounds bootstrap installs, so that no request waits without end in any mode (Lambda, the
 * local runtime, DATABASE_URL), on connections opened before or after it ran (issue 15 item 6,
 * issue 17 item 3):
 * - every managed function a request calls waits for a lock at most `lock_timeout_ms` (a SET
 *   clause of the function: it holds on any connection, pooled or not, whatever the session says);
 *   the runtime's transactions set their statement, lock and idle-in-transaction bounds
 *   transaction-locally (core/db/port.ts), and every statement has the client-side query bound;
 * - only when asked (SYNC_ROLE_TIMEOUTS=on, the template's RoleTimeouts): the role's settings in
 *   this database: statement_timeout, lock_timeout, idle_in_transaction_session_timeout and
 *   client_connection_check_interval. They bind every session of the role, the application's own
 *   migrations and backfills too (issue 25 item 6: a pg_sleep(21) of the role failed with 57014),
 *   so by default bootstrap does not set them, and removes those an earlier release set: the ones
 *   whose values are exactly its bounds (a value the operator chose otherwise stays).
 */
import { sql, type Db, type Queryable } from '../db/index.js';
import { quoteIdent } from '../db/sql.js';
import { defaultLimits, type Limits } from '../limits.js';
import { REQUEST_PATH_FUNCTIONS } from '../scale/distribution.js';

/** Managed functions a request or maintenance calls that read or keep the whole database, not one user's scope. */
const UNSCOPED_REQUEST_FUNCTIONS = ['status_facts', 'layout_state', 'maintenance_step'] as const;

/**
 * The managed functions a request (or maintenance) calls directly, named without the schema: the
 * request path's list (the one Citus delegates) and the unscoped ones. Derived, not repeated: a
 * reader added to the request path without its lock bound waited for a lock until the client's
 * query bound (22 s) instead of lock_timeout_ms (layout 27's page readers, until this).
 */
export const REQUEST_FUNCTIONS: readonly string[] = [
  ...REQUEST_PATH_FUNCTIONS.map((f) => f.name.replace(/^sync\./, '')),
  ...UNSCOPED_REQUEST_FUNCTIONS,
];

export type TimeBounds = Pick<Limits, 'statementTimeoutMs' | 'lockTimeoutMs' | 'idleInTransactionTimeoutMs' | 'clientCheckIntervalMs' | 'maxSourcesPerUser'>;

export const DEFAULT_BOUNDS: TimeBounds = defaultLimits;

/**
 * The SET clauses bootstrap installs on managed functions: the lock bound of every function a
 * request calls, and the limits a managed function enforces by itself (sync.check_source caps a
 * user's sources at `lockstep.max_sources_per_user`). A function's SET clause holds on every
 * connection, pooled or not, and is undone when the function returns.
 */
function wantedSettings(bounds: TimeBounds): Array<{ readonly functions: readonly string[]; readonly setting: string; readonly value: number }> {
  return [
    { functions: REQUEST_FUNCTIONS, setting: 'lock_timeout', value: Math.trunc(bounds.lockTimeoutMs) },
    { functions: ['check_source'], setting: 'lockstep.max_sources_per_user', value: Math.trunc(bounds.maxSourcesPerUser) },
  ];
}

/** Each setting a function lacks (or has with another value), as `regprocedure` text and setting. */
async function missingSettings(db: Queryable, bounds: TimeBounds): Promise<Array<{ fn: string; setting: string; value: number }>> {
  const wanted = wantedSettings(bounds);
  const rows = await db.query<{ name: string; fn: string; config: string }>(sql`
    SELECT p.proname AS name, p.oid::regprocedure::text AS fn, coalesce(array_to_string(p.proconfig, ','), '') AS config
      FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = 'sync')
       AND p.proname = ANY (${wanted.flatMap((w) => [...w.functions])}::text[])
     ORDER BY 2`);
  // Other settings a function declares (work_mem of snapshot_create) stay beside these.
  return rows.flatMap((r) => wanted
    .filter((w) => w.functions.includes(r.name) && !r.config.split(',').includes(`${w.setting}=${w.value}`))
    .map((w) => ({ fn: r.fn, setting: w.setting, value: w.value })));
}

/** Functions whose installed settings differ from the wanted ones, as `regprocedure` text. */
export async function functionsToBound(db: Queryable, bounds: TimeBounds): Promise<string[]> {
  return [...new Set((await missingSettings(db, bounds)).map((m) => m.fn))];
}

/** Sets those settings (inside bootstrap's transaction, after migrations). */
export async function boundFunctions(tx: Queryable, bounds: TimeBounds): Promise<void> {
  const missing = await missingSettings(tx, bounds);
  if (missing.length === 0) return;
  // regprocedure text is already quoted where it needs to be; the values are integers.
  await tx.simple(missing.map((m) => `ALTER FUNCTION ${m.fn} SET ${m.setting} = ${m.value}`).join(';\n'));
}

/** What bootstrap did about the role's settings. */
export type RoleBoundsOutcome = 'unchanged' | 'installed' | 'removed' | 'skipped' | `refused: ${string}`;

function roleSettings(bounds: TimeBounds): Record<string, number> {
  return {
    statement_timeout: Math.trunc(bounds.statementTimeoutMs),
    lock_timeout: Math.trunc(bounds.lockTimeoutMs),
    idle_in_transaction_session_timeout: Math.trunc(bounds.idleInTransactionTimeoutMs),
    client_connection_check_interval: Math.trunc(bounds.clientCheckIntervalMs),
  };
}

/**
 * Installs the role's settings in this database when they differ (a read otherwise, so a
 * revalidating bootstrap writes nothing). A role that may not set them leaves them as they are:
 * the function bounds and the runtime's client-side bounds still hold.
 */
async function roleConfig(db: Db): Promise<{ have: Set<string>; database: string }> {
  const [row] = await db.query<{ config: string[] | null; database: string }>(sql`
    SELECT (SELECT s.setconfig FROM pg_db_role_setting s
             WHERE s.setrole = (SELECT oid FROM pg_roles WHERE rolname = current_user)
               AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())) AS config,
           current_database() AS database`);
  return { have: new Set(row?.config ?? []), database: row?.database ?? '' };
}

export async function installRoleBounds(db: Db, bounds: TimeBounds): Promise<RoleBoundsOutcome> {
  const { have, database: name } = await roleConfig(db);
  const want = Object.entries(roleSettings(bounds)).filter(([setting, value]) => !have.has(`${setting}=${value}`));
  if (want.length === 0) return 'unchanged';
  const database = quoteIdent(name);
  try {
    await db.runTx(async (tx) => {
      await tx.simple(want.map(([name, value]) => `ALTER ROLE CURRENT_USER IN DATABASE ${database} SET ${name} = ${value}`).join(';\n'));
    });
    return 'installed';
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
}

/**
 * Removes the role's settings in this database that an earlier release installed: those whose
 * value is exactly one of `bounds` (the current limits) or the default limits. A read otherwise,
 * so a revalidating bootstrap writes nothing; a value the operator set otherwise is left alone.
 */
export async function removeRoleBounds(db: Db, bounds: TimeBounds): Promise<RoleBoundsOutcome> {
  const { have, database } = await roleConfig(db);
  const ours = new Set([...Object.entries(roleSettings(bounds)), ...Object.entries(roleSettings(DEFAULT_BOUNDS))].map(([name, value]) => `${name}=${value}`));
  const names = [...new Set([...have].filter((setting) => ours.has(setting)).map((setting) => setting.slice(0, setting.indexOf('='))))];
  if (names.length === 0) return 'unchanged';
  try {
    await db.runTx(async (tx) => {
      await tx.simple(names.map((name) => `ALTER ROLE CURRENT_USER IN DATABASE ${quoteIdent(database)} RESET ${name}`).join(';\n'));
    });
    return 'removed';
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
}
