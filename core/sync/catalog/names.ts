/** Names the sync layout reserves in registered tables. */

/** The hidden ownership column: the user id, never sent to or accepted from clients. */
export const SCOPE_COLUMN = '_sync_scope_id';

/** Triggers Lockstep installs on registered tables start with this. */
export const RESERVED_TRIGGER_PREFIX = '_lockstep_';

/** The reserved triggers of a registered root table; its descendants get the two guards. */
export const ROOT_TRIGGERS = [
  '_lockstep_guard',
  '_lockstep_guard_truncate',
  '_lockstep_capture_insert',
  '_lockstep_capture_update',
  '_lockstep_capture_delete',
] as const;

/**
 * The row trigger refusing a change of a sync key or `_sync_scope_id` (layout 14 on), on the root
 * and on inheritance children (partitions carry PostgreSQL's clone of the root's).
 */
export const FIXED_KEY_TRIGGER = '_lockstep_fixed_key';

/** The first layout whose registered tables carry FIXED_KEY_TRIGGER. */
export const FIXED_KEY_LAYOUT = 14;
