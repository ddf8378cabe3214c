/**
 * Bootstrap's Citus step: when the database has the `citus` extension, distribute the layout as
 * ./distribution.ts plans it (co-located per-user tables, reference catalogs, delegated request
 * functions), in one transaction under the bootstrap lock, or refuse with every blocker when the
 * layout is not ready (its own, and the open runtime items, CITUS_OPEN_ITEMS); without the extension, nothing (one catalog read). Tables Citus already
 * distributes are left as they are, so a second bootstrap changes nothing.
 *
 * It has never run on Citus: this machine kind has no Citus package for PostgreSQL 16/17. What is
 * proven here is the plan (test/scale-readiness.pg.test.ts, test/scale-distribution.test.ts).
 */
import { sql, raw, type Db } from '../db/index.js';
import { CitusLayoutNotReadyError } from '../errors.js';
import { BOOTSTRAP_LOCK_KEY } from '../bootstrap/lock.js';
import { CITUS_OPEN_ITEMS, citusPlan } from './distribution.js';
import { readLayoutFacts } from './layout-facts.js';

export type CitusOutcome = 'absent' | 'distributed';

/** Whether the database has the citus extension. */
export async function hasCitus(db: Db): Promise<boolean> {
  const rows = await db.query<{ present: boolean }>(sql`SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS present`);
  return rows[0]?.present === true;
}

/** Distributes the layout when Citus is installed (see the module comment). */
export async function distributeOnCitus(db: Db): Promise<CitusOutcome> {
  if (!(await hasCitus(db))) return 'absent';
  await db.runTx(async (tx) => {
    await tx.query(sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`);
    const plan = citusPlan(await readLayoutFacts(tx));
    // The layout's own blockers, and the runtime rules not ready yet (never half a layout).
    const blockers = [...plan.blockers, ...CITUS_OPEN_ITEMS];
    if (blockers.length > 0) throw new CitusLayoutNotReadyError(blockers);
    const done = new Set((await tx.query<{ name: string }>(sql`SELECT logicalrelid::regclass::text AS name FROM pg_dist_partition`)).map((r) => r.name));
    for (const statement of plan.statements) {
      if (statement.table !== undefined && done.has(statement.table)) continue;
      await tx.query(sql`${raw(statement.sql)}`);
    }
  }, { statementTimeoutMs: 0, lockTimeoutMs: 60_000, queryTimeoutMs: 0 });
  return 'distributed';
}
