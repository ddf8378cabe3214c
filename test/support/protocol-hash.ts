/** A digest of every wire schema, so a protocol change cannot slip in unnoticed. */
import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import * as protocol from '../../core/protocol/index.js';

export function protocolSchemaHash(): string {
  const hash = createHash('sha256');
  for (const [name, value] of Object.entries(protocol).sort(([a], [b]) => a.localeCompare(b))) {
    if (value instanceof z.core.$ZodType) hash.update(`${name}:${JSON.stringify(z.toJSONSchema(value, { unrepresentable: 'any' }))}\n`);
  }
  return hash.digest('hex');
}
