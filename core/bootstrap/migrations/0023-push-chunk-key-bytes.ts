/**
 * Layout version 23: `sync.push_chunk` computes each staged row's key bytes in its own statement
 * instead of calling `sync.key_bytes` per row. That SQL function is declared IMMUTABLE while
 * `convert_to` is STABLE, so PostgreSQL never inlines it and pays a function call per row (~1.8
 * µs; 10k rows: ~18 ms of a push's staging). The bytes are the same, so staged rows, request
 * hashes and answers are unchanged: min_safe_version stays 18.
 */
import { type Migration } from './migration.js';
import { pushChunkSql } from '../../sync/push/push-session.sql.js';

export const migration0023: Migration = {
  version: 23,
  minSafeVersion: 18,
  description: 'push chunk computes key bytes inline instead of calling sync.key_bytes per row',
  functions: [pushChunkSql],
};
