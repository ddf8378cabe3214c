/**
 * The benchmark's business schema: one synced table of typical rows (~200 bytes of JSON each)
 * and an identical table that is not registered, for the straight-to-PostgreSQL baseline.
 */
import { parseTables } from '../../core/config.js';

const NOTE_COLUMNS = `
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  body text NOT NULL,
  position integer NOT NULL,
  done boolean NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (_sync_scope_id, id)`;

export const BENCH_SCHEMA_SQL = `
CREATE SCHEMA bench;
CREATE TABLE bench.notes (${NOTE_COLUMNS});
-- Same shape, never registered: the baseline writes here with no capture and no sync metadata.
CREATE TABLE bench.notes_direct (${NOTE_COLUMNS});
-- The design floors' tables (design-floor.ts): never registered either.
CREATE TABLE bench.floor_stage (user_id text NOT NULL, push_id integer NOT NULL, row_ordinal integer NOT NULL, payload jsonb NOT NULL,
  PRIMARY KEY (user_id, push_id, row_ordinal));
CREATE TABLE bench.floor_notes (${NOTE_COLUMNS});
CREATE TABLE bench.floor_bundle_rows (user_id text NOT NULL, bundle_seq bigint NOT NULL, row_ordinal integer NOT NULL, payload jsonb NOT NULL,
  PRIMARY KEY (user_id, bundle_seq, row_ordinal));
CREATE TABLE bench.floor_row_state (user_id text NOT NULL, key_id uuid NOT NULL, row_version bigint NOT NULL, PRIMARY KEY (user_id, key_id));
CREATE TABLE bench.floor_snapshot (snapshot_id integer NOT NULL, row_ordinal integer NOT NULL, row_version bigint NOT NULL,
  id uuid NOT NULL, title text NOT NULL, body text NOT NULL, position integer NOT NULL, done boolean NOT NULL, updated_at timestamptz NOT NULL,
  PRIMARY KEY (snapshot_id, row_ordinal));
`;

export const SYNC_TABLES_SPEC = 'bench.notes:id';
export const BENCH_TABLES = parseTables(SYNC_TABLES_SPEC);

/** The visible columns, in the order the client tables and the baselines use. */
export const NOTE_FIELDS = ['id', 'title', 'body', 'position', 'done', 'updated_at'] as const;
