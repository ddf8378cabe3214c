/**
 * Live views of the client's own state, as queries a live query can keep current (live-query.ts):
 * what is pending, what is set aside, and what conflicts were resolved. The React bindings
 * (client-web/react) and any app read them through `client.liveQuery`, so they change with the
 * transaction that changes them, in every tab.
 */
import { CONFLICT_LOG_SQL, conflictRecord } from './conflict-log.js';
import { type ConflictRecord } from './api.js';

export { CONFLICT_LOG_SQL, conflictRecord };

/**
 * Local changes not yet committed (dirty rows not frozen, plus the frozen bundle's rows), rows set
 * aside in the quarantine, and whether the frozen bundle is held after a rejection. One row.
 */
export const PENDING_SQL = `SELECT
  (SELECT coalesce(sum(state <> 1), 0) FROM _sync_dirty) + coalesce((SELECT row_count FROM _sync_push_state WHERE id = 1), 0) AS pending_rows,
  (SELECT count(*) FROM _sync_quarantine) AS quarantined_rows,
  coalesce((SELECT rejected IS NOT NULL FROM _sync_push_state WHERE id = 1), 0) AS rejected`;

/** What PENDING_SQL answers. */
export interface PendingCounts {
  /** Local changes not yet committed by the server. */
  readonly pendingRows: number;
  /** Rows set aside after the server refused them (see `quarantined()`). */
  readonly quarantinedRows: number;
  /** The frozen bundle is held after a rejection (`onRejected: 'hold'`). */
  readonly rejected: boolean;
}

export function pendingCounts(row: Readonly<Record<string, unknown>> | undefined): PendingCounts {
  return {
    pendingRows: Number(row?.['pending_rows'] ?? 0),
    quarantinedRows: Number(row?.['quarantined_rows'] ?? 0),
    rejected: Number(row?.['rejected'] ?? 0) === 1,
  };
}

/** The ids in the quarantine, oldest first: a live query of it tells when to read `quarantined()` again. */
export const QUARANTINE_IDS_SQL = 'SELECT id FROM _sync_quarantine ORDER BY id';

export type { ConflictRecord };
