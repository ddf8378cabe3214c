/** Capabilities, health, status and error bodies. */
import { z } from 'zod';

export const ColumnSpec = z.object({ name: z.string(), type: z.string(), nullable: z.boolean() });
export type ColumnSpec = z.infer<typeof ColumnSpec>;

export const TableSpec = z.object({
  schema: z.string(),
  table: z.string(),
  sync_key: z.object({ column: z.string(), kind: z.enum(['uuid', 'text']) }),
  columns: z.array(ColumnSpec),
});
export type TableSpec = z.infer<typeof TableSpec>;

export const CapabilitiesResponse = z.object({
  protocol_version: z.number().int(),
  schema_version: z.number().int(),
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
  base_row_version: z.number().int(),
  server_row_version: z.number().int(),
  server_row_deleted: z.boolean(),
  server_row: z.record(z.string(), z.unknown()).nullable(),
});
export type Conflict = z.infer<typeof Conflict>;

export const ErrorBody = z
  .object({
    error: z.string(),
    message: z.string(),
    conflict: Conflict.optional(),
    conflicts: z.array(Conflict).optional(),
    conflict_count: z.number().int().optional(),
    source_id: z.string().optional(),
    replaced_by_source_id: z.string().nullable().optional(),
    retry_after_seconds: z.number().int().optional(),
    next_expected_row_ordinal: z.number().int().optional(),
    violation: z
      .object({
        sqlstate: z.string(),
        constraint: z.string().nullable(),
        schema: z.string().nullable(),
        table: z.string().nullable(),
        column: z.string().nullable().optional(),
        key: z.record(z.string(), z.string()).nullable(),
      })
      .optional(),
    details: z.unknown().optional(),
  })
  .loose();
export type ErrorBody = z.infer<typeof ErrorBody>;
