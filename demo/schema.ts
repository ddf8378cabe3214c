/**
 * The demo app's business schema (shared to-do lists with items and an optional attachment),
 * created by `npm start` on a fresh embedded database, and its registered tables; and the SQL
 * that fills a user's account with many rows (the hydration test and benchmark).
 */
import { sql, type SqlFragment } from '../core/db/sql.js';

export const DEMO_SCHEMA_SQL = `
CREATE SCHEMA IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.lists (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (_sync_scope_id, id)
);
CREATE TABLE IF NOT EXISTS demo.todos (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  list_id uuid NOT NULL,
  title text NOT NULL,
  done boolean NOT NULL DEFAULT false,
  position integer NOT NULL DEFAULT 0,
  attachment bytea,
  attachment_name text,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (_sync_scope_id, id),
  FOREIGN KEY (_sync_scope_id, list_id) REFERENCES demo.lists (_sync_scope_id, id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
);
`;

export const DEMO_SYNC_TABLES = 'demo.lists:id,demo.todos:id';

/**
 * Inserts `lists` lists of `todosPerList` to-dos each (every hundredth with a small attachment)
 * for `scope`, with stable ids: two statements, to run inside a server write.
 */
export function demoSeed(scope: string, lists: number, todosPerList: number): readonly SqlFragment[] {
  return [
    sql`INSERT INTO demo.lists (id, _sync_scope_id, title, created_at)
      SELECT md5('list' || i)::uuid, ${scope}, 'List ' || lpad(i::text, 2, '0'), now() + i * interval '1 second' FROM generate_series(1, ${lists}::int) i`,
    sql`INSERT INTO demo.todos (id, _sync_scope_id, list_id, title, done, position, attachment, attachment_name)
      SELECT md5('todo' || l || '.' || t)::uuid, ${scope}, md5('list' || l)::uuid, 'to-do ' || l || '.' || t, t % 3 = 0, t,
             CASE WHEN t % 100 = 0 THEN decode('00ff', 'hex') END, CASE WHEN t % 100 = 0 THEN 'note.bin' END
      FROM generate_series(1, ${lists}::int) l, generate_series(1, ${todosPerList}::int) t`,
  ];
}
