/** Capabilities, health, status and error bodies. */
import * as z from 'zod/mini';
import './zod.js';

export const ColumnSpec = z.object({
  name: z.string(),
  type: z.string(),
  nullable: z.boolean(),
  /** Whether an insert that omits the column still gets a value (default, identity, generated). */
  has_default: z.optional(z.boolean()),
});
export type ColumnSpec = z.infer<typeof ColumnSpec>;

export const TableSpec = z.object({
  schema: z.string(),
  table: z.string(),
  sync_key: z.object({ column: z.string(), kind: z.enum(['uuid', 'text']) }),
  columns: z.array(ColumnSpec),
  /** The tables this table's foreign keys reference: a client must manage them too. */
  foreign_keys: z.optional(z.array(z.object({ references: z.object({ schema: z.string(), table: z.string() }) }))),
});
export type TableSpec = z.infer<typeof TableSpec>;

export const CapabilitiesResponse = z.object({
  /** The newest protocol this server serves now (2 once its layout holds protocol 2's functions). */
  protocol_version: z.int(),
  /** The oldest protocol it still serves; absent before protocol 2 (then 1). */
  min_protocol_version: z.optional(z.int()),
  schema_version: z.int(),
  app_name: z.string(),
  registered_tables: z.array(z.string()),
  registered_table_specs: z.array(TableSpec),
  features: z.record(z.string(), z.boolean()),
  bundle_limits: z.record(z.string(), z.number()),
});
export type CapabilitiesResponse = z.infer<typeof CapabilitiesResponse>;

export const Conflict = z.object({
  schema: z.string(),
  table: z.string(),
  key: z.record(z.string(), z.string()),
  op: z.enum(['INSERT', 'UPDATE', 'DELETE']),
  base_row_version: z.int(),
  server_row_version: z.int(),
  server_row_deleted: z.boolean(),
  server_row: z.nullable(z.record(z.string(), z.unknown())),
  /**
   * The server row did not fit the answer's byte budget and was left out (`server_row` is null but
   * the row exists): read it from committed bundle `server_row_version` (protocol §5.2).
   */
  server_row_omitted: z.optional(z.boolean()),
});
export type Conflict = z.infer<typeof Conflict>;

export const ErrorBody = z.looseObject({
  error: z.string(),
  message: z.string(),
  conflict: z.optional(Conflict),
  conflicts: z.optional(z.array(Conflict)),
  conflict_count: z.optional(z.int()),
  source_id: z.optional(z.string()),
  replaced_by_source_id: z.optional(z.nullable(z.string())),
  retry_after_seconds: z.optional(z.int()),
  next_expected_row_ordinal: z.optional(z.int()),
  violation: z.optional(
    z.object({
      sqlstate: z.string(),
      constraint: z.nullable(z.string()),
      schema: z.nullable(z.string()),
      table: z.nullable(z.string()),
      column: z.optional(z.nullable(z.string())),
      key: z.nullable(z.record(z.string(), z.string())),
    }),
  ),
  details: z.optional(z.unknown()),
  /** How many problems there are when `details` lists only the first that fit the answer. */
  detail_count: z.optional(z.int()),
});
export type ErrorBody = z.infer<typeof ErrorBody>;
