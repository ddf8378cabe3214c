/**
 * Error and activity counters, as sequences in the `sync` schema (created by migration 1):
 * `nextval` survives the rollback of the write it counts. `/syncx/status` reads them.
 */
export const COUNTERS = [
  'rejected_direct_writes',
  'history_pruned',
  'push_conflicts',
  'push_rejected',
  'commit_outcome_unknown',
  'bundles_committed',
  'bundles_pruned',
] as const;
export type CounterName = (typeof COUNTERS)[number];
