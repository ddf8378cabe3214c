/**
 * The triggers of registered tables: the direct-write guards and statement-level capture into
 * `sync.capture_rows`, which commit turns into bundle rows.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * The direct-write guard of registered tables: a write goes through only inside a bundle context,
 * a row of `sync.bundle_context` for this transaction that only the managed functions establish
 * (sync.push_commit, sync.server_bundle_begin; see guardBundleContextSql), and only for a role
 * with the privileges of the `sync` schema's owner. A setting such as `lockstep.scope` opens
 * nothing: the table owner could set it.
 */
export const guardSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  -- Identity first: a role without the privileges of the sync schema's owner opens no bundle, so
  -- it never writes a registered table (and may not even read sync.bundle_context).
  IF NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'sync'), 'USAGE') THEN
    BEGIN
      PERFORM nextval('sync.counter_rejected_direct_writes');
    EXCEPTION WHEN insufficient_privilege THEN
      NULL; -- counted where the role may count; refused either way
    END;
    RAISE EXCEPTION 'lockstep: direct % on registered table %.% by role % is rejected: only the role that owns the sync schema writes registered tables, inside a bundle',
      TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, current_user
      USING ERRCODE = '42501', HINT = 'Write through a push session or the server write API, as the role that owns the sync schema.';
  END IF;
  -- The bundle's user is named by the setting its opener made (lockstep.bundle_user): only a
  -- locator, since the bundle context row it must find is what only the managed functions write.
  IF NOT EXISTS (SELECT 1 FROM sync.bundle_context WHERE user_id = current_setting('lockstep.bundle_user', true) AND xact = txid_current()) THEN
    PERFORM nextval('sync.counter_rejected_direct_writes');
    RAISE EXCEPTION 'lockstep: direct % on registered table %.% is rejected outside a sync bundle', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
      USING ERRCODE = '42501', HINT = 'Write through a push session or the server write API.';
  END IF;
  RETURN NULL;
END
$fn$
`);

/**
 * Who may open a bundle context. Two checks, in this order:
 * - identity, which no SQL text can imitate: the writing role (current_user, which a SECURITY
 *   DEFINER function of another owner changes to that owner) must have the privileges of the
 *   role that owns the `sync` schema. Any other role — one granted DML on business and even on
 *   sync tables, one calling a function it owns, one that created a function named like a managed
 *   one — is refused. Only members of that role can SET ROLE to it.
 * - for the owner's own SQL, the call stack (PG_CONTEXT) must show a managed function that opens
 *   or closes bundles. This catches mistakes, not the owner: the stack includes statement text,
 *   and the owner can disable triggers anyway (README, "What is guarded").
 * (sync.first_unstorable_row, sync.unstorable_column and sync.first_failing_row open one only inside
 * blocks that always roll back.)
 */
export const guardBundleContextSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard_bundle_context() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_stack text;
BEGIN
  IF pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'sync'), 'USAGE') THEN
    GET DIAGNOSTICS v_stack = PG_CONTEXT;
    IF v_stack ~ '\nPL/pgSQL function sync\.(push_commit|server_bundle_begin|server_bundle_finish|finalize_bundle|first_unstorable_row|unstorable_column|first_failing_row)\(' THEN
      RETURN NULL;
    END IF;
  END IF;
  BEGIN
    PERFORM nextval('sync.counter_rejected_direct_writes');
  EXCEPTION WHEN insufficient_privilege THEN
    NULL; -- a role that may not count is refused all the same
  END;
  RAISE EXCEPTION 'lockstep: a bundle context is opened only by sync.push_commit and sync.server_bundle_begin, and closed by them, as the role that owns the sync schema'
    USING ERRCODE = '42501', HINT = 'Write business rows through a push session or the server write API (sync.server_bundle_begin/finish).';
END
$fn$
`);

/**
 * Deferred to COMMIT: a server bundle opened in this transaction must have been finished, or the
 * writes made in it would commit without a bundle (capture rows nobody turns into one).
 */
export const checkBundleFinishedSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.check_bundle_finished() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF EXISTS (SELECT 1 FROM sync.bundle_context WHERE user_id = NEW.user_id AND xact = NEW.xact) THEN
    RAISE EXCEPTION 'lockstep: a server bundle opened in this transaction (sync.server_bundle_begin) was never finished (sync.server_bundle_finish); nothing is committed'
      USING ERRCODE = '55000',
        HINT = 'Call sync.server_bundle_finish before COMMIT; inside a server write, make constraints IMMEDIATE by name, not with SET CONSTRAINTS ALL.';
  END IF;
  RETURN NULL;
END
$fn$
`);

/**
 * The guard of the `sync` tables: only a role with the privileges of the schema's owner writes
 * them (identity, as for the bundle context), and of its SQL only the managed functions (a
 * function of the schema on the call stack: a check against mistakes, not against the owner) and
 * bootstrap, which holds its advisory lock for its whole transaction (BOOTSTRAP_LOCK_KEY
 * 7020140421: classid 1, objid 2725173125). An operator who must repair by hand takes the same
 * lock, knowingly, as the owner (README, "What is guarded").
 */
export const guardManagedSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard_managed() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_stack text;
BEGIN
  IF pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'sync'), 'USAGE') THEN
    GET DIAGNOSTICS v_stack = PG_CONTEXT;
    IF v_stack ~ '\nPL/pgSQL function sync\.' THEN
      RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
                 AND classid = 1 AND objid = 2725173125 AND objsubid = 1) THEN
      RETURN NULL;
    END IF;
  END IF;
  BEGIN
    PERFORM nextval('sync.counter_rejected_direct_writes');
  EXCEPTION WHEN insufficient_privilege THEN
    NULL; -- a role that may not count is refused all the same
  END;
  RAISE EXCEPTION 'lockstep: direct % on %.% is rejected: the sync schema is written by its managed functions and bootstrap, as the role that owns it', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
    USING ERRCODE = '42501', HINT = 'An operator repairing by hand is the owner and holds the bootstrap lock in the same transaction: SELECT pg_advisory_xact_lock(7020140421).';
END
$fn$
`);

