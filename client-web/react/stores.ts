/**
 * The external stores the hooks read with `useSyncExternalStore`, one set per client:
 *
 * - live queries shared by key (the SQL and the parameters' values), so components asking for the
 *   same query share one; a query nobody subscribes to any more is closed after a grace period, so
 *   StrictMode's unmount-and-mount again and a Suspense retry reuse it instead of starting over;
 * - the sync loop's status, from one subscription per client.
 */
import { type LiveQuery, type LiveQueryResult, type SyncStatus } from '../api.js';
import { rowContentKey } from '../live-query.js';
import { type SqlRow, type SqlValue } from '../sqlite/port.js';
import { type BindableClient } from './bindable.js';

/** How long a live query nobody reads stays open, in case it is read again at once. */
export const IDLE_QUERY_CLOSE_MS = 1000;

/** The result of a query that has not started (no client yet, or not subscribed yet). */
export const LOADING: LiveQueryResult<never> = Object.freeze({ rows: Object.freeze([]) as readonly never[], loading: true, error: null, complete: false });

interface Entry {
  readonly query: LiveQuery<SqlRow>;
  refs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Settles with the first result that is not loading (for Suspense). */
  readonly settled: Promise<void>;
}

interface ClientStores {
  readonly queries: Map<string, Entry>;
  status: StatusStore | undefined;
}

const byClient = new WeakMap<BindableClient, ClientStores>();

function storesOf(client: BindableClient): ClientStores {
  let stores = byClient.get(client);
  if (!stores) byClient.set(client, (stores = { queries: new Map(), status: undefined }));
  return stores;
}

/** The key of a query: its SQL and its parameters' values (so a new array of the same values is the same query). */
export function queryKey(sql: string, params: readonly SqlValue[]): string {
  return `${sql}\u0000${params.length}\u0000${rowContentKey({ ...params })}`;
}

/** The shared live query of `key`, started when missing; closes after the grace period unless subscribed. */
function entryOf(client: BindableClient, key: string, sql: string, params: readonly SqlValue[]): Entry {
  const { queries } = storesOf(client);
  let entry = queries.get(key);
  if (!entry) {
    const query = client.liveQuery<SqlRow>(sql, params);
    const settled = new Promise<void>((resolve) => {
      const off = query.subscribe((result) => {
        if (result.loading) return;
        off();
        resolve();
      });
    });
    entry = { query, refs: 0, timer: undefined, settled };
    queries.set(key, entry);
    scheduleClose(queries, key, entry);
  }
  return entry;
}

function scheduleClose(queries: Map<string, Entry>, key: string, entry: Entry): void {
  clearTimeout(entry.timer);
  entry.timer = setTimeout(() => {
    if (entry.refs > 0 || queries.get(key) !== entry) return;
    queries.delete(key);
    entry.query.close();
  }, IDLE_QUERY_CLOSE_MS);
}

/** The store of one query for `useSyncExternalStore`. */
export interface QueryStore<T> {
  subscribe(onChange: () => void): () => void;
  snapshot(): LiveQueryResult<T>;
  /** Settles once the query has a first result (starting it if needed): what Suspense waits for. */
  settled(): Promise<void>;
}

export function queryStore<T extends SqlRow>(client: BindableClient, sql: string, params: readonly SqlValue[]): QueryStore<T> {
  const key = queryKey(sql, params);
  const { queries } = storesOf(client);
  return {
    subscribe(onChange) {
      const entry = entryOf(client, key, sql, params);
      entry.refs++;
      clearTimeout(entry.timer);
      const off = entry.query.subscribe(() => onChange());
      return () => {
        off();
        entry.refs--;
        if (entry.refs === 0) scheduleClose(queries, key, entry);
      };
    },
    snapshot: () => (queries.get(key)?.query.result as LiveQueryResult<T> | undefined) ?? LOADING,
    settled: () => entryOf(client, key, sql, params).settled,
  };
}

/** The sync loop's latest status, for `useStatus`. */
export interface StatusStore {
  current: SyncStatus | null;
  subscribe(onChange: () => void): () => void;
}

export function statusStore(client: BindableClient): StatusStore {
  const stores = storesOf(client);
  if (stores.status) return stores.status;
  const listeners = new Set<() => void>();
  const store: StatusStore = {
    current: null,
    subscribe(onChange) {
      listeners.add(onChange);
      return () => void listeners.delete(onChange);
    },
  };
  stores.status = store;
  // One subscription for the client's life: it answers at once with the status it has.
  client.onStatus((status) => {
    store.current = status;
    for (const listener of [...listeners]) listener();
  });
  return store;
}
