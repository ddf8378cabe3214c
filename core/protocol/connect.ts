/** POST /sync/connect (docs/protocol.md §5.1). */
import { z } from 'zod';

export const ConnectRequest = z.strictObject({ has_local_pending_rows: z.boolean() });
export type ConnectRequest = z.infer<typeof ConnectRequest>;

export const Resolution = z.enum(['initialize_local', 'initialize_empty', 'remote_authoritative', 'retry_later']);
export type Resolution = z.infer<typeof Resolution>;

export const ConnectResponse = z.object({
  resolution: Resolution,
  initialization_id: z.uuid().nullable(),
  lease_expires_at: z.string().nullable(),
  retry_after_seconds: z.number().int().positive().optional(),
});
export type ConnectResponse = z.infer<typeof ConnectResponse>;
