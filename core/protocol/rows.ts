/** Row shapes on the wire (docs/protocol.md §4.1). */
import * as z from 'zod/mini';
import './zod.js';

export const Op = z.enum(['INSERT', 'UPDATE', 'DELETE']);
export type Op = z.infer<typeof Op>;

const identifier = z.string().check(z.minLength(1), z.maxLength(63));
const version = z.int().check(z.gte(0), z.lte(Number.MAX_SAFE_INTEGER));

/** `{column: "value"}` with exactly one entry: the table's sync key. */
export const SyncKey = z
  .record(z.string().check(z.minLength(1), z.maxLength(63)), z.string().check(z.maxLength(4096)))
  .check(z.refine((k) => Object.keys(k).length === 1, 'key must name exactly one column: the sync key'));
export type SyncKey = z.infer<typeof SyncKey>;

export const Payload = z.record(z.string(), z.unknown());
export type Payload = z.infer<typeof Payload>;

export const PushedRow = z.strictObject({
  schema: identifier,
  table: identifier,
  key: SyncKey,
  op: Op,
  base_row_version: version,
  payload: z.optional(z.nullable(Payload)),
});
export type PushedRow = z.infer<typeof PushedRow>;

export const CommittedRow = z.object({
  schema: z.string(),
  table: z.string(),
  key: SyncKey,
  op: Op,
  row_version: version,
  payload: z.nullable(Payload),
});
export type CommittedRow = z.infer<typeof CommittedRow>;

export const SnapshotRow = z.object({
  schema: z.string(),
  table: z.string(),
  key: SyncKey,
  row_version: version,
  payload: Payload,
});
export type SnapshotRow = z.infer<typeof SnapshotRow>;
