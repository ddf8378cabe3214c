/**
 * The app schema of test/support/schemas.ts as a device keeps it locally: UUID keys as BLOB
 * (lists) and TEXT (items), and a text-keyed table of every wire type. No vitest import: the
 * browser fixtures (test/support/web) bundle it too.
 */
import { type TableConfig } from '../../client-web/api.js';

/** The local DDL. */
export const LOCAL_APP_SQL = `
CREATE TABLE IF NOT EXISTS lists (
  id BLOB PRIMARY KEY,
  title TEXT NOT NULL,
  position INTEGER
);
CREATE TABLE IF NOT EXISTS items (
  id TEXT PRIMARY KEY,
  list_id BLOB NOT NULL REFERENCES lists(id) ON DELETE CASCADE,
  body TEXT NOT NULL,
  done INTEGER NOT NULL DEFAULT 0,
  attachment BLOB
);
CREATE TABLE IF NOT EXISTS kinds (
  code TEXT PRIMARY KEY,
  big INTEGER,
  amount TEXT,
  ratio REAL,
  meta TEXT,
  seen_at TEXT,
  flag INTEGER,
  blob BLOB,
  label TEXT
);
`;

export const LOCAL_APP_TABLES: readonly TableConfig[] = [
  { schema: 'app', table: 'lists' },
  { schema: 'app', table: 'items' },
  { schema: 'app', table: 'kinds' },
];
