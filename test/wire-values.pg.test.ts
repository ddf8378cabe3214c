/**
 * Issue 15 item 1 (server side, protocol §4.2): every value PostgreSQL stores round-trips exactly
 * through push, committed rows, pull and snapshot — the time infinities, BC and five-digit years of
 * timestamptz, timestamp and date, numeric and double NaN and infinities, arrays as JSON arrays of
 * their elements' wire forms — and values the server writes itself render the same way. A JSON
 * number beyond the double range is 400 invalid_request and stores nothing, never a silent NULL
 * (a finite number a column cannot hold stays PostgreSQL's to refuse: 422 push_rejected).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { defaultLimits } from '../core/limits.js';
import { sql } from '../core/db/index.js';
import { startTestServer, signToken, type TestServer } from './support/server.js';
import { committedRows, expectStatus, initEmpty, pushOk, type PushRow } from './support/write-helpers.js';
import { pullAll, snapshotAll } from './support/read-helpers.js';
import { renderBothWays } from './support/plans.js';

const SCHEMA = `
CREATE SCHEMA v;
CREATE TABLE v.vals (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  tz timestamptz, ts timestamp, d date, n numeric, f double precision, r real, b bigint,
  tza timestamptz[], tsa timestamp[], da date[], na numeric[], ba bytea[], fa double precision[], ia integer[], ta text[],
  ba2 bytea[], tza2 timestamptz[],
  PRIMARY KEY (_sync_scope_id, id)
);
`;

/** Each case: the wire payload pushed, which is also exactly what every read must render. */
const CASES: Record<string, Record<string, unknown>> = {
  infinite: { tz: 'infinity', ts: 'infinity', d: 'infinity', n: 'NaN', f: 'NaN', r: 'Infinity', b: '9223372036854775807' },
  negative: { tz: '-infinity', ts: '-infinity', d: '-infinity', n: 'Infinity', f: '-Infinity', r: '-Infinity', b: '-9223372036854775808' },
  bc: { tz: '-0043-03-15T12:00:00.000000Z', ts: '-0043-03-15T12:00:00.5', d: '-0043-03-15', n: '-Infinity', f: 1.5, r: 0.25 },
  'year zero': { tz: '0000-12-31T23:59:59.999999Z', ts: '0000-01-01T00:00:00', d: '0000-02-29' },
  'earliest and latest': { tz: '-4713-11-24T00:00:00.000000Z', ts: '+294276-12-31T23:59:59.999999', d: '+5874897-12-31' },
  'five-digit year': { tz: '+10000-01-01T00:00:00.000000Z', ts: '+10000-06-01T12:00:00', d: '+10000-01-01' },
  ordinary: { tz: '2026-11-23T10:00:00.123456Z', ts: '2026-11-23T10:00:00.123', d: '2026-11-23', n: '123456789012345678901234567890.000000000000001', f: 0.1, r: 3.5, b: '42' },
  arrays: {
    tza: ['infinity', '-0043-03-15T12:00:00.000000Z', null, '2026-11-23T10:00:00.000000Z'],
    tsa: ['-infinity', '-0099-01-01T00:00:00'], da: ['infinity', '-0043-03-15', '2026-11-23'],
    na: ['NaN', '1.50', '-Infinity', '123456789012345678901234567890', null], ba: ['AAEC/w==', null, ''],
    fa: ['NaN', 'Infinity', 1e308, -0.5, null], ia: [1, null, -3], ta: ['a', null, '"quoted"'],
    ba2: [['AQ==', 'Ag=='], ['Aw==', null]], tza2: [['infinity', '0001-01-01T00:00:00.000000Z'], ['-0001-06-01T00:00:00.000000Z', null]],
  },
  empty: { tza: [], na: [], ba: [], ia: [] },
};

/** What PostgreSQL holds for some of the cases, read back as PostgreSQL text. */
const STORED: Record<string, Record<string, string>> = {
  infinite: { tz: 'infinity', ts: 'infinity', d: 'infinity', n: 'NaN', f: 'NaN', r: 'Infinity' },
  bc: { tz: '0044-03-15 12:00:00+00 BC', ts: '0044-03-15 12:00:00.5 BC', d: '0044-03-15 BC' },
  'year zero': { tz: '0001-12-31 23:59:59.999999+00 BC', d: '0001-02-29 BC' },
  'five-digit year': { tz: '10000-01-01 00:00:00+00', d: '10000-01-01' },
  arrays: { ba: '{"\\\\x000102ff",NULL,"\\\\x"}', ba2: '{{"\\\\x01","\\\\x02"},{"\\\\x03",NULL}}' },
};

const row = (id: string, payload: Record<string, unknown>, base = 0): PushRow => ({
  schema: 'v', table: 'vals', key: { id }, op: base === 0 ? 'INSERT' : 'UPDATE', base_row_version: base, payload: { id, ...payload },
});

