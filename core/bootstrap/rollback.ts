/**
 * What a bootstrap finds during a rollback (a failed deploy's CloudFormation rollback re-runs the
 * previous release's bootstrap with the previous settings): it changes nothing, whatever it
 * finds, because the layout and the registered tables only move forward, and a rollback that
 * cannot end leaves the stack in UPDATE_ROLLBACK_FAILED (issue 25 item 7). It reads the layout
 * and says whether this build's functions can serve it.
 */
import { sql, Isolation, type Db } from '../db/index.js';
import { LAYOUT_VERSION, MIN_SERVED_LAYOUT, servable } from '../layout/version.js';
import { readLayoutVersion, type LayoutVersion } from './migrate.js';

export interface RollbackView {
  /** The database's layout; null when it has none (nothing to serve yet). */
  readonly layout: LayoutVersion | null;
  readonly schemaVersion: number | null;
  /** Whether this build's functions serve that layout, and if not, the operator's next step. */
  readonly servable: ReturnType<typeof servable>;
}

/** Reads the layout in a READ ONLY transaction; writes nothing. */
export async function inspectForRollback(db: Db): Promise<RollbackView> {
  return db.runTx(async (tx) => {
    const layout = await readLayoutVersion(tx);
    if (!layout) {
      return { layout, schemaVersion: null, servable: { ok: false, reason: 'layout_upgrade_required', detail: 'the database has no sync layout: run bootstrap' } as const };
    }
    const [row] = await tx.query<{ value: string | null }>(sql`SELECT value FROM sync.meta WHERE key = 'schema_version'`);
    return {
      layout,
      schemaVersion: row?.value ? Number(row.value) : null,
      servable: servable(layout, { version: LAYOUT_VERSION, minServed: MIN_SERVED_LAYOUT }),
    };
  }, { readOnly: true, isolation: Isolation.repeatableRead });
}
