/**
 * Which layouts of the `sync` schema this build serves. The layout is versioned by numbered
 * migrations (core/bootstrap/migrations); `sync.meta` records the version a database is at and
 * the minimum safe version: the oldest build (by the layout version it ships) that may still
 * serve it.
 *
 * A build serves a database when both hold:
 * - the database is at MIN_SERVED_LAYOUT or later (this build calls nothing newer than that), and
 * - the database's min_safe_version is at most LAYOUT_VERSION (the database does not rule this
 *   build out).
 * So during a rolling deploy the old functions keep serving the upgraded database (a migration
 * keeps min_safe_version at the previous version when it only adds), and the new functions serve
 * the old database until bootstrap upgrades it, as long as it is within their range.
 *
 * This module is all that request handlers import of the layout: the install SQL stays in the
 * bootstrap bundle.
 */

/** The newest migration this build ships. */
export const LAYOUT_VERSION = 28;

/** The oldest layout whose managed functions this build's requests can call. */
export const MIN_SERVED_LAYOUT = 18;

/** Why a database cannot be served (health and 503 bodies carry it as `reason`). */
export type LayoutUnavailableReason = 'layout_upgrade_required' | 'layout_drift';

/** A layout this build can or cannot serve, with the operator's next step. */
export function servable(
  database: { readonly version: number; readonly minSafeVersion: number },
  build: { readonly version: number; readonly minServed: number } = { version: LAYOUT_VERSION, minServed: MIN_SERVED_LAYOUT },
): { readonly ok: true } | { readonly ok: false; readonly reason: LayoutUnavailableReason; readonly detail: string } {
  if (database.version < build.minServed) {
    return {
      ok: false,
      reason: 'layout_upgrade_required',
      detail: `the sync layout is at version ${database.version}; this build needs ${build.minServed} or later: run bootstrap (npm run bootstrap, or the bootstrap function) to upgrade it`,
    };
  }
  if (database.minSafeVersion > build.version) {
    return {
      ok: false,
      reason: 'layout_upgrade_required',
      detail: `the sync layout is at version ${database.version} and serves builds of layout ${database.minSafeVersion} or later; this build is at ${build.version}: deploy a newer Lockstep build`,
    };
  }
  return { ok: true };
}
