/**
 * The committed rows of this device's own bundle, predicted from its frozen rows instead of read
 * back after the commit (the replay's read back: for 10k rows two requests and 3.8 MB of rows just
 * uploaded, and a request even for one row).
 *
 * The server commits what the rows became in its tables: its own renderings of the values, rows
 * its triggers and cascades added, its order. The prediction assumes the common case (every value
 * already in the server's rendering but for time zones, no rows added, the order the commit's
 * statements produce) and is used only when its bundle hash (docs/protocol.md §4.3: RFC 8785 and
 * SHA-256 over exactly the fields a committed row carries, with its ordinal) equals the one the
 * server answered: the rows are then the committed rows, field for field. Anything else, a guess
 * that is wrong in any value or position, is read back as before.
 */
import { type CommittedRow } from '../core/protocol/rows.js';
import { canonicalCommittedText, sha256Hex } from '../core/protocol/canonical-rows.js';
import { type OutboxRow } from './outbox.js';
import { type TableModel } from './local-schema.js';

/** What the commit answered about the bundle (commit, or already committed). */
export interface CommittedSummary {
  readonly bundle_seq: number;
  readonly row_count: number;
  readonly bundle_hash: string;
}

/** A UTC time with up to microseconds: date, time (its hour, its seconds), fraction. */
const UTC = /^(\d{4}-\d{2}-\d{2})[Tt ]((\d{2}):\d{2}:(\d{2}))(?:\.(\d{1,6}))?[Zz]$/;
/** RFC 3339 as PostgreSQL reads it into a timestamptz: date, time, up to microseconds, a zone. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)$/;

/**
 * A timestamptz as the server renders it (sync.rfc3339: UTC, six fraction digits, `Z`), or the
 * text unchanged where the guess would be unsure (no zone, more than six digits, another form):
 * the hash then differs and the rows are read back.
 */
export function serverTimestamptz(text: string): string {
  // Already in UTC (what toISOString writes): only the fraction changes, no date arithmetic.
  const utc = UTC.exec(text);
  if (utc) {
    const [, date, time, hour = '', second = '', fraction = ''] = utc;
    if (hour < '24' && second < '60' && !date?.startsWith('0000')) return `${date}T${time}.${fraction.padEnd(6, '0')}Z`;
  }
  const m = RFC3339.exec(text);
  if (!m) return text;
  const [, y, mo, d, h, mi, s, fraction = '', z, sign, oh = '0', om = '0'] = m;
  const offsetMs = z ? 0 : (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om)) * 60_000;
  // setUTCFullYear, not Date.UTC, which reads years 0–99 as 1900–1999.
  const at = new Date(0);
  at.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  at.setUTCHours(Number(h), Number(mi), Number(s), 0);
  at.setTime(at.getTime() - offsetMs);
  const year = at.getUTCFullYear();
  if (year < 1 || year > 9999) return text;
  const p2 = (n: number) => String(n).padStart(2, '0');
  return `${String(year).padStart(4, '0')}-${p2(at.getUTCMonth() + 1)}-${p2(at.getUTCDate())}T${p2(at.getUTCHours())}:${p2(at.getUTCMinutes())}:${p2(at.getUTCSeconds())}.${fraction.padEnd(6, '0')}Z`;
}

/** The scalar timestamptz columns of each table, the values whose rendering the server changes. */
const timeColumns = new WeakMap<TableModel, readonly string[]>();

/** The payload a pushed row's values become on the server, as far as the client can tell. */
function serverPayload(table: TableModel, payload: Readonly<Record<string, unknown>>): Record<string, unknown> {
  let columns = timeColumns.get(table);
  if (columns === undefined) {
    columns = table.columns.filter((c) => c.category === 'timestamptz' && c.shape === 'scalar').map((c) => c.name);
    timeColumns.set(table, columns);
  }
  let out: Record<string, unknown> | null = null;
  for (const name of columns) {
    const value = payload[name];
    if (typeof value !== 'string') continue;
    const rendered = serverTimestamptz(value);
    if (rendered === value) continue;
    out ??= { ...payload };
    out[name] = rendered;
  }
  return out ?? (payload as Record<string, unknown>);
}

/**
 * The committed rows in the order the commit writes them (sync.push_commit): tables parents first;
 * in each, the upsert's rows that updated a row, then those that inserted one (its statement's
 * transition tables fire in that order), each in bundle order; then the deletes, children first,
 * each table's in key order (the key index's order for uuid keys).
 */
function commitOrder(rows: readonly OutboxRow[]): OutboxRow[] {
  const groups = new Map<number, OutboxRow[]>();
  for (const row of rows) {
    const op = row.wire.op;
    const rank = op === 'DELETE' ? 1e9 - row.table.order : row.table.order * 2 + (op === 'UPDATE' ? 0 : 1);
    let group = groups.get(rank);
    if (!group) groups.set(rank, (group = []));
    group.push(row);
  }
  const out: OutboxRow[] = [];
  for (const rank of [...groups.keys()].sort((a, b) => a - b)) {
    const group = groups.get(rank) as OutboxRow[];
    if (group[0]?.wire.op === 'DELETE') group.sort((a, b) => (a.keyWire < b.keyWire ? -1 : a.keyWire > b.keyWire ? 1 : 0));
    for (const row of group) out.push(row);
  }
  return out;
}

/**
 * The committed rows of `bundle`, predicted from its pushed `rows`, when their hash is the one
 * the server answered; null otherwise (the caller reads them back).
 */
export async function predictCommittedRows(rows: readonly OutboxRow[], bundle: CommittedSummary): Promise<CommittedRow[] | null> {
  // A delete of a row the server never kept, or a row a trigger or cascade added, changes the count.
  if (rows.length !== bundle.row_count || rows.length === 0) return null;
  const predicted: CommittedRow[] = commitOrder(rows).map(({ table, wire }) => ({
    schema: wire.schema,
    table: wire.table,
    key: wire.key,
    op: wire.op,
    row_version: bundle.bundle_seq,
    payload: wire.op === 'DELETE' || wire.payload === null ? null : serverPayload(table, wire.payload),
  }));
  let text: string;
  try {
    text = canonicalCommittedText(predicted);
  } catch {
    return null;
  }
  return (await sha256Hex(text)) === bundle.bundle_hash ? predicted : null;
}