describe('wire values round-trip exactly (protocol §4.2)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA, tables: parseTables('v.vals:id') });
  });
  afterAll(async () => s?.close());

  it('through push, committed rows, pull and snapshot, and PostgreSQL holds the exact value', async () => {
    const c = s.client('values');
    await initEmpty(c);
    const rows = Object.entries(CASES).map(([id, payload]) => row(id, payload));
    const commit = await pushOk(c, rows, { sourceBundleId: 1 });

    const expected = new Map(rows.map((r) => [r.key['id'], r.payload]));
    const check = (source: string, got: { key: { id: string }; payload: Record<string, unknown> }[]): void => {
      expect(got.length, source).toBe(rows.length);
      for (const r of got) {
        const want = expected.get(r.key.id) as Record<string, unknown>;
        for (const [column, value] of Object.entries(want)) expect(r.payload[column], `${source}: ${r.key.id}.${column}`).toEqual(value);
      }
    };
    check('committed rows', (await committedRows(c, commit.bundle_seq)).rows as never);
    // pullAll also checks every bundle_hash against the rows as received.
    const pulled = await pullAll(s.url, c, 0);
    check('pull', pulled.bundles.flatMap((b) => b.rows));
    check('snapshot', (await snapshotAll(s.url, c)).rows);

    for (const [id, columns] of Object.entries(STORED)) {
      const names = Object.keys(columns);
      const { rows: [stored] } = await s.t.exec(`SELECT ${names.map((n) => `${n}::text AS ${n}`).join(', ')} FROM v.vals WHERE _sync_scope_id = 'values' AND id = $1`, [id]);
      expect(stored, id).toEqual(columns);
    }
  });

  it('an update written back in its wire form changes nothing (the wire form is the value)', async () => {
    const c = s.client('values');
    const { rows: before } = await s.t.exec(`SELECT id, x::text AS t FROM v.vals x WHERE _sync_scope_id = 'values' ORDER BY id`);
    const snapshot = await snapshotAll(s.url, c);
    const rows = snapshot.rows.map((r) => row(r.key.id, r.payload, r.row_version));
    await pushOk(c, rows, { sourceBundleId: 2 });
    const { rows: after } = await s.t.exec(`SELECT id, x::text AS t FROM v.vals x WHERE _sync_scope_id = 'values' ORDER BY id`);
    expect(after).toEqual(before);
  });

  it('values the server writes itself render the same way', async () => {
    const c = s.client('server-values');
    await initEmpty(c);
    await serverWrite(s.t.db, { userId: 'server-values', sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO v.vals (id, _sync_scope_id, tz, d, f, na, tza)
        VALUES ('s', ${scope}, '0044-03-15 12:00:00+00 BC', 'infinity', 'NaN', '{NaN,1e20}', '{-infinity}')`);
    });
    const { bundles } = await pullAll(s.url, c, 0);
    expect(bundles[0].rows[0].payload).toMatchObject({ tz: '-0043-03-15T12:00:00.000000Z', d: 'infinity', f: 'NaN', na: ['NaN', '100000000000000000000'], tza: ['-infinity'] });
  });

  it('a JSON number beyond the double range is 400 invalid_request, in any column or array, and stores nothing', async () => {
    const c = s.client('huge');
    await initEmpty(c);
    const token = await signToken('huge');
    const create = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(create, 200);
    for (const [column, literal] of [['f', '1e400'], ['n', '-1e400'], ['r', '1e400'], ['ia', '[1, 1e400]'], ['b', '1e400'], ['fa', '["NaN", -1e999]']]) {
      const body = `{"start_row_ordinal":0,"rows":[{"schema":"v","table":"vals","key":{"id":"x"},"op":"INSERT","base_row_version":0,"payload":{"id":"x","${column}":${literal}}}]}`;
      const res = await fetch(`${s.url}/sync/push-sessions/${create.body.push_id}/chunks`, {
        method: 'POST', body, headers: { authorization: `Bearer ${token}`, 'sync-source-id': c.sourceId, 'content-type': 'application/json' },
      });
      const answer = (await res.json()) as { error: string; details: { path: string }[] };
      expect(res.status, `${column}: ${JSON.stringify(answer)}`).toBe(400);
      expect(answer.error).toBe('invalid_request');
      expect(answer.details[0]?.path).toBe(`payload.${column}`);
    }
    const { rows: [staged] } = await s.t.exec(`SELECT count(*)::int AS n FROM sync.push_session_rows WHERE push_id = $1`, [create.body.push_id]);
    expect(staged.n).toBe(0);
  });

  it('renders a snapshot of every case in parallel where the planner finds it worth it, the same chunks as serially', async () => {
    // Fails if a function that renders a value (time values, arrays of them, bytea arrays, the
    // nesting of arrays) is not PARALLEL SAFE: the whole render then runs serially.
    const user = 'values-parallel';
    const c = s.client(user);
    await initEmpty(c);
    await pushOk(c, Object.entries(CASES).map(([id, payload]) => row(id, payload)), { sourceBundleId: 1 });
    // Enough rows for a parallel plan: each case 200 times.
    await serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser }, (tx, scope) =>
      tx.query(sql`INSERT INTO v.vals (id, _sync_scope_id, tz, ts, d, n, f, r, b, tza, tsa, da, na, ba, fa, ia, ta, ba2, tza2)
        SELECT v.id || ' ' || g, v._sync_scope_id, tz, ts, d, n, f, r, b, tza, tsa, da, na, ba, fa, ia, ta, ba2, tza2
          FROM v.vals v CROSS JOIN generate_series(1, 200) g WHERE v._sync_scope_id = ${scope}`));
    const { parallel, serial, nodes, settingsKept } = await renderBothWays(s.t.url, user, 2);
    const gather = nodes.find((n) => n['Node Type'] === 'Gather Merge');
    expect(gather?.['Workers Planned'] ?? 0, JSON.stringify(nodes.map((n) => n['Node Type']))).toBeGreaterThanOrEqual(1);
    expect(parallel.reduce((sum, chunk) => sum + chunk.row_count, 0)).toBe(Object.keys(CASES).length * 201);
    expect(parallel).toEqual(serial);
    expect(settingsKept).toBe(true);
  });
});
