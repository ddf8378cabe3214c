/** Business schemas the server tests use. */
import { parseTables } from '../../core/config.js';

/** Lists and items (uuid keys, FK with cascade) plus a text-keyed table with every wire type. */
export const APP_SCHEMA_SQL = `
CREATE SCHEMA app;
CREATE TABLE app.lists (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  position integer,
  PRIMARY KEY (_sync_scope_id, id)
);
CREATE TABLE app.items (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  list_id uuid NOT NULL,
  body text NOT NULL,
  done boolean NOT NULL DEFAULT false,
  attachment bytea,
  PRIMARY KEY (_sync_scope_id, id),
  FOREIGN KEY (_sync_scope_id, list_id) REFERENCES app.lists (_sync_scope_id, id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
);
CREATE TABLE app.kinds (
  code text NOT NULL,
  _sync_scope_id text NOT NULL,
  big bigint,
  amount numeric(20, 4),
  ratio double precision,
  meta jsonb,
  seen_at timestamptz,
  flag boolean,
  blob bytea,
  label text UNIQUE DEFERRABLE,
  PRIMARY KEY (_sync_scope_id, code)
);
ALTER TABLE app.kinds DROP CONSTRAINT kinds_label_key;
ALTER TABLE app.kinds ADD CONSTRAINT kinds_label_key UNIQUE (_sync_scope_id, label);
`;

export const APP_TABLES = parseTables('app.lists:id,app.items:id,app.kinds:code');
