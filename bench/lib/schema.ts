/**
 * The benchmark's business schema: one synced table of typical rows (~200 bytes of JSON each)
 * and an identical table that is not registered, for the straight-to-PostgreSQL baseline.
 */
import { parseTables } from '../../core/config.js';
import { designFloorSchemaSql } from './design-floor.js';

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
${designFloorSchemaSql(NOTE_COLUMNS)}`;

export const SYNC_TABLES_SPEC = 'bench.notes:id';
export const BENCH_TABLES = parseTables(SYNC_TABLES_SPEC);

/** The visible columns, in the order the client tables and the baselines use. */
export const NOTE_FIELDS = ['id', 'title', 'body', 'position', 'done', 'updated_at'] as const;
