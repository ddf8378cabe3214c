/**
 * The server side of the value-fidelity scenario (test/support/value-fidelity.ts): what PostgreSQL
 * must hold after device A's push, and what every device must then read. Node only.
 */
import { expect } from 'vitest';
import { type TestServer } from './server.js';
import { encodeValue, fidelityRows, UKEY, VAL_COLUMNS, type EncodedValue } from './value-fidelity.js';

/** What every device must hold: A's values, jsonb as PostgreSQL renders the value it holds. */
export async function expectedRows(s: TestServer, user: string): Promise<Record<string, EncodedValue>[]> {
  const { rows } = await s.t.exec(`SELECT id, jb::text AS jb FROM f.vals WHERE _sync_scope_id = $1`, [user]);
  const jb = new Map(rows.map((r) => [r.id as string, r.jb as string | null]));
  return Object.entries(fidelityRows())
    .map(([id, values]) => ({
      id: encodeValue(id),
      ...Object.fromEntries(VAL_COLUMNS.map((c) => [c, encodeValue(c === 'jb' ? jb.get(id) ?? null : values[c] ?? null)])),
    }))
    .sort((a, b) => ((a.id as { text: string }).text < (b.id as { text: string }).text ? -1 : 1));
}

/** PostgreSQL holds A's values: json's text byte for byte, jsonb's value, JSON null apart from SQL NULL. */
export async function expectServerHolds(s: TestServer, user: string): Promise<void> {
  for (const [id, values] of Object.entries(fidelityRows())) {
    const { rows: [row] } = await s.t.exec(
      `SELECT js::text AS js, jb IS NULL AS jb_null, CASE WHEN $3::text IS NULL THEN NULL ELSE jb = $3::jsonb END AS jb_same, t, n::text AS n, big::text AS big,
              encode(b, 'hex') AS b FROM f.vals WHERE _sync_scope_id = $1 AND id = $2`,
      [user, id, values.jb ?? null]);
    expect(row, id).toBeDefined();
    expect(row.js, `${id}.js`).toBe(values.js ?? null);
    expect(row.jb_null, `${id}.jb is SQL NULL`).toBe(values.jb === undefined);
    if (values.jb !== undefined) expect(row.jb_same, `${id}.jb holds the value written`).toBe(true);
    expect(row.t, `${id}.t`).toBe(values.t ?? null);
    expect(row.n, `${id}.n`).toBe(values.n ?? null);
    expect(row.big, `${id}.big`).toBe(values.big === undefined ? null : String(values.big));
    expect(row.b, `${id}.b`).toBe(values.b === undefined ? null : Buffer.from(values.b as Uint8Array).toString('hex'));
  }
  // Nothing refused at the write reached it.
  const { rows } = await s.t.exec(`SELECT id FROM f.vals WHERE _sync_scope_id = $1 AND id NOT IN (${Object.keys(fidelityRows()).map((_, i) => `$${i + 2}`).join(', ')})`, [user, ...Object.keys(fidelityRows())]);
  expect(rows).toEqual([]);
  expect((await s.t.exec(`SELECT id::text AS id FROM f.ukeys WHERE _sync_scope_id = $1`, [user])).rows).toEqual([{ id: UKEY }]);
}
