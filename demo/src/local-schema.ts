/**
 * The demo's local tables: the same names and columns as demo.lists and demo.todos on the
 * server, without `_sync_scope_id` (the client never sees it). Timestamps are RFC 3339 text with
 * a zone, booleans 0/1, bytea a BLOB.
 */
import type { TableConfig } from '../../client-web/api.js';

export const LOCAL_SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS lists (
  id TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS todos (
  id TEXT PRIMARY KEY,
  list_id TEXT NOT NULL REFERENCES lists(id) ON DELETE CASCADE,
  title TEXT NOT NULL,
  done INTEGER NOT NULL DEFAULT 0,
  position INTEGER NOT NULL DEFAULT 0,
  attachment BLOB,
  attachment_name TEXT,
  updated_at TEXT NOT NULL
);
-- The todo panel reads one list in position order.
CREATE INDEX IF NOT EXISTS todos_by_list ON todos (list_id, position);
`;

export const DEMO_TABLES: readonly TableConfig[] = [
  { schema: 'demo', table: 'lists' },
  { schema: 'demo', table: 'todos' },
];

/** One local database per user, so two people sharing a browser never share data. */
export function dbNameFor(userId: string): string {
  return `lockstep-demo-${userId}`;
}
