/**
 * The hooks: live query results, the sync status, what is pending, the quarantine and the conflict
 * log, each on `useSyncExternalStore` over the stores of stores.ts, so a component re-renders only
 * when what it reads changed (rows keep their objects; a status selector's value compares equal).
 * Without an open client (signed out, opening) every hook answers its empty, loading value.
 */
import { use, useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import { type ConflictRecord, type LiveQueryResult, type QuarantinedRow, type SyncStatus } from '../api.js';
import { CONFLICT_LOG_SQL, conflictRecord, PENDING_SQL, pendingCounts, QUARANTINE_IDS_SQL, type PendingCounts } from '../live-views.js';
import { type SqlRow, type SqlValue } from '../sqlite/port.js';
import { useLockstep } from './provider.js';
import { LOADING, queryKey, queryStore, statusStore } from './stores.js';

const NO_PARAMS: readonly SqlValue[] = Object.freeze([]);
const NO_ROWS: readonly never[] = Object.freeze([]);
/** What a signed-out tree suspends on: nothing to wait for until a user signs in. */
const NEVER: Promise<never> = new Promise<never>(() => undefined);
/**
 * Nothing to wait for: a promise React's `use` reads as already fulfilled (its `status` field), so a
 * render that has its data still calls `use` once, as the renders that suspended did.
 */
const READY: Promise<void> = Object.assign(Promise.resolve(), { status: 'fulfilled', value: undefined });
const noSubscription = () => () => undefined;

/**
 * A live query: the rows of `sql` with `params`, re-rendered when a committed transaction (in any
 * tab) changed them; unchanged rows keep their objects. `params` are compared by value, so an
 * inline array does not start the query over. Loading until the first run, and while no client is open.
 */
export function useQuery<T extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = NO_PARAMS): LiveQueryResult<T> {
  const { client } = useLockstep();
  const key = queryKey(sql, params);
  // The store follows the query's value (`key`), not the array's identity.
  const store = useMemo(() => (client ? queryStore<T>(client, sql, params) : null), [client, key]);
  const subscribe = useMemo(() => (store ? store.subscribe : noSubscription), [store]);
  const snapshot = useCallback(() => (store ? store.snapshot() : (LOADING as LiveQueryResult<T>)), [store]);
  return useSyncExternalStore(subscribe, snapshot, snapshot);
}

/**
 * `useQuery` for Suspense: suspends until the first result (and while no client is open), and
 * throws a failed query's error to the nearest error boundary.
 */
export function useSuspenseQuery<T extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = NO_PARAMS): LiveQueryResult<T> & { readonly loading: false } {
  const { client, phase, error, opened } = useLockstep();
  const result = useQuery<T>(sql, params);
  if (phase === 'failed' && error) throw error;
  // Opening: wait for the client (the promise is the provider's, the same on every render); then
  // for the first result (the query's own promise). One `use` per render, whatever it waits for.
  use<unknown>(!client ? (opened ?? NEVER) : result.loading ? queryStore<T>(client, sql, params).settled() : READY);
  if (result.error) throw result.error;
  return result as LiveQueryResult<T> & { readonly loading: false };
}

/**
 * A part of the sync loop's status, chosen by `selector` (null before the first status); the
 * component re-renders only when the chosen part changes (`isEqual`, default Object.is).
 */
export function useStatus<S>(selector: (status: SyncStatus | null) => S, isEqual: (a: S, b: S) => boolean = Object.is): S {
  const { client } = useLockstep();
  const store = useMemo(() => (client ? statusStore(client) : null), [client]);
  const last = useRef<{ status: SyncStatus | null; selector: (status: SyncStatus | null) => S; selected: S } | null>(null);
  // A selector may read other values of the component (it is usually written inline): a new one is
  // applied at once, and its answer kept only when it differs from the last.
  const snapshot = useCallback(() => {
    const status = store?.current ?? null;
    const previous = last.current;
    if (previous && previous.status === status && previous.selector === selector) return previous.selected;
    const selected = selector(status);
    const kept = previous && isEqual(previous.selected, selected) ? previous.selected : selected;
    last.current = { status, selector, selected: kept };
    return kept;
  }, [store, selector, isEqual]);
  return useSyncExternalStore(store ? store.subscribe : noSubscription, snapshot, snapshot);
}

/** What is pending on this device, live: changes not yet committed, rows set aside, a held rejection. */
export function usePending(): PendingCounts & { readonly loading: boolean } {
  const result = useQuery(PENDING_SQL);
  const row = result.rows[0];
  return useMemo(() => ({ ...pendingCounts(row), loading: result.loading }), [row, result.loading]);
}

/** The quarantine, live, with its two ways out. */
export interface Quarantine {
  readonly rows: readonly QuarantinedRow[];
  readonly loading: boolean;
  /** Writes the row back as a local change, with `fix` applied (`quarantine_parent_missing` when a row it refers to is gone). */
  requeue(id: number, fix?: Readonly<Record<string, SqlValue>>): Promise<void>;
  /** Forgets the row. */
  drop(id: number): Promise<void>;
}

export function useQuarantine(): Quarantine {
  const { client } = useLockstep();
  const ids = useQuery<{ id: number }>(QUARANTINE_IDS_SQL).rows;
  const [rows, setRows] = useState<{ of: unknown; rows: readonly QuarantinedRow[] } | null>(null);
  useEffect(() => {
    if (!client) return;
    let active = true;
    // The ids' array changes exactly when a row came or went: read the rows again then.
    client.quarantined().then((found) => active && setRows({ of: ids, rows: found }), () => undefined);
    return () => {
      active = false;
    };
  }, [client, ids]);
  const requeue = useCallback((id: number, fix?: Readonly<Record<string, SqlValue>>) => (client ? client.requeueQuarantined(id, fix) : Promise.resolve()), [client]);
  const drop = useCallback((id: number) => (client ? client.dropQuarantined(id) : Promise.resolve()), [client]);
  const current = rows?.rows ?? NO_ROWS;
  return useMemo(() => ({ rows: current, loading: rows === null, requeue, drop }), [current, rows, requeue, drop]);
}

/** The conflict log, live: what was merged and what overwritten, and a way to dismiss records. */
export interface Conflicts {
  readonly conflicts: readonly ConflictRecord[];
  readonly loading: boolean;
  /** Forgets the given records (all without ids). */
  dismiss(ids?: readonly number[]): Promise<void>;
}

const records = new WeakMap<object, ConflictRecord>();
const recordOf = (row: SqlRow): ConflictRecord => {
  let record = records.get(row);
  if (!record) records.set(row, (record = conflictRecord(row)));
  return record;
};

export function useConflicts(): Conflicts {
  const { client } = useLockstep();
  const result = useQuery(CONFLICT_LOG_SQL);
  const conflicts = useMemo(() => result.rows.map(recordOf), [result.rows]);
  const dismiss = useCallback((ids?: readonly number[]) => (client ? client.dismissConflicts(ids) : Promise.resolve()), [client]);
  return useMemo(() => ({ conflicts, loading: result.loading, dismiss }), [conflicts, result.loading, dismiss]);
}
