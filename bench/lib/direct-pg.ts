/**
 * Baseline: rows written straight to PostgreSQL with one multi-row
 * `INSERT … ON CONFLICT DO UPDATE` in one transaction, into bench.notes_direct (the same shape as
 * the synced table, never registered, so no capture and no sync metadata).
 */
import type pg from 'pg';
import { type Note } from './rows.js';

export async function directUpsert(admin: pg.Pool, scopeId: string, notes: readonly Note[]): Promise<void> {
  const values: unknown[] = [scopeId];
  const tuples: string[] = [];
  for (const n of notes) {
    const b = values.length;
    values.push(n.id, n.title, n.body, n.position, n.done, n.updated_at);
    tuples.push(`($${b + 1}::uuid, $1, $${b + 2}, $${b + 3}, $${b + 4}::integer, $${b + 5}::boolean, $${b + 6}::timestamptz)`);
  }
  const client = await admin.connect();
  try {
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO bench.notes_direct (id, _sync_scope_id, title, body, position, done, updated_at) VALUES ${tuples.join(', ')}
       ON CONFLICT (_sync_scope_id, id) DO UPDATE SET title = EXCLUDED.title, body = EXCLUDED.body, position = EXCLUDED.position,
         done = EXCLUDED.done, updated_at = EXCLUDED.updated_at`,
      values,
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Rows of one scope in a bench table, for the row-count checks. */
export async function countScope(admin: pg.Pool, table: 'notes' | 'notes_direct', scopeId: string): Promise<number> {
  const r = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM bench.${table} WHERE _sync_scope_id = $1`, [scopeId]);
  return Number(r.rows[0]?.n ?? -1);
}
