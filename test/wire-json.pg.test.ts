/**
 * Issue 23 items 1–2 at the HTTP level (protocol 2, docs/protocol.md §4.2, §9): with
 * `Sync-Protocol-Version: 2` a json or jsonb value travels as a JSON string holding its text, so
 * every digit survives (integers beyond 2^53, 1e400, long decimals) and JSON null differs from SQL
 * NULL, through push, committed rows, pull, snapshot, conflicts and server writes; hashes are over
 * the form the client speaks. A client that does not ask for protocol 2 keeps getting protocol 1's
 * answers (the value itself), hashed as before. Before the fix json values were the JSON value
 * itself on every path: the strings below came back as JSON strings of strings, or not at all.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { defaultLimits, limitsFromEnv } from '../core/limits.js';
import { pageBudgetBytes, rowWireBytesMax } from '../core/sync/context.js';
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { bundleHash, committedRows, expectStatus, initEmpty, push, pushOk, requestHash, type PushRow } from './support/write-helpers.js';
import { rawGet } from './support/read-helpers.js';

const SCHEMA = `
CREATE SCHEMA j;
CREATE TABLE j.docs (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  jb jsonb,
  js json,
  note text,
  PRIMARY KEY (_sync_scope_id, id)
);
`;

/** Each case: the JSON text written into jb and js (null: SQL NULL). */
const CASES: Record<string, string | null> = {
  big: '{"n": 12345678901234567890123, "m": -98765432109876543210}',
  decimals: '[0.1000000000000000055511151231257827, 1e400, -0, 1E-7, 1.50, 123456789012345678901234567890.123456789012345678901234567890]',
  'json null': 'null',
  'sql null': null,
  string: '"just text"',
  'nested nulls': '[[null, [null, []]], {"a": null, "b": [null]}]',
  unicode: '{"e": "👸 é \\u00e9 \\ud83d\\ude00", "q": "\\"quoted\\" \\\\ back"}',
  spaced: '  { "b" : 1 ,  "a" : [ 2 , 3 ] }  ',
  empty: '{}',
  number: '-0.000000000000000000000000000001',
};

/** A client that speaks protocol 2: every request carries the header. */
function speaking2(c: ApiClient): ApiClient {
  const wrapped: ApiClient = {
    userId: c.userId,
    get sourceId() {
      return c.sourceId;
    },
    set sourceId(value: string) {
      c.sourceId = value;
    },
    request: (method, path, body, headers = {}) => c.request(method, path, body, { 'sync-protocol-version': '2', ...headers }),
    get: (path) => wrapped.request('GET', path),
    post: (path, body) => wrapped.request('POST', path, body ?? {}),
    del: (path) => wrapped.request('DELETE', path),
  };
  return wrapped;
}

const row = (id: string, text: string | null, base = 0): PushRow => ({
  schema: 'j', table: 'docs', key: { id }, op: base === 0 ? 'INSERT' : 'UPDATE', base_row_version: base, payload: { id, jb: text, js: text, note: id },
});

async function pullAll(c: ApiClient, after = 0): Promise<any[]> {
  const bundles: any[] = [];
  let cursor = after;
  for (;;) {
    const page = await c.get(`/sync/pull?after_bundle_seq=${cursor}`);
    expectStatus(page, 200);
    for (const b of page.body.bundles) {
      if (b.rows_omitted) b.rows = (await committedRows(c, b.bundle_seq)).rows;
      bundles.push(b);
      cursor = b.bundle_seq;
    }
    if (!page.body.has_more) return bundles;
  }
}

async function snapshotRows(c: ApiClient): Promise<any[]> {
  const created = await c.post('/sync/snapshot-sessions', {});
  expectStatus(created, 200);
  const rows: any[] = [];
  let after = 0;
  for (;;) {
    const page = await c.get(`/sync/snapshot-sessions/${created.body.snapshot_id}?after_row_ordinal=${after}`);
    expectStatus(page, 200);
    rows.push(...page.body.rows);
    after = page.body.next_row_ordinal;
    if (!page.body.has_more) return rows;
  }
}

