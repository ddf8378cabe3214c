/**
 * Layout version 9: integrity guards (issue 15, item 10).
 * - The bundle context is a row of `sync.bundle_context` (UNLOGGED scratch, one per transaction)
 *   that only sync.push_commit and sync.server_bundle_begin/finish write, instead of the
 *   `lockstep.scope` setting the table owner could forge with set_config or SET. The business
 *   guards and capture read it; a server bundle opened and never finished cannot commit.
 * - Every table of the `sync` schema refuses direct INSERT, UPDATE, DELETE and TRUNCATE unless a
 *   managed function writes it or bootstrap (its advisory lock held) does.
 *
 * An older build's requests call the same functions, whose new bodies use the new context, so it
 * keeps serving: min_safe_version stays 8.
 */
import { type Migration } from './migration.js';
import { captureSql, checkBundleFinishedSql, guardBundleContextSql, guardManagedSql, guardSql } from '../../sync/capture/capture.sql.js';
import { finalizeBundleSql, pushCommitSql } from '../../sync/push/commit.sql.js';
import { serverBundleBeginSql, serverBundleFinishSql } from '../../sync/push/server-write.sql.js';
import { countSql } from '../../sync/meta/counters.sql.js';

export const migration0009: Migration = {
  version: 9,
  minSafeVersion: 8,
  description: 'guards: the bundle context only managed functions establish; the sync tables refuse direct writes',
  statements: [
    // Rows live inside one transaction (opened and closed by the managed functions), so a crash
    // loses nothing by it being unlogged.
    `CREATE UNLOGGED TABLE sync.bundle_context (
      xact bigint PRIMARY KEY,
      user_pk bigint NOT NULL,
      scope text NOT NULL,
      source text NOT NULL,
      kind text NOT NULL
    )`,
  ],
  functions: [guardSql, guardBundleContextSql, checkBundleFinishedSql, guardManagedSql, captureSql, countSql, finalizeBundleSql,
    pushCommitSql, serverBundleBeginSql, serverBundleFinishSql],
  afterFunctions: [
    `CREATE TRIGGER _lockstep_guard_context BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON sync.bundle_context
       FOR EACH STATEMENT EXECUTE FUNCTION sync.guard_bundle_context()`,
    `CREATE CONSTRAINT TRIGGER _lockstep_bundle_finished AFTER INSERT ON sync.bundle_context DEFERRABLE INITIALLY DEFERRED
       FOR EACH ROW WHEN (NEW.kind = 'server') EXECUTE FUNCTION sync.check_bundle_finished()`,
    // Every other table the layout has at this version, in name order, so a fresh install and an
    // upgraded database end with the same triggers.
    `DO $do$
     DECLARE
       r record;
     BEGIN
       FOR r IN SELECT c.relname FROM pg_class c
                 WHERE c.relnamespace = 'sync'::regnamespace AND c.relkind = 'r' AND c.relname <> 'bundle_context' ORDER BY c.relname LOOP
         EXECUTE format('CREATE TRIGGER _lockstep_guard_managed BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON sync.%I
           FOR EACH STATEMENT EXECUTE FUNCTION sync.guard_managed()', r.relname);
       END LOOP;
     END
     $do$`,
  ],
};
