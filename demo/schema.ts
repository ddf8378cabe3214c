/**
 * The demo app's business schema (shared to-do lists with items and an optional attachment),
 * created by `npm start` on a fresh embedded database, and its registered tables.
 */
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
