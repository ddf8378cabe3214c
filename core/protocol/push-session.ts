/** Push sessions: create, chunk, commit (docs/protocol.md §5.2). */
import { z } from 'zod';
import { PushedRow } from './rows.js';

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const hexDigest = z.string().regex(/^[0-9a-f]{64}$/, 'must be lowercase hex SHA-256');

export const PushSessionCreateRequest = z.strictObject({
  source_bundle_id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  planned_row_count: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  initialization_id: z.uuid().nullable().optional(),
  request_hash: hexDigest.nullable().optional(),
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
export const PushSessionAlreadyCommitted = BundleSummary.extend({ status: z.literal('already_committed') });
export const PushSessionCreateResponse = z.discriminatedUnion('status', [PushSessionStaging, PushSessionAlreadyCommitted]);
export type PushSessionCreateResponse = z.infer<typeof PushSessionCreateResponse>;

export const ChunkRequest = z.strictObject({
  start_row_ordinal: count,
  rows: z.array(PushedRow).min(1),
});
export type ChunkRequest = z.infer<typeof ChunkRequest>;

export const ChunkResponse = z.object({ push_id: z.uuid(), next_expected_row_ordinal: count });
export type ChunkResponse = z.infer<typeof ChunkResponse>;

export const CommitResponse = BundleSummary.extend({ status: z.literal('committed') });
export type CommitResponse = z.infer<typeof CommitResponse>;
