/** POST /sync/connect (docs/protocol.md §5.1). */
import * as z from 'zod/mini';
import './zod.js';

export const ConnectRequest = z.strictObject({ has_local_pending_rows: z.boolean() });
export type ConnectRequest = z.infer<typeof ConnectRequest>;

export const Resolution = z.enum(['initialize_local', 'initialize_empty', 'remote_authoritative', 'retry_later']);
export type Resolution = z.infer<typeof Resolution>;

export const ConnectResponse = z.object({
  resolution: Resolution,
  initialization_id: z.nullable(z.uuid()),
  lease_expires_at: z.nullable(z.string()),
  retry_after_seconds: z.optional(z.int().check(z.positive())),
});
export type ConnectResponse = z.infer<typeof ConnectResponse>;
