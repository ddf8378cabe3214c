/**
 * Other users' history, fast and coherent. One template user gets real bundles through
 * serverWrite (capture triggers, hashes, row_state — everything a commit writes); the template
 * is then cloned set-based to N new users with INSERT … SELECT into every table a commit touches:
 * the business rows, user/scope/source state, row_state, bundle_log and bundle_rows. A bundle's
 * rows and hash do not name the user (keys are unique per scope), so each clone is exactly what
 * N users committing the same bundles would have left behind.
 */
import type pg from 'pg';
import { sql } from '../../core/db/index.js';
import { serverWrite } from '../../core/sync/index.js';
import { type BenchServer } from './server.js';

export interface Template {
  readonly userId: string;
  readonly bundles: number;
  readonly rowsPerBundle: number;
}

/** The template user: `bundles` server-written bundles of `rowsPerBundle` new rows each. */
export async function seedTemplate(server: BenchServer, userId: string, bundles: number, rowsPerBundle: number): Promise<Template> {
  for (let b = 0; b < bundles; b++) {
    await serverWrite(server.db, { userId, sourceId: 'server:bench-seed', retainedBundlesPerUser: server.runtime.config.limits.retainedBundlesPerUser }, (tx, scope) =>
      tx.query(sql`
        INSERT INTO bench.notes (id, _sync_scope_id, title, body, position, done, updated_at)
        SELECT gen_random_uuid(), ${scope}, 'Note ' || g || ': copper lantern orbit', 'sync offline bundle ledger harbor quartz meadow signal #' || g,
               g, false, now() FROM generate_series(1, ${rowsPerBundle}::integer) g`),
    );
  }
  return { userId, bundles, rowsPerBundle };
}

/**
 * Clones the template to users `<prefix><from>` … `<prefix><to - 1>`. Runs as the owner with
 * triggers off (session_replication_role = replica, transaction-local): the rows written are
 * the ones the triggers would have produced, copied from the template.
 */
export async function cloneTemplate(admin: pg.Pool, t: Template, prefix: string, from: number, to: number): Promise<void> {
  const client = await admin.connect();
  try {
    await client.query('BEGIN');
    // Seeding is no request: the statement bound bootstrap installs on the role does not apply.
    await client.query("SET LOCAL session_replication_role = 'replica'; SET LOCAL statement_timeout = 0");
    await client.query(
      `CREATE TEMP TABLE seed_map ON COMMIT DROP AS
         SELECT $1 || g AS user_id FROM generate_series($2::integer, $3::integer - 1) g`,
      [prefix, from, to],
    );
    const steps = [
      `INSERT INTO sync.user_state (user_id, latest_bundle_seq, retained_floor, pruned_through, created_at)
       SELECT m.user_id, s.latest_bundle_seq, s.retained_floor, s.pruned_through, now() FROM seed_map m, sync.user_state s WHERE s.user_id = $1`,
      `INSERT INTO sync.scope_state (user_id, status, initialization_id, lease_source_id, lease_expires_at, updated_at)
       SELECT m.user_id, s.status, s.initialization_id, s.lease_source_id, s.lease_expires_at, now() FROM seed_map m, sync.scope_state s WHERE s.user_id = $1`,
      `INSERT INTO sync.source_state (user_id, source_id, status, last_source_bundle_id, replaced_by_source_id, created_at)
       SELECT m.user_id, s.source_id, s.status, s.last_source_bundle_id, s.replaced_by_source_id, now() FROM seed_map m, sync.source_state s WHERE s.user_id = $1`,
      `INSERT INTO sync.row_state (user_id, table_id, key_bytes, row_version, deleted)
       SELECT m.user_id, r.table_id, r.key_bytes, r.row_version, r.deleted FROM seed_map m, sync.row_state r WHERE r.user_id = $1`,
      `INSERT INTO sync.bundle_log (user_id, bundle_seq, source_id, source_bundle_id, row_count, byte_count, bundle_hash, request_hash, committed_at)
       SELECT m.user_id, b.bundle_seq, b.source_id, b.source_bundle_id, b.row_count, b.byte_count, b.bundle_hash, b.request_hash, b.committed_at
         FROM seed_map m, sync.bundle_log b WHERE b.user_id = $1`,
      `INSERT INTO sync.bundle_rows (user_id, bundle_seq, row_ordinal, table_id, key_bytes, op_code, payload)
       SELECT m.user_id, r.bundle_seq, r.row_ordinal, r.table_id, r.key_bytes, r.op_code, r.payload FROM seed_map m, sync.bundle_rows r WHERE r.user_id = $1`,
    ];
    for (const text of steps) await client.query(text, [t.userId]);
    await client.query(
      `INSERT INTO bench.notes (id, _sync_scope_id, title, body, position, done, updated_at)
       SELECT n.id, m.user_id, n.title, n.body, n.position, n.done, n.updated_at FROM seed_map m, bench.notes n WHERE n._sync_scope_id = $1`,
      [t.userId],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Bundles and business rows of users whose id starts with `prefix`, for the checks. */
export async function countOthers(admin: pg.Pool, prefix: string): Promise<{ users: number; bundles: number; bundleRows: number; notes: number }> {
  const r = await admin.query<{ users: string; bundles: string; bundle_rows: string; notes: string }>(
    `SELECT (SELECT count(*) FROM sync.user_state WHERE user_id LIKE $1 || '%') AS users,
            (SELECT count(*) FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id LIKE $1 || '%') AS bundles,
            (SELECT count(*) FROM sync.bundle_rows b JOIN sync.user_state u USING (user_id) WHERE u.user_id LIKE $1 || '%') AS bundle_rows,
            (SELECT count(*) FROM bench.notes WHERE _sync_scope_id LIKE $1 || '%') AS notes`,
    [prefix],
  );
  const row = r.rows[0];
  return { users: Number(row?.users), bundles: Number(row?.bundles), bundleRows: Number(row?.bundle_rows), notes: Number(row?.notes) };
}
