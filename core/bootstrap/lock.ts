/**
 * The advisory lock bootstrap holds for its whole write transaction (`pg_advisory_xact_lock`):
 * bootstraps serialise on it, and the guard of the `sync` tables (sync.guard_managed, which
 * spells it as classid 1, objid 2725173125) lets writes through while it is held. An operator
 * repairing the sync tables by hand takes it too.
 */
export const BOOTSTRAP_LOCK_KEY = 7020140421;
