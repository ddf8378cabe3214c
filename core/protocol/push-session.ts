/** Push sessions: create, chunk, commit (docs/protocol.md §5.2). */
import * as z from 'zod/mini';
import './zod.js';
import { PushedRow, isPlainRecord, isPushedRow } from './rows.js';

const count = z.int().check(z.gte(0), z.lte(Number.MAX_SAFE_INTEGER));
const hexDigest = z.string().check(z.regex(/^[0-9a-f]{64}$/, 'must be lowercase hex SHA-256'));

export const PushSessionCreateRequest = z.strictObject({
  source_bundle_id: z.int().check(z.gte(1), z.lte(Number.MAX_SAFE_INTEGER)),
  planned_row_count: z.int().check(z.gte(1), z.lte(Number.MAX_SAFE_INTEGER)),
  initialization_id: z.optional(z.nullable(z.uuid())),
  request_hash: z.optional(z.nullable(hexDigest)),
  /**
   * The whole bundle (`planned_row_count` rows): staged and committed in this one request, which
   * answers as commit does (docs/protocol.md §5.2; capabilities' `single_request_push`).
   */
  rows: z.optional(z.array(PushedRow).check(z.minLength(1))),
});
export type PushSessionCreateRequest = z.infer<typeof PushSessionCreateRequest>;

export const BundleSummary = z.object({
  bundle_seq: count,
  source_id: z.string(),
  source_bundle_id: count,
  row_count: count,
  bundle_hash: z.string(),
});
export type BundleSummary = z.infer<typeof BundleSummary>;

export const PushSessionStaging = z.object({
  push_id: z.uuid(),
  status: z.literal('staging'),
  planned_row_count: count,
  next_expected_row_ordinal: count,
  expires_at: z.string(),
});
export const PushSessionAlreadyCommitted = z.extend(BundleSummary, { status: z.literal('already_committed') });
export const CommitResponse = z.extend(BundleSummary, { status: z.literal('committed') });
export type CommitResponse = z.infer<typeof CommitResponse>;
/** `committed` only for a create that carried its rows (`rows`). */
export const PushSessionCreateResponse = z.discriminatedUnion('status', [PushSessionStaging, PushSessionAlreadyCommitted, CommitResponse]);
export type PushSessionCreateResponse = z.infer<typeof PushSessionCreateResponse>;

export const ChunkRequest = z.strictObject({
  start_row_ordinal: count,
  rows: z.array(PushedRow).check(z.minLength(1)),
});
export type ChunkRequest = z.infer<typeof ChunkRequest>;

const CHUNK_FIELDS = new Set(Object.keys(ChunkRequest.shape));

/**
 * `ChunkRequest.parse`, with the common case checked without zod: a request whose every part
 * passes the written-out checks is returned as it is (what the schema would answer, uncopied);
 * anything else goes through the schema, so errors read the same.
 */
export function parseChunkRequest(value: unknown): ChunkRequest {
  if (isPlainRecord(value)) {
    const start = value['start_row_ordinal'];
    const rows = value['rows'];
    if (Object.keys(value).every((k) => CHUNK_FIELDS.has(k)) && Number.isSafeInteger(start) && (start as number) >= 0
      && Array.isArray(rows) && rows.length >= 1 && rows.every(isPushedRow)) {
      return value as ChunkRequest;
    }
  }
  return ChunkRequest.parse(value);
}

export const ChunkResponse = z.object({ push_id: z.uuid(), next_expected_row_ordinal: count });
export type ChunkResponse = z.infer<typeof ChunkResponse>;
