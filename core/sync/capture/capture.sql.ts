/**
 * The triggers of registered tables: the direct-write guards and statement-level capture into
 * `sync.capture_rows`, which commit turns into bundle rows.
 * Installed by the migrations (core/bootstrap/migrations); see core/layout/managed-sql.ts.
 */
import { managedFunction } from '../../layout/managed-sql.js';

export const guardSql = managedFunction(String.raw`
CREATE OR REPLACE FUNCTION sync.guard() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF coalesce(current_setting('lockstep.scope', true), '') = '' THEN
    PERFORM nextval('sync.counter_rejected_direct_writes');
    RAISE EXCEPTION 'lockstep: direct % on registered table %.% is rejected outside a sync bundle', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
      USING ERRCODE = '42501', HINT = 'Write through a push session or the server write API.';
  END IF;
  RETURN NULL;
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
  v_scope text := current_setting('lockstep.scope', true);
  v_cat sync.table_catalog;
  v_bad boolean;
BEGIN
  IF coalesce(v_scope, '') = '' THEN
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
