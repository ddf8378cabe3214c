/**
 * Error and activity counters, read by `/syncx/status`. Two kinds, by what they must survive:
 * - Events counted whether or not the transaction that saw them commits (a refused direct write
 *   rolls back by nature): a sequence in the `sync` schema (migration 1), since `nextval` survives
 *   a rollback. Only `rejected_direct_writes`, on the refusal path alone.
 * - Facts about what committed (`LEDGER_COUNTERS`): rows of `sync.counter_deltas`, each in the
 *   ledger of the user whose request counted it (layout 18: no global sequence on the request
 *   path), inserted by the transaction they count, so a bundle whose transaction dies after it was finalized is not
 *   counted; maintenance folds them into `sync.counter_totals` (migration 5). A commit whose
 *   fate is unknown is counted by the runtime that saw it, even when the database was
 *   unreachable then: `PendingCounters` keeps it until a request reaches the database again.
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

/** The counters kept in the ledger (sync.counter_deltas / sync.counter_totals), not in sequences. */
export const LEDGER_COUNTERS = ['history_pruned', 'push_conflicts', 'push_rejected', 'commit_outcome_unknown', 'bundles_committed', 'bundles_pruned'] as const satisfies readonly CounterName[];
export type LedgerCounter = (typeof LEDGER_COUNTERS)[number];

/**
 * Increments a runtime saw but could not record (the database was unreachable), kept per runtime
 * (one per Lambda container or local gateway) until a request reaches the database again.
 */
export class PendingCounters {
  private readonly counts = new Map<LedgerCounter, number>();

  add(name: LedgerCounter, delta = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + delta);
  }

  /** Everything pending, removed; give it back with `restore` when recording it failed. */
  take(): Array<[LedgerCounter, number]> {
    const out = [...this.counts];
    this.counts.clear();
    return out;
  }

  restore(entries: readonly (readonly [LedgerCounter, number])[]): void {
    for (const [name, delta] of entries) this.add(name, delta);
  }

  get empty(): boolean {
    return this.counts.size === 0;
  }
}
