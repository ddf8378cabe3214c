/**
 * The client's validation of bulk answers. Envelopes are checked with the protocol's zod schemas;
 * rows only by shape here (a cheap predicate, ~20× faster than a zod object per row on a 5,000-row
 * page), because apply checks every key and value against the local model anyway and raises
 * `protocol_violation` for anything the model does not expect.
 */
import * as z from 'zod/mini';
import '../core/protocol/zod.js';
import { CommittedBundlePage, PulledBundle, PullResponse, SnapshotPage, SnapshotSession } from '../core/protocol/read-path.js';
import { ChangedMessage } from '../core/protocol/notify.js';
import { type CommittedRow } from '../core/protocol/rows.js';

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

/** A row of a page of arrays: its table one the page names, a row version, then the values. */
function arrayRowShape(r: unknown, tables: Readonly<Record<string, unknown>>): boolean {
  return Array.isArray(r) && r.length >= 2 && Object.hasOwn(tables, String(r[0])) && Number.isSafeInteger(r[1]);
}

const committedRows = z.array(z.unknown()).check(z.refine((rows) => rows.every((r) => rowShape(r, true)), 'malformed committed row')) as unknown as z.ZodMiniType<CommittedRow[]>;

export const PullAnswer = z.extend(PullResponse, { bundles: z.array(z.extend(PulledBundle, { rows: committedRows })) });
export const CommittedRowsAnswer = z.extend(CommittedBundlePage, { rows: committedRows });
/** A snapshot page: objects, or arrays under the page's `tables` (row_form arrays). */
export const SnapshotAnswer = z.extend(SnapshotPage, { rows: z.array(z.unknown()) }).check(z.refine(
  (page) => (page.tables ? page.rows.every((r) => arrayRowShape(r, page.tables as Record<string, unknown>)) : page.rows.every((r) => rowShape(r, false))),
  'malformed snapshot row')) as unknown as z.ZodMiniType<SnapshotPage>;
/** A snapshot create's answer, with the first page it may carry checked like any page. */
export const SnapshotCreatedAnswer = z.extend(SnapshotSession, { first_page: z.optional(SnapshotAnswer) });
/** A push notification, with the pull page it may carry checked like a pulled one. */
export const NotifiedChange = z.extend(ChangedMessage, { pull: z.optional(PullAnswer) });
