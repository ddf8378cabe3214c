/**
 * The triggers of registered tables: the direct-write guards and statement-level capture into
 * `sync.capture_rows`, which commit turns into bundle rows.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

/**
 * The direct-write guard of registered tables: a write goes through only inside a bundle context,
 * a row of `sync.bundle_context` for this transaction that only the managed functions establish
 * (sync.push_commit, sync.server_bundle_begin; see guardBundleContextSql). A setting such as
 * `lockstep.scope` opens nothing: the table owner could set it.
 */
export const guardSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM sync.bundle_context WHERE xact = txid_current()) THEN
    PERFORM nextval('sync.counter_rejected_direct_writes');
    RAISE EXCEPTION 'lockstep: direct % on registered table %.% is rejected outside a sync bundle', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
      USING ERRCODE = '42501', HINT = 'Write through a push session or the server write API.';
  END IF;
  RETURN NULL;
END
$fn$
`);

/**
 * The guard of `sync.bundle_context`: rows are written only by the managed functions that open and
 * close a bundle. Who is writing is read from the call stack (PG_CONTEXT), which a setting cannot
 * forge: one of its lines is the managed function itself. (sync.first_unstorable_row,
 * sync.unstorable_column and sync.first_failing_row open one only inside blocks that always roll
 * back.)
 */
export const guardBundleContextSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard_bundle_context() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_stack text;
BEGIN
  GET DIAGNOSTICS v_stack = PG_CONTEXT;
  IF v_stack ~ '\nPL/pgSQL function sync\.(push_commit|server_bundle_begin|server_bundle_finish|finalize_bundle|first_unstorable_row|unstorable_column|first_failing_row)\(' THEN
    RETURN NULL;
  END IF;
  PERFORM nextval('sync.counter_rejected_direct_writes');
  RAISE EXCEPTION 'lockstep: a bundle context is opened only by sync.push_commit and sync.server_bundle_begin, and closed by them'
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
  IF EXISTS (SELECT 1 FROM sync.bundle_context WHERE xact = NEW.xact) THEN
    RAISE EXCEPTION 'lockstep: a server bundle opened in this transaction (sync.server_bundle_begin) was never finished (sync.server_bundle_finish); nothing is committed'
      USING ERRCODE = '55000',
        HINT = 'Call sync.server_bundle_finish before COMMIT; inside a server write, make constraints IMMEDIATE by name, not with SET CONSTRAINTS ALL.';
  END IF;
  RETURN NULL;
END
$fn$
`);

/**
 * The guard of the `sync` tables: they are written by the managed functions (a function of the
 * schema is on the call stack) and by bootstrap, which holds its advisory lock for its whole
 * transaction (BOOTSTRAP_LOCK_KEY 7020140421: classid 1, objid 2725173125). Anything else, the
 * application role's own SQL included, is refused. An operator who must repair by hand takes the
 * same lock, knowingly (README, "What is guarded").
 */
export const guardManagedSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard_managed() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_stack text;
BEGIN
  GET DIAGNOSTICS v_stack = PG_CONTEXT;
  IF v_stack ~ '\nPL/pgSQL function sync\.' THEN
    RETURN NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
               AND classid = 1 AND objid = 2725173125 AND objsubid = 1) THEN
    RETURN NULL;
  END IF;
  PERFORM nextval('sync.counter_rejected_direct_writes');
  RAISE EXCEPTION 'lockstep: direct % on %.% is rejected: the sync schema is written by its managed functions and bootstrap', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
    USING ERRCODE = '42501', HINT = 'An operator repairing by hand holds the bootstrap lock in the same transaction: SELECT pg_advisory_xact_lock(7020140421).';
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
 * Statement-level capture with transition tables: one call per statement, set-based inserts.
 * Rows changed by cascades and business triggers land here too, so they join the bundle.
 */
export const captureSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.capture() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_scope text;
  v_cat sync.table_catalog;
  v_bad boolean;
BEGIN
  SELECT scope INTO v_scope FROM sync.bundle_context WHERE xact = txid_current();
  IF v_scope IS NULL THEN
    RAISE EXCEPTION 'lockstep: capture without bundle context on %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = '42501';
  END IF;
  SELECT * INTO STRICT v_cat FROM sync.table_catalog WHERE table_id = TG_ARGV[0]::smallint;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM lockstep_new WHERE _sync_scope_id IS DISTINCT FROM $1)' INTO v_bad USING v_scope;
    IF v_bad THEN
      RAISE EXCEPTION 'lockstep: a write inside the bundle of one user touched a row of another scope in %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '42501';
    END IF;
    EXECUTE v_cat.capture_new_sql;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM lockstep_old WHERE _sync_scope_id IS DISTINCT FROM $1)' INTO v_bad USING v_scope;
    IF v_bad THEN
      RAISE EXCEPTION 'lockstep: a write inside the bundle of one user touched a row of another scope in %.%', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = '42501';
    END IF;
    IF TG_OP = 'DELETE' THEN
      EXECUTE v_cat.capture_old_sql;
    ELSE
      -- A key change is DELETE(old key) + INSERT(new key).
      EXECUTE v_cat.capture_keychange_sql;
    END IF;
  END IF;
  RETURN NULL;
END
$fn$
`);
