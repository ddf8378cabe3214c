/**
 * Layout version 16: protocol 2, json and jsonb values as a JSON string of their text (issue 23;
 * docs/protocol.md §4.2, §9), so every digit and the difference between JSON null and SQL NULL
 * survive. The server stores one form, protocol 2's: captured payloads (the catalog's generated
 * SQL, rewritten by the same bootstrap), staged rows (push_chunk turns protocol 1's values into
 * strings) and rendered rows. Protocol 1's form is derived on the way out for clients that do not
 * ask for protocol 2: committed rows from their payload (sync.json_payload_form), snapshots from
 * the catalog's `snapshot_v1_sql`, and each bundle is hashed in both forms (`bundle_hash` stays
 * protocol 1's; `bundle_hash_v2` is kept where the forms differ). Bundles committed before this
 * layout are marked `json_form` 1 and converted the other way for protocol 2 readers.
 *
 * sync.jcs_number writes a number beyond the double range (jsonb holds 1e400; protocol 1's hash
 * of a json value meets it) as ECMAScript would after JSON.parse instead of failing the commit.
 *
 * The request functions take the protocol as a new last argument with default 1, and a previous
 * build's calls get protocol 1's answers exactly as before (conflicts' server rows included), so
 * min_safe_version stays 15. Open push sessions staged in protocol 1's form are restaged in the
 * stored form (their request hash is still computed on protocol 1's).
 */
import { type Migration } from './migration.js';
import { jcsNumberSql } from '../../sync/canonical/jcs.sql.js';
import { jsonPayloadFormSql, jsonV1Sql } from '../../sync/catalog/wire-values.sql.js';
import { pushChunkSql, pushCreateSql } from '../../sync/push/push-session.sql.js';
import { bundleAnswerSql, finalizeBundleSql, pushCommitSql } from '../../sync/push/commit.sql.js';
import { committedRowInFormSql, committedRowsSql, pullSql } from '../../sync/read/read.sql.js';
import { snapshotCreateSql, snapshotPageSql } from '../../sync/snapshot/snapshot.sql.js';

export const migration0016: Migration = {
  version: 16,
  minSafeVersion: 15,
  description: 'protocol 2: json and jsonb travel as a JSON string of their text; protocol 1 derived for older clients',
  dropFunctions: [
    'sync.push_create(text, text, bigint, integer, uuid, text, integer, integer, integer)',
    'sync.push_chunk(text, text, uuid, integer, jsonb, bigint, text, bigint, bigint, integer)',
    'sync.pull(text, text, bigint, integer, bigint, bigint)',
    'sync.committed_rows(text, bigint, bigint, integer, bigint)',
    'sync.snapshot_create(text, text, text, text, text, integer, integer, integer)',
    'sync.snapshot_page(text, uuid, bigint, integer, bigint)',
  ],
  statements: [
    // Existing bundles were stored in protocol 1's form; finalize_bundle writes 2 from now on.
    `ALTER TABLE sync.bundle_log ADD COLUMN json_form smallint NOT NULL DEFAULT 1, ADD COLUMN bundle_hash_v2 text`,
    `ALTER TABLE sync.push_sessions ADD COLUMN json_form smallint NOT NULL DEFAULT 1`,
    `ALTER TABLE sync.snapshot_sessions ADD COLUMN json_form smallint NOT NULL DEFAULT 1`,
    // Filled by the bootstrap that runs this migration (it rewrites every catalog entry).
    `ALTER TABLE sync.table_catalog ADD COLUMN json_columns text[], ADD COLUMN snapshot_v1_sql text`,
  ],
  functions: [
    jcsNumberSql, jsonV1Sql, jsonPayloadFormSql, pushCreateSql, pushChunkSql, bundleAnswerSql, finalizeBundleSql, pushCommitSql,
    committedRowInFormSql, pullSql, committedRowsSql, snapshotCreateSql, snapshotPageSql,
  ],
  afterFunctions: [
    // Rows staged before the upgrade hold protocol 1's values; the upsert reads protocol 2's strings.
    `UPDATE sync.push_session_rows r SET payload = sync.json_payload_form(r.payload, j.columns, 2::smallint)
       FROM (SELECT c.table_id, array_agg(e ->> 'name') AS columns FROM sync.table_catalog c, jsonb_array_elements(c.columns) e
              WHERE e ->> 'type' IN ('json', 'jsonb') GROUP BY c.table_id) j
      WHERE r.table_id = j.table_id AND r.payload IS NOT NULL`,
  ],
};
