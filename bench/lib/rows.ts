/** Row generators and the client-side request hash (RFC 8785 + SHA-256, docs/protocol.md §4.3). */
import { createHash, randomUUID } from 'node:crypto';
import canonicalize from 'canonicalize';

/** A typical row: about 200 bytes of JSON payload. */
export interface Note {
  readonly id: string;
  readonly title: string;
  readonly body: string;
  readonly position: number;
  readonly done: boolean;
  readonly updated_at: string;
}

export interface PushRow {
  readonly schema: 'bench';
  readonly table: 'notes';
  readonly key: { readonly id: string };
  readonly op: 'INSERT' | 'UPDATE' | 'DELETE';
  readonly base_row_version: number;
  readonly payload: Note | null;
}

const WORDS = ['sync', 'offline', 'bundle', 'ledger', 'harbor', 'quartz', 'meadow', 'signal', 'copper', 'lantern', 'orbit', 'pepper'];

function words(seed: number, count: number): string {
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(WORDS[(seed * 7 + i * 13) % WORDS.length] as string);
  return out.join(' ');
}

export function makeNotes(count: number, seed = 0): Note[] {
  const base = Date.UTC(2026, 0, 1);
  return Array.from({ length: count }, (_, i) => ({
    id: randomUUID(),
    title: `Note ${seed}-${i}: ${words(i, 3)}`,
    body: `${words(i + seed, 9)} #${i}`,
    position: i,
    done: i % 3 === 0,
    updated_at: new Date(base + i * 1000).toISOString(),
  }));
}

export function insertRows(notes: readonly Note[]): PushRow[] {
  return notes.map((n) => ({ schema: 'bench', table: 'notes', key: { id: n.id }, op: 'INSERT', base_row_version: 0, payload: n }));
}

/** Mean JSON size of the rows' payloads, to show they are typical (~200 bytes). */
export function meanPayloadBytes(notes: readonly Note[]): number {
  let total = 0;
  for (const n of notes) total += Buffer.byteLength(JSON.stringify(n));
  return total / Math.max(1, notes.length);
}

export function requestHash(rows: readonly PushRow[]): string {
  const shaped = rows.map((r) => ({ schema: r.schema, table: r.table, key: r.key, op: r.op, base_row_version: r.base_row_version, payload: r.op === 'DELETE' ? null : r.payload }));
  return createHash('sha256').update(canonicalize(shaped) as string, 'utf8').digest('hex');
}
