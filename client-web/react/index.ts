/**
 * React bindings of the Lockstep web client (an entry point of its own: React is a peer
 * dependency, needed only by apps that import this). Wrap the app in `<LockstepProvider>` and read
 * live data with the hooks; see the README's React example.
 */
export { LockstepProvider, useLockstep, type LockstepProviderProps, type LockstepState } from './provider.js';
export { useConflicts, usePending, useQuarantine, useQuery, useStatus, useSuspenseQuery, type Conflicts, type Quarantine } from './hooks.js';
export { IDLE_QUERY_CLOSE_MS } from './stores.js';
export type { BindableClient } from './bindable.js';
export type { PendingCounts } from '../live-views.js';
export type { LiveQueryResult, SyncStatus } from '../api.js';
