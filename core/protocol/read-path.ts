/** Pull, committed-bundle pages and snapshot sessions (docs/protocol.md §5.3–§5.6, §6). */
import * as z from 'zod/mini';
import './zod.js';
import { CommittedRow, SnapshotRow } from './rows.js';

const count = z.int().check(z.gte(0), z.lte(Number.MAX_SAFE_INTEGER));

export const PulledBundle = z.object({
  bundle_seq: count,
  source_id: z.string(),
  source_bundle_id: count,
  row_count: count,
  bundle_hash: z.string(),
  rows_omitted: z.boolean(),
  rows: z.array(CommittedRow),
});
export type PulledBundle = z.infer<typeof PulledBundle>;

export const PullResponse = z.object({
  stable_bundle_seq: count,
  bundles: z.array(PulledBundle),
  has_more: z.boolean(),
});
export type PullResponse = z.infer<typeof PullResponse>;

export const CommittedBundlePage = z.object({
  bundle_seq: count,
  source_id: z.string(),
  source_bundle_id: count,
  row_count: count,
  bundle_hash: z.string(),
  rows: z.array(CommittedRow),
  next_row_ordinal: count,
  has_more: z.boolean(),
});
export type CommittedBundlePage = z.infer<typeof CommittedBundlePage>;

export const SourceReplacementReason = z.enum([
  'history_pruned',
  'source_sequence_out_of_order',
  'source_sequence_changed',
  'source_retired',
]);
export type SourceReplacementReason = z.infer<typeof SourceReplacementReason>;

const sourceId = z.string().check(z.regex(/^[A-Za-z0-9._:-]{1,128}$/, 'must be 1-128 characters of [A-Za-z0-9._:-]'));

/**
 * How a snapshot's rows travel (docs/protocol.md §5.6): `objects`, each row self-describing, or
 * `arrays`, `[table_id, row_version, values…]` under the page's `tables` (protocol 2 only).
 */
export const ROW_FORMS = ['objects', 'arrays'] as const;
export const RowForm = z.enum(ROW_FORMS);
export type RowForm = z.infer<typeof RowForm>;

export const SnapshotCreateRequest = z.strictObject({
  source_replacement: z.optional(z.strictObject({ previous_source_id: sourceId, new_source_id: sourceId, reason: SourceReplacementReason })),
  /** Rows as arrays where the server offers them (capabilities' `snapshot_row_arrays`); default objects. */
  row_form: z.optional(RowForm),
  /**
   * The create answers the session's first page too, as `first_page`, of at most this many rows
   * (capabilities' `snapshot_first_page`): one round trip fewer before a device writes rows.
   */
  first_page_rows: z.optional(z.int().check(z.gte(1), z.lte(Number.MAX_SAFE_INTEGER))),
});
export type SnapshotCreateRequest = z.infer<typeof SnapshotCreateRequest>;

export const SnapshotSession = z.object({
  snapshot_id: z.uuid(),
  snapshot_bundle_seq: count,
  row_count: count,
  byte_count: count,
  expires_at: z.string(),
});
export type SnapshotSession = z.infer<typeof SnapshotSession>;

/** A table of a page of row arrays: the names of the values that follow `table_id, row_version`. */
export const SnapshotTable = z.object({ schema: z.string(), table: z.string(), columns: z.array(z.string()) });
export type SnapshotTable = z.infer<typeof SnapshotTable>;

/** A row of a session of arrays: its table (a key of the page's `tables`), its row version, its values. */
export const SnapshotRowArray = z.tuple([count, count], z.unknown());
export type SnapshotRowArray = z.infer<typeof SnapshotRowArray>;

export const SnapshotPage = z.object({
  snapshot_id: z.uuid(),
  snapshot_bundle_seq: count,
  row_count: count,
  /** Present on a page of row arrays only: each table_id its rows name, with its value names. */
  tables: z.optional(z.record(z.string(), SnapshotTable)),
  rows: z.union([z.array(SnapshotRow), z.array(SnapshotRowArray)]),
  next_row_ordinal: count,
  has_more: z.boolean(),
});
export type SnapshotPage = z.infer<typeof SnapshotPage>;

/** A create's answer: the session, with its first page where the create asked for it (`first_page_rows`). */
export const SnapshotCreated = z.extend(SnapshotSession, { first_page: z.optional(SnapshotPage) });
export type SnapshotCreated = z.infer<typeof SnapshotCreated>;

export const WatchResponse = z.object({ latest_bundle_seq: count, changed: z.boolean() });
export type WatchResponse = z.infer<typeof WatchResponse>;
