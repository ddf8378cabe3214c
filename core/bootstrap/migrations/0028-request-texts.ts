/**
 * Layout version 28: the commit's request hash from texts the edge rendered at upload. Each chunk
 * comes with its rows' RFC 8785 texts (push_chunk's new last argument, kept with the chunk's first
 * staged row), and the commit hashes them when they cover every staged row
 * (sync.push_request_hash) instead of rendering all the staged rows again, a tenth of a large
 * commit. A session some of whose chunks came without texts (a build before this one, during a
 * rolling deploy) is hashed from its rows as before (sync.push_request_rows_hash). Older builds
 * call push_chunk without the new argument, which defaults to none: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { pushChunkSql, pushRequestHashSql, pushRequestRowsHashSql } from '../../sync/push/push-session.sql.js';

export const migration0028: Migration = {
  version: 28,
  minSafeVersion: 18,
  description: "the request hash from the chunks' texts rendered by the edge",
  dropFunctions: ['sync.push_chunk(text, text, uuid, integer, jsonb, bigint, text, bigint, bigint, integer, smallint)'],
  statements: [
    // Stored as they are: a chunk's text is megabytes of JSON, which compression would only slow down.
    `ALTER TABLE sync.push_session_rows ADD COLUMN request_text text`,
    `ALTER TABLE sync.push_session_rows ALTER COLUMN request_text SET STORAGE EXTERNAL`,
    `ALTER TABLE sync.push_sessions ADD COLUMN text_rows integer NOT NULL DEFAULT 0`,
    // The commit finds a session's few texts without visiting its staged rows.
    `CREATE INDEX push_session_rows_text_idx ON sync.push_session_rows (user_id, push_id, row_ordinal) WHERE request_text IS NOT NULL`,
  ],
  functions: [pushChunkSql, pushRequestRowsHashSql, pushRequestHashSql],
};