describe('json and jsonb travel as their text in protocol 2 (docs/protocol.md §4.2)', () => {
  let s: TestServer;
  /** What PostgreSQL holds for each case: jsonb's rendering, json's text, each null when SQL NULL. */
  let stored: Map<string, { jb: string | null; js: string | null }>;
  let seq: number;

  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA, tables: parseTables('j.docs:id') });
  });
  afterAll(async () => s?.close());

  const holds = async (user: string): Promise<Map<string, { jb: string | null; js: string | null }>> => {
    const { rows } = await s.t.exec(`SELECT id, jb::text AS jb, js::text AS js FROM j.docs WHERE _sync_scope_id = $1`, [user]);
    return new Map(rows.map((r) => [r.id as string, { jb: r.jb as string | null, js: r.js as string | null }]));
  };

  it('capabilities announce protocol 2 and the oldest still served; answers name their protocol', async () => {
    const c = s.client('caps');
    const caps = await c.get('/sync/capabilities');
    expectStatus(caps, 200);
    expect(caps.body).toMatchObject({ protocol_version: 2, min_protocol_version: 1 });
    expect(caps.headers.get('sync-protocol-version')).toBe('1');
    expect((await speaking2(c).get('/sync/capabilities')).headers.get('sync-protocol-version')).toBe('2');
    const bad = await c.request('GET', '/sync/capabilities', undefined, { 'sync-protocol-version': '3' });
    expectStatus(bad, 400, 'invalid_request');
  });

  it('push in protocol 2: PostgreSQL holds every digit, and JSON null apart from SQL NULL', async () => {
    const c = speaking2(s.client('two'));
    await initEmpty(c);
    const rows = Object.entries(CASES).map(([id, text]) => row(id, text));
    // The request hash is over the rows as sent: json values are strings.
    const commit = await pushOk(c, rows, { sourceBundleId: 1 });
    seq = commit.bundle_seq;
    stored = await holds('two');
    const { rows: [nulls] } = await s.t.exec(`SELECT (SELECT jb IS NULL FROM j.docs WHERE _sync_scope_id = 'two' AND id = 'sql null') AS sql_null,
        (SELECT jb = 'null'::jsonb AND js::text = 'null' FROM j.docs WHERE _sync_scope_id = 'two' AND id = 'json null') AS json_null,
        (SELECT jb = '{"n": 12345678901234567890123, "m": -98765432109876543210}'::jsonb FROM j.docs WHERE _sync_scope_id = 'two' AND id = 'big') AS big,
        (SELECT jb->1 = '1e400'::jsonb FROM j.docs WHERE _sync_scope_id = 'two' AND id = 'decimals') AS huge`);
    expect(nulls).toEqual({ sql_null: true, json_null: true, big: true, huge: true });
    // json keeps its text as written, spaces and all.
    for (const [id, text] of Object.entries(CASES)) expect(stored.get(id)?.js, id).toBe(text);
  });

  it('committed rows, pull and snapshot answer each value as PostgreSQL holds it, hashed in protocol 2', async () => {
    const c = speaking2(s.client('two'));
    const check = (source: string, got: any[]): void => {
      expect(got.length, source).toBe(Object.keys(CASES).length);
      for (const r of got) {
        const want = stored.get(r.key.id);
        expect(r.payload, `${source}: ${r.key.id}`).toEqual({ id: r.key.id, jb: want?.jb, js: want?.js, note: r.key.id });
      }
    };
    const replay = await committedRows(c, seq);
    check('committed rows', replay.rows);
    expect(bundleHash(replay.rows)).toBe(replay.pages[0].bundle_hash);
    const bundles = await pullAll(c);
    check('pull', bundles[0].rows);
    expect(bundleHash(bundles[0].rows)).toBe(bundles[0].bundle_hash);
    expect(bundles[0].bundle_hash).toBe(replay.pages[0].bundle_hash);
    check('snapshot', await snapshotRows(c));
    // What protocol 1 could not carry is exact here: every digit of every number.
    expect(stored.get('big')?.jb).toContain('12345678901234567890123');
    expect(stored.get('decimals')?.jb).toContain('0.1000000000000000055511151231257827');
  });

  it('a client that does not ask for protocol 2 gets protocol 1 answers: the values themselves, hashed over that form', async () => {
    const c = s.client('two');
    const expected = (id: string): unknown => {
      const text = stored.get(id)?.jb;
      return text === null || text === undefined ? null : JSON.parse(text);
    };
    const check = (source: string, got: any[]): void => {
      for (const r of got) expect(r.payload.jb, `${source}: ${r.key.id}`).toEqual(expected(r.key.id));
    };
    const replay = await committedRows(c, seq);
    check('committed rows', replay.rows);
    const bundles = await pullAll(c);
    check('pull', bundles[0].rows);
    check('snapshot', await snapshotRows(c));
    // Protocol 1 cannot tell them apart: both nulls are null.
    expect(replay.rows.find((r) => r.key['id'] === 'json null')?.payload?.['jb']).toBeNull();
    // Its hash is its own, and differs from protocol 2's (the rows differ).
    const v2 = (await committedRows(speaking2(c), seq)).pages[0].bundle_hash;
    expect(bundles[0].bundle_hash).toBe(replay.pages[0].bundle_hash);
    expect(bundles[0].bundle_hash).not.toBe(v2);
    // The rows without a number beyond the double range hash as protocol 1 clients compute it.
    const plain = await pushOk(c, [{ schema: 'j', table: 'docs', key: { id: 'p1' }, op: 'INSERT', base_row_version: 0, payload: { id: 'p1', jb: { a: [1, null, 'x'] }, js: null } }], { sourceBundleId: 2 });
    const plainRows = (await committedRows(c, plain.bundle_seq)).rows;
    expect(plainRows[0]?.payload).toMatchObject({ jb: { a: [1, null, 'x'] }, js: null });
    expect(bundleHash(plainRows)).toBe(plain.bundle_hash);
    // ... and a protocol 2 reader sees the same row as text, with its own hash.
    const asText = (await committedRows(speaking2(c), plain.bundle_seq));
    expect(asText.rows[0]?.payload).toMatchObject({ jb: '{"a": [1, null, "x"]}', js: null });
    expect(bundleHash(asText.rows)).toBe(asText.pages[0].bundle_hash);
  });

  it('refuses a protocol 2 json value that is not JSON text PostgreSQL can hold: 400 naming the row and column, nothing staged', async () => {
    const c = speaking2(s.client('bad'));
    await initEmpty(c);
    const create = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(create, 200);
    const cases: [string, unknown][] = [
      ['not JSON text', '{a: 1}'],
      ['a value instead of its text (protocol 1 form)', { a: 1 }],
      ['a number instead of its text', 5],
      ['NUL escaped inside', '["a\\u0000b"]'],
      ['NUL as a key', '{"\\u0000": 1}'],
      ['a lone surrogate escaped', '"\\ud800"'],
      ['a raw lone surrogate', '"\ud800"'],
      ['nested too deep', '['.repeat(defaultLimits.maxJsonDepth + 1) + ']'.repeat(defaultLimits.maxJsonDepth + 1)],
    ];
    for (const [why, value] of cases) {
      const answer = await c.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [{ ...row('x', null), payload: { id: 'x', jb: value } }] });
      expectStatus(answer, 400, 'invalid_request');
      expect(answer.body.details?.[0], why).toMatchObject({ row_ordinal: 0, path: 'payload.jb' });
    }
    // A chunk in another protocol than its session's is refused too.
    const mixed = await s.client('bad').post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [row('x', null)] });
    expectStatus(mixed, 400, 'invalid_request');
    expect(mixed.body.message).toMatch(/Sync-Protocol-Version 2/);
    const { rows: [n] } = await s.t.exec(`SELECT count(*)::int AS n FROM sync.push_session_rows WHERE push_id = $1`, [create.body.push_id]);
    expect(n.n).toBe(0);
  });

  it('a conflict carries the server row in the form the client speaks', async () => {
    const writer = speaking2(s.client('conflicts', 'conflicts-a'));
    await initEmpty(writer);
    await pushOk(writer, [row('c', '{"n": 12345678901234567890123}')], { sourceBundleId: 1 });
    const late2 = await push(speaking2(s.client('conflicts', 'conflicts-b')), [row('c', '"mine"')], { sourceBundleId: 1 });
    expectStatus(late2, 409, 'push_conflict');
    expect(late2.body.conflict.server_row).toMatchObject({ jb: '{"n": 12345678901234567890123}', js: '{"n": 12345678901234567890123}' });
    const late1 = await push(s.client('conflicts', 'conflicts-c'), [{ ...row('c', null), payload: { id: 'c', jb: 'mine' } }], { sourceBundleId: 1 });
    expectStatus(late1, 409, 'push_conflict');
    // eslint-disable-next-line no-loss-of-precision -- protocol 1's value, as its clients parse it: a double
    expect(late1.body.conflict.server_row.jb).toEqual({ n: 12345678901234567890123 });
  });

  it('a protocol 1 push still commits, its request hash over the form it sent; protocol 2 readers see the text', async () => {
    const c = s.client('one');
    await initEmpty(c);
    const rows: PushRow[] = [
      { schema: 'j', table: 'docs', key: { id: 'o' }, op: 'INSERT', base_row_version: 0, payload: { id: 'o', jb: { x: [1.5, 'y', null] }, js: 'a string' } },
      { schema: 'j', table: 'docs', key: { id: 'n' }, op: 'INSERT', base_row_version: 0, payload: { id: 'n', jb: null, js: 7 } },
    ];
    const commit = await pushOk(c, rows, { sourceBundleId: 1, requestHash: requestHash(rows) });
    expect((await holds('one')).get('o')).toEqual({ jb: '{"x": [1.5, "y", null]}', js: '"a string"' });
    const asText = await committedRows(speaking2(c), commit.bundle_seq);
    expect(asText.rows.map((r) => r.payload)).toEqual([
      { id: 'o', jb: '{"x": [1.5, "y", null]}', js: '"a string"', note: null },
      { id: 'n', jb: null, js: '7', note: null },
    ]);
    // The same bundle again under its id: recognised by the hash of the protocol 1 rows.
    const again = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 2, request_hash: requestHash(rows) });
    expect(again.body).toMatchObject({ status: 'already_committed', bundle_seq: commit.bundle_seq, bundle_hash: commit.bundle_hash });
  });

  it('values the server writes itself, JSON null and SQL NULL included, reach protocol 2 readers exactly', async () => {
    const c = speaking2(s.client('server-json'));
    await initEmpty(c);
    const written = await serverWrite(s.t.db, { userId: 'server-json', sourceId: 'server:test', retainedBundlesPerUser: defaultLimits.retainedBundlesPerUser }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO j.docs (id, _sync_scope_id, jb, js) VALUES
        ('jn', ${scope}, 'null', 'null'), ('sn', ${scope}, NULL, NULL), ('big', ${scope}, '[1e400, 12345678901234567890123]', ' [1e400] ')`);
    });
    expect(written.bundle).not.toHaveProperty('bundle_hash_v2');
    const bundles = await pullAll(c);
    const byId = new Map(bundles[0].rows.map((r: any) => [r.key.id, r.payload]));
    expect(byId.get('jn')).toMatchObject({ jb: 'null', js: 'null' });
    expect(byId.get('sn')).toMatchObject({ jb: null, js: null });
    expect(byId.get('big')).toMatchObject({ js: ' [1e400] ' });
    expect(JSON.stringify(byId.get('big'))).toContain('12345678901234567890123');
    expect(bundleHash(bundles[0].rows)).toBe(bundles[0].bundle_hash);
    // A protocol 1 reader of the same bundle gets values (a number beyond the double range as the
    // digits PostgreSQL holds), and no read fails.
    const one = await committedRows(s.client('server-json'), bundles[0].bundle_seq);
    expect(one.rows.find((r) => r.key['id'] === 'jn')?.payload).toMatchObject({ jb: null, js: null });
  });

  it('a snapshot session keeps the form it was created in: another protocol is told to start a new one', async () => {
    const c = s.client('two');
    const created = await c.post('/sync/snapshot-sessions', {});
    expectStatus(created, 200);
    const other = await speaking2(c).get(`/sync/snapshot-sessions/${created.body.snapshot_id}`);
    expectStatus(other, 410, 'snapshot_session_expired');
    expect(other.body.message).toMatch(/create a new one/);
    expectStatus(await c.get(`/sync/snapshot-sessions/${created.body.snapshot_id}`), 200);
  });

  it('bundles stored before protocol 2 (layout 13) are served to protocol 2 readers as text', async () => {
    const c = speaking2(s.client('legacy'));
    await initEmpty(c);
    const commit = await pushOk(c, [row('l', '{"k": [1, 2.5, "s"]}')], { sourceBundleId: 1 });
    // What layout 13 stored for this bundle: the payload with the jsonb value itself, its text
    // rendered from that, and protocol 1's hash only.
    await s.t.operator(`SELECT pg_advisory_xact_lock(7020140421);
      UPDATE sync.bundle_rows r SET payload = sync.json_payload_form(r.payload, '{jb,js}', 1::smallint), row_text = NULL, wire_bytes = NULL
        FROM sync.user_state u WHERE u.user_id = 'legacy' AND r.user_id = u.user_id AND r.bundle_seq = ${commit.bundle_seq};
      UPDATE sync.bundle_log l SET json_form = 1, bundle_hash_v2 = NULL, wire_bytes = NULL
        FROM sync.user_state u WHERE u.user_id = 'legacy' AND l.user_id = u.user_id AND l.bundle_seq = ${commit.bundle_seq}`);
    const bundles = await pullAll(c);
    expect(bundles[0].rows[0].payload).toMatchObject({ jb: '{"k": [1, 2.5, "s"]}', js: '{"k": [1, 2.5, "s"]}' });
    const one = await pullAll(s.client('legacy'));
    expect(one[0].rows[0].payload).toMatchObject({ jb: { k: [1, 2.5, 's'] } });
    expect(bundleHash(one[0].rows)).toBe(one[0].bundle_hash);
  });
});

describe('json text that grows when rendered stays within the byte budgets (docs/protocol.md §6)', () => {
  const maxResponseBytes = 64 * 1024;
  const limits = limitsFromEnv({ SYNC_LIMIT_MAX_RESPONSE_BYTES: String(maxResponseBytes) });
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA, tables: parseTables('j.docs:id'), env: { SYNC_LIMIT_MAX_RESPONSE_BYTES: String(maxResponseBytes) } });
  });
  afterAll(async () => s?.close());

  it('a protocol 1 reader of a json column whose numbers PostgreSQL writes out in full gets pages within the budget', async () => {
    // 20 bytes of json text, about 10 kB once its numbers are written out: what protocol 1 answers.
    const grows = `[${Array.from({ length: 10 }, () => '1e999').join(',')}]`;
    const c = speaking2(s.client('grows'));
    await initEmpty(c);
    const commit = await pushOk(c, Array.from({ length: 30 }, (_, i) => ({ ...row(`g${i}`, null), payload: { id: `g${i}`, js: grows } })), { sourceBundleId: 1 });
    const escaped = (text: string): number => Buffer.byteLength(JSON.stringify(text)) - 2;
    const one = s.client('grows');
    let after = 0;
    let rows = 0;
    let pages = 0;
    for (;;) {
      const page = await rawGet(s.url, one, `/sync/committed-bundles/${commit.bundle_seq}/rows?after_row_ordinal=${after}`);
      expect(page.status, page.text).toBe(200);
      expect(escaped(page.text)).toBeLessThanOrEqual(pageBudgetBytes(limits));
      rows += page.body.rows.length;
      pages++;
      after = page.body.next_row_ordinal;
      if (!page.body.has_more) break;
    }
    expect(rows).toBe(30);
    expect(pages).toBeGreaterThan(1);
    // Protocol 2 readers get the text itself: one small page.
    const text = await committedRows(c, commit.bundle_seq);
    expect(text.pages).toHaveLength(1);
    expect(text.rows[0]?.payload).toMatchObject({ js: grows });
  });

  it('a json value no answer could carry once rendered is refused at push: 413 naming row and column', async () => {
    const c = speaking2(s.client('too-large'));
    await initEmpty(c);
    const create = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    expect(rowWireBytesMax(limits)).toBeLessThan(131_072);
    const answer = await c.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [{ ...row('x', null), payload: { id: 'x', jb: '[1e131071]' } }] });
    expectStatus(answer, 413, 'payload_too_large');
    expect(answer.body.details?.[0]).toMatchObject({ row_ordinal: 0, path: 'payload.jb' });
  });
});
