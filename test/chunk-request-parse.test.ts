/**
 * A chunk's body is checked without zod when it can be (parseChunkRequest): the written-out
 * checks must accept exactly what ChunkRequest accepts, answer what it would answer, and leave
 * every other body to the schema so its errors read the same.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChunkRequest, parseChunkRequest } from '../core/protocol/push-session.js';
import { isPushedRow, PushedRow } from '../core/protocol/rows.js';

const SEED = 20261126;

const row = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  schema: 'app', table: 'notes', key: { id: 'a1' }, op: 'INSERT', base_row_version: 0, payload: { id: 'a1', title: 't' }, ...over,
});

type Outcome = { ok: true; value: unknown } | { ok: false; message: string };

function outcome(parse: (v: unknown) => unknown, value: unknown): Outcome {
  try {
    return { ok: true, value: parse(value) };
  } catch (error) {
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}

/** Values that sit on each edge of each check, and beside them. */
const edgy = fc.constantFrom<unknown>(
  undefined, null, 0, -0, 1, -1, 1.5, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 1, '', 'x', 'x'.repeat(63), 'x'.repeat(64),
  'y'.repeat(4096), 'y'.repeat(4097), 'INSERT', 'UPDATE', 'DELETE', 'insert', [], [1], {}, { id: 'a' }, { id: 1 }, { id: 'a', b: 'c' },
  { ['x'.repeat(63)]: 'a' }, { ['x'.repeat(64)]: 'a' }, { '': 'a' }, { id: 'y'.repeat(4096) }, { id: 'y'.repeat(4097) }, true, Object.create(null) as unknown, JSON.parse('{"__proto__": {"id": "a"}}') as unknown,
);

/** A row with one field set to an edge value, or removed, or one field added. */
const mutatedRow = fc.oneof(
  fc.record({ field: fc.constantFrom('schema', 'table', 'key', 'op', 'base_row_version', 'payload', 'extra'), value: edgy })
    .map(({ field, value }) => row({ [field]: value })),
  fc.constantFrom('schema', 'table', 'key', 'op', 'base_row_version', 'payload').map((field) => {
    const r = row();
    delete r[field];
    return r;
  }),
  fc.constant(row({ op: 'DELETE', payload: null })),
  fc.constant(row()),
);

describe('chunk request parsing', () => {
  it('a well-formed chunk is accepted as it is, without a copy', () => {
    const body = { start_row_ordinal: 1000, rows: [row(), row({ op: 'DELETE', payload: null }), row({ op: 'UPDATE', base_row_version: 7 })] };
    expect(parseChunkRequest(body)).toBe(body);
    expect(ChunkRequest.parse(body)).toEqual(body);
  });

  it('the written-out row check accepts exactly the rows PushedRow accepts', () => {
    fc.assert(fc.property(mutatedRow, (r) => {
      expect(isPushedRow(r)).toBe(PushedRow.safeParse(r).success);
    }), { seed: SEED, numRuns: 600 });
  });

  it('answers what ChunkRequest.parse answers, the same value or the same error', () => {
    const body = fc.record({
      start_row_ordinal: fc.oneof(edgy, fc.nat()),
      rows: fc.oneof(fc.array(mutatedRow, { maxLength: 4 }), edgy),
    }, { requiredKeys: [] });
    const withExtra = fc.oneof(body, body.map((b) => ({ ...b, extra: 1 })), edgy);
    fc.assert(fc.property(withExtra, (value) => {
      expect(outcome(parseChunkRequest, value)).toEqual(outcome((v) => ChunkRequest.parse(v), value));
    }), { seed: SEED, numRuns: 600 });
  });
});
