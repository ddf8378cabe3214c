/**
 * NOTIFY channels a long-running process listens on (one LISTEN connection, commit-feed.ts). Kept
 * apart from the listener so bootstrap can signal without importing a database driver.
 */

/**
 * Signalled by bootstrap when it changed the layout or the registered tables, delivered when its
 * transaction commits: a long-running process reloads its catalog before its next request instead
 * of serving the old capabilities until `catalogRefreshSeconds` pass.
 */
export const LAYOUT_CHANNEL = 'lockstep_layout';
