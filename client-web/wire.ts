/**
 * The client's validation of bulk answers. Envelopes are checked with the protocol's zod schemas;
 * rows only by shape here (a cheap predicate, ~20× faster than a zod object per row on a 5,000-row
 * page), because apply checks every key and value against the local model anyway and raises
 * `protocol_violation` for anything the model does not expect.
 */
import * as z from 'zod/mini';
import '../core/protocol/zod.js';
import { CommittedBundlePage, PulledBundle, PullResponse, SnapshotPage } from '../core/protocol/read-path.js';
import { ChangedMessage } from '../core/protocol/notify.js';
import { type CommittedRow, type SnapshotRow } from '../core/protocol/rows.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function rowShape(r: unknown, committed: boolean): boolean {
  if (!isObject(r)) return false;
  if (typeof r['schema'] !== 'string' || typeof r['table'] !== 'string' || !isObject(r['key'])) return false;
  if (!Number.isSafeInteger(r['row_version'])) return false;
  if (!committed) return isObject(r['payload']);
  const op = r['op'];
  if (op === 'DELETE') return r['payload'] === null;
  return (op === 'INSERT' || op === 'UPDATE') && isObject(r['payload']);
}

const committedRows = z.array(z.unknown()).check(z.refine((rows) => rows.every((r) => rowShape(r, true)), 'malformed committed row')) as unknown as z.ZodMiniType<CommittedRow[]>;
const snapshotRows = z.array(z.unknown()).check(z.refine((rows) => rows.every((r) => rowShape(r, false)), 'malformed snapshot row')) as unknown as z.ZodMiniType<SnapshotRow[]>;

export const PullAnswer = z.extend(PullResponse, { bundles: z.array(z.extend(PulledBundle, { rows: committedRows })) });
export const CommittedRowsAnswer = z.extend(CommittedBundlePage, { rows: committedRows });
export const SnapshotAnswer = z.extend(SnapshotPage, { rows: snapshotRows });
/** A push notification, with the pull page it may carry checked like a pulled one. */
export const NotifiedChange = z.extend(ChangedMessage, { pull: z.optional(PullAnswer) });