export const guardTruncateSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM nextval('sync.counter_rejected_direct_writes');
  RAISE EXCEPTION 'lockstep: TRUNCATE of registered table %.% is rejected', TG_TABLE_SCHEMA, TG_TABLE_NAME
    USING ERRCODE = '42501';
END
$fn$
`);

/**
 * The row trigger `_lockstep_fixed_key` (core/sync/capture/triggers.ts) calls this only when an
 * UPDATE changes a sync key (TG_ARGV[0] names it) or `_sync_scope_id`: refused before the row is
 * written, so no ON UPDATE action of a foreign key to them runs. SQLSTATE 23LS1 names the table
 * and the column; a commit answers it as push_rejected, a server write as KeyChangeRefusedError.
 */
export const refuseKeyChangeSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.refuse_key_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_column text := CASE WHEN OLD._sync_scope_id IS DISTINCT FROM NEW._sync_scope_id THEN '_sync_scope_id' ELSE TG_ARGV[0] END;
BEGIN
  RAISE EXCEPTION 'lockstep: an UPDATE of %.% changes %: a sync key and _sync_scope_id never change', TG_TABLE_SCHEMA, TG_TABLE_NAME, v_column
    USING ERRCODE = '23LS1', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = v_column,
      HINT = 'Delete the row and insert the new one instead.';
END
$fn$
`);

/**
 * Statement-level capture with transition tables: one call per statement, set-based inserts.
 * Rows changed by cascades and business triggers land here too, so they join the bundle.
 *
 * A sync key and `_sync_scope_id` never change (docs/protocol.md §11, rule 9): an UPDATE that
 * moves a row to another scope, or whose old keys are not all among its new keys, fails with
 * SQLSTATE 23LS1 (KEY_CHANGE_SQLSTATE in core/sync/context.ts) naming the table and column, whatever path ran it (a
 * commit's business trigger or cascade, a server write). So an ON UPDATE action of a foreign key
 * to a sync key can never fire. (A statement that only permutes existing keys among its rows is
 * indistinguishable here from one that rewrote those rows' other columns, and is captured as that.)
 */
export const captureSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.capture() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_scope text;
  v_cat sync.table_catalog;
  v_bad boolean;
  v_captured bigint;
BEGIN
  -- Found by (user, transaction), as its opener named the user (lockstep.bundle_user).
  SELECT user_id INTO v_scope FROM sync.bundle_context
   WHERE user_id = current_setting('lockstep.bundle_user', true) AND xact = txid_current();
  IF v_scope IS NULL THEN
    RAISE EXCEPTION 'lockstep: capture without bundle context on %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = '42501';
  END IF;
  SELECT * INTO STRICT v_cat FROM sync.table_catalog WHERE table_id = TG_ARGV[0]::smallint;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM lockstep_old WHERE _sync_scope_id IS DISTINCT FROM $1)' INTO v_bad USING v_scope;
    IF v_bad THEN
      RAISE EXCEPTION 'lockstep: a write inside the bundle of one user touched a row of another scope in %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '42501';
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM lockstep_new WHERE _sync_scope_id IS DISTINCT FROM $1)' INTO v_bad USING v_scope;
    IF v_bad AND TG_OP = 'UPDATE' THEN
      RAISE EXCEPTION 'lockstep: an UPDATE of %.% changes _sync_scope_id: a row never changes hands', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '23LS1', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = '_sync_scope_id',
          HINT = 'Delete the row and insert it in the other scope instead.';
    ELSIF v_bad THEN
      RAISE EXCEPTION 'lockstep: a write inside the bundle of one user touched a row of another scope in %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '42501';
    END IF;
  END IF;
  IF TG_OP = 'UPDATE' THEN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM lockstep_old o WHERE NOT EXISTS (SELECT 1 FROM lockstep_new n WHERE n.%1$I = o.%1$I))',
      v_cat.key_column) INTO v_bad;
    IF v_bad THEN
      RAISE EXCEPTION 'lockstep: an UPDATE of %.% changes the sync key %: a sync key never changes', TG_TABLE_SCHEMA, TG_TABLE_NAME, v_cat.key_column
        USING ERRCODE = '23LS1', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME, COLUMN = v_cat.key_column,
          HINT = 'Delete the row and insert one with the new key instead.';
    END IF;
  END IF;
  -- Captured rows are numbered after this bundle's last one (the end of its index range), in
  -- place of a global sequence.
  SELECT coalesce(max(capture_id), 0) INTO v_captured FROM sync.capture_rows WHERE user_id = v_scope AND xact = txid_current();
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    EXECUTE v_cat.capture_new_sql USING v_scope, v_captured;
  ELSE
    EXECUTE v_cat.capture_old_sql USING v_scope, v_captured;
  END IF;
  RETURN NULL;
END
$fn$
`);
