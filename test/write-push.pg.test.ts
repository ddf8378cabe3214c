/**
 * Issue 4 (write path): every code of push-session create, chunk upload, commit and delete, with
 * its HTTP status and body (docs/protocol.md §5.2, §7), plus the hashes recomputed on the client side.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import {
  bundleHash,
  committedRows,
  del,
  expectStatus,
  initEmpty,
  item,
  list,
  push,
  pushOk,
  requestHash,
  uuid,
  type PushRow,
} from './support/write-helpers.js';

describe('write path: push sessions', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  /** A fresh user with an initialized scope. */
  async function user(name: string, source = `${name}-dev`): Promise<ApiClient> {
    const c = s.client(name, source);
    await initEmpty(c);
    return c;
  }

  async function create(c: ApiClient, body: Record<string, unknown>) {
    return c.post('/sync/push-sessions', body);
  }

  it('create answers a staging session; chunks are contiguous; re-sending the last chunk is idempotent', async () => {
    const c = await user('p-chunks');
    const rows = Array.from({ length: 5 }, (_, i) => list(uuid(), `list ${i}`));
    const created = await create(c, { source_bundle_id: 1, planned_row_count: 5, request_hash: requestHash(rows) });
    expectStatus(created, 200);
    expect(created.body).toMatchObject({ status: 'staging', planned_row_count: 5, next_expected_row_ordinal: 0 });
    expect(created.body.push_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(created.body.expires_at) - Date.now()).toBeGreaterThan(800_000);
    const base = `/sync/push-sessions/${created.body.push_id}`;

    const first = await c.post(`${base}/chunks`, { start_row_ordinal: 0, rows: rows.slice(0, 2) });
    expectStatus(first, 200);
    expect(first.body).toEqual({ push_id: created.body.push_id, next_expected_row_ordinal: 2 });
    // The same chunk again: the same answer, nothing staged twice.
    const again = await c.post(`${base}/chunks`, { start_row_ordinal: 0, rows: rows.slice(0, 2) });
    expectStatus(again, 200);
    expect(again.body).toEqual(first.body);
    // A different chunk at the same ordinal is out of order, with the ordinal to resume at.
    const other = await c.post(`${base}/chunks`, { start_row_ordinal: 0, rows: rows.slice(1, 3) });
    expectStatus(other, 409, 'push_chunk_out_of_order');
    expect(other.body.next_expected_row_ordinal).toBe(2);
    // A gap is out of order.
    const gap = await c.post(`${base}/chunks`, { start_row_ordinal: 3, rows: rows.slice(3, 4) });
    expectStatus(gap, 409, 'push_chunk_out_of_order');
    expect(gap.body.next_expected_row_ordinal).toBe(2);
    // Commit before every planned row arrived: push_incomplete.
    const early = await c.post(`${base}/commit`);
    expectStatus(early, 409, 'push_incomplete');
    expect(early.body.next_expected_row_ordinal).toBe(2);

    const second = await c.post(`${base}/chunks`, { start_row_ordinal: 2, rows: rows.slice(2, 5) });
    expect(second.body).toEqual({ push_id: created.body.push_id, next_expected_row_ordinal: 5 });
    // Re-sending an older chunk once a later one was accepted is out of order.
    expectStatus(await c.post(`${base}/chunks`, { start_row_ordinal: 0, rows: rows.slice(0, 2) }), 409, 'push_chunk_out_of_order');
    // Rows beyond planned_row_count are refused.
    expectStatus(await c.post(`${base}/chunks`, { start_row_ordinal: 5, rows: [list(uuid(), 'extra')] }), 400, 'invalid_request');

    const commit = await c.post(`${base}/commit`);
    expectStatus(commit, 200);
    expect(commit.body).toMatchObject({ status: 'committed', bundle_seq: 1, source_id: 'p-chunks-dev', source_bundle_id: 1, row_count: 5 });
    // Committing again answers the same 200.
    const recommit = await c.post(`${base}/commit`);
    expectStatus(recommit, 200);
    expect(recommit.body).toEqual(commit.body);
    // The last chunk re-sent after commit still gets its answer (a lost chunk response retried).
    const late = await c.post(`${base}/chunks`, { start_row_ordinal: 2, rows: rows.slice(2, 5) });
    expectStatus(late, 200);
    expect(late.body.next_expected_row_ordinal).toBe(5);

    // Create for a committed tuple: already_committed with the bundle; another hash: mismatch.
    const dup = await create(c, { source_bundle_id: 1, planned_row_count: 5, request_hash: requestHash(rows) });
    expectStatus(dup, 200);
    expect(dup.body).toEqual({ ...commit.body, status: 'already_committed' });
    const mismatch = await create(c, { source_bundle_id: 1, planned_row_count: 5, request_hash: requestHash(rows.slice(1)) });
    expectStatus(mismatch, 409, 'push_request_mismatch');
    expect(mismatch.body.message).toMatch(/request_hash/);
  });

  it('invalid_request with details for every row problem', async () => {
    const c = await user('p-invalid');
    const created = await create(c, { source_bundle_id: 1, planned_row_count: 10 });
    const url = `/sync/push-sessions/${created.body.push_id}/chunks`;
    const id = uuid();
    const cases: Array<[string, PushRow | Record<string, unknown>, string]> = [
      ['unknown table', { schema: 'app', table: 'nope', key: { id }, op: 'INSERT', base_row_version: 0, payload: { id } }, 'table'],
      ['unknown column', list(id, 't', 0, { colour: 'red' }), 'payload.colour'],
      ['bad uuid key', { ...list(id, 't'), key: { id: 'not-a-uuid' } }, 'key.id'],
      ['uppercase uuid key', { ...list(id, 't'), key: { id: id.toUpperCase() }, payload: { title: 't' } }, 'key.id'],
      ['wrong key column', { ...list(id, 't'), key: { title: id } }, 'key.title'],
      ['payload key differs', { ...list(id, 't'), payload: { id: uuid(), title: 't' } }, 'payload.id'],
      ['hidden scope column', list(id, 't', 0, { _sync_scope_id: 'p-invalid' }), 'payload._sync_scope_id'],
      ['DELETE with payload', { ...del('lists', { id }, 1), payload: { title: 't' } }, 'payload'],
      ['bad base64', item(id, uuid(), 'b', 0, { attachment: 'not base64!' }), 'payload.attachment'],
      ['base64 of wrong length', item(id, uuid(), 'b', 0, { attachment: 'AAE' }), 'payload.attachment'],
      ['lossy bigint', { schema: 'app', table: 'kinds', key: { code: 'k' }, op: 'INSERT', base_row_version: 0, payload: { big: 2 ** 62 } }, 'payload.big'],
      ['NUL in text', list(id, 'a\u0000b'), 'payload.title'],
      ['NUL in a jsonb value', { schema: 'app', table: 'kinds', key: { code: 'k' }, op: 'INSERT', base_row_version: 0, payload: { meta: { a: ['\u0000'] } } }, 'payload.meta'],
      ['NUL in a text key', { schema: 'app', table: 'kinds', key: { code: 'k\u0000' }, op: 'INSERT', base_row_version: 0, payload: {} }, 'key.code'],
      // Keys live in btree indexes (business primary key, row_state), whose rows stop near 2.7 kB.
      ['a text key too long for an index', { schema: 'app', table: 'kinds', key: { code: randomBytes(3000).toString('base64') }, op: 'INSERT', base_row_version: 0, payload: {} }, 'key.code'],
      // 342 characters, 1,026 bytes of UTF-8: over max_key_bytes (1,024) by its bytes, not its length.
      ['a text key of three-byte characters over max_key_bytes', { schema: 'app', table: 'kinds', key: { code: '€'.repeat(342) }, op: 'INSERT', base_row_version: 0, payload: {} }, 'key.code'],
    ];
    for (const [what, row, path] of cases) {
      const answer = await c.post(url, { start_row_ordinal: 0, rows: [row] });
      expect(answer.status, `${what}: ${JSON.stringify(answer.body).slice(0, 300)}`).toBe(400);
      expect(answer.body.error, what).toBe('invalid_request');
      expect(answer.body.details, what).toEqual(expect.arrayContaining([expect.objectContaining({ row_ordinal: 0, path })]));
    }
    // Several problems are reported together, each with its ordinal; nothing was staged.
    const many = await c.post(url, { start_row_ordinal: 0, rows: [list(uuid(), 'fine'), list(id, 't', 0, { colour: 1 }), { ...list(id, 't'), key: { id: 'x' } }] });
    expectStatus(many, 400, 'invalid_request');
    expect([...new Set(many.body.details.map((d: any) => d.row_ordinal))]).toEqual([1, 2]);
    // A malformed body (wrong op, missing base_row_version) is invalid_request too.
    expectStatus(await c.post(url, { start_row_ordinal: 0, rows: [{ ...list(id, 't'), op: 'UPSERT' }] }), 400, 'invalid_request');
    expectStatus(await c.request('POST', url, '{"start_row_ordinal": 0, "rows": ['), 400, 'invalid_request');
    const fine = await c.post(url, { start_row_ordinal: 0, rows: [list(id, 't')] });
    expectStatus(fine, 200);
    expect(fine.body.next_expected_row_ordinal).toBe(1);
  });

  it('a key sent twice in one bundle is invalid_request, within a chunk or across chunks', async () => {
    const c = await user('p-twice');
    const id = uuid();
    const created = await create(c, { source_bundle_id: 1, planned_row_count: 3 });
    const url = `/sync/push-sessions/${created.body.push_id}/chunks`;
    const inOne = await c.post(url, { start_row_ordinal: 0, rows: [list(id, 'a'), list(id, 'b')] });
    expectStatus(inOne, 400, 'invalid_request');
    expect(inOne.body.details).toEqual([expect.objectContaining({ row_ordinal: 1, path: 'key' })]);
    expectStatus(await c.post(url, { start_row_ordinal: 0, rows: [list(id, 'a')] }), 200);
    const across = await c.post(url, { start_row_ordinal: 1, rows: [list(uuid(), 'b'), list(id, 'c')] });
    expectStatus(across, 400, 'invalid_request');
    // Nothing of the refused chunk was staged.
    const next = await c.post(url, { start_row_ordinal: 1, rows: [list(uuid(), 'b'), list(uuid(), 'c')] });
    expectStatus(next, 200);
    expect(next.body.next_expected_row_ordinal).toBe(3);
  });

  it('deeply nested json commits, or is refused as invalid_request, but is never a 500', async () => {
    const c = await user('p-deep');
    for (const depth of [64, 65, 1000]) {
      const meta = JSON.parse('['.repeat(depth) + '1' + ']'.repeat(depth));
      const rows: PushRow[] = [{ schema: 'app', table: 'kinds', key: { code: `deep${depth}` }, op: 'INSERT', base_row_version: 0, payload: { meta } }];
      const answer = await push(c, rows, { sourceBundleId: depth === 64 ? 1 : 2 });
      if (answer.status === 400) expect(answer.body.details[0]).toMatchObject({ row_ordinal: 0, path: 'payload.meta' });
      expect(answer.status, `${depth}: ${JSON.stringify(answer.body).slice(0, 300)}`).toBe(depth === 64 ? 200 : 400);
      if (answer.status === 200) expect(bundleHash((await committedRows(c, answer.body.bundle_seq)).rows)).toBe(answer.body.bundle_hash);
    }
  });

  it('two commits of one session at once both answer the same 200', async () => {
    const c = await user('p-double');
    const rows = Array.from({ length: 50 }, (_, i) => list(uuid(), `double ${i}`));
    const created = await create(c, { source_bundle_id: 1, planned_row_count: rows.length });
    await c.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows });
    const [x, y] = await Promise.all([1, 2].map(() => c.post(`/sync/push-sessions/${created.body.push_id}/commit`)));
    expectStatus(x!, 200);
    expectStatus(y!, 200);
    expect(x!.body).toEqual(y!.body);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'p-double'`)).rows[0].n).toBe(1);
  });

  it('push_session_not_found for unknown and for another user\'s session; delete answers 204', async () => {
    const c = await user('p-owner');
    const thief = await user('p-thief', 'p-owner-dev'); // even with the same source id
    const created = await create(c, { source_bundle_id: 1, planned_row_count: 1 });
    const base = `/sync/push-sessions/${created.body.push_id}`;
    const row = list(uuid(), 'mine');
    for (const answer of [
      await thief.post(`${base}/chunks`, { start_row_ordinal: 0, rows: [row] }),
      await thief.post(`${base}/commit`),
      await thief.del(base),
      await c.post(`/sync/push-sessions/${uuid()}/commit`),
      await c.post(`/sync/push-sessions/${uuid()}/chunks`, { start_row_ordinal: 0, rows: [row] }),
      await c.del(`/sync/push-sessions/${uuid()}`),
    ]) {
      expectStatus(answer, 404, 'push_session_not_found');
    }
    expectStatus(await c.post(`${base}/chunks`, { start_row_ordinal: 0, rows: [row] }), 200);
    const deleted = await c.del(base);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expectStatus(await c.post(`${base}/commit`), 404, 'push_session_not_found');
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.push_session_rows WHERE push_id = $1`, [created.body.push_id])).rows[0].n).toBe(0);
    // The id is still free: a new session with the same source_bundle_id commits.
    await pushOk(c, [row], { sourceBundleId: 1 });
  });

  it('push_session_expired on chunk and commit', async () => {
    const c = await user('p-expired');
    const created = await create(c, { source_bundle_id: 1, planned_row_count: 2 });
    const base = `/sync/push-sessions/${created.body.push_id}`;
    expectStatus(await c.post(`${base}/chunks`, { start_row_ordinal: 0, rows: [list(uuid(), 'a')] }), 200);
    await s.t.operator(`UPDATE sync.push_sessions SET expires_at = now() - interval '1 second' WHERE push_id = $1`, [created.body.push_id]);
    expectStatus(await c.post(`${base}/chunks`, { start_row_ordinal: 1, rows: [list(uuid(), 'b')] }), 410, 'push_session_expired');
    expectStatus(await c.post(`${base}/commit`), 410, 'push_session_expired');
  });

  it('source_sequence_out_of_order and source_sequence_changed', async () => {
    const c = await user('p-seq');
    const skip = await create(c, { source_bundle_id: 2, planned_row_count: 1 });
    expectStatus(skip, 409, 'source_sequence_out_of_order');
    expect(skip.body.expected_source_bundle_id).toBe(1);
    await pushOk(c, [list(uuid(), 'one')], { sourceBundleId: 1 });
    await pushOk(c, [list(uuid(), 'two')], { sourceBundleId: 2 });
    expectStatus(await create(c, { source_bundle_id: 4, planned_row_count: 1 }), 409, 'source_sequence_out_of_order');
    // Two sessions for bundle 3: once one commits, the other is no longer the next bundle to commit
    // unless it is the same bundle (then it converges on the committed answer).
    const rows3 = [list(uuid(), 'three')];
    const a = await create(c, { source_bundle_id: 3, planned_row_count: 1, request_hash: requestHash(rows3) });
    await c.post(`/sync/push-sessions/${a.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rows3 });
    const done3 = await pushOk(c, rows3, { sourceBundleId: 3 });
    const converged = await c.post(`/sync/push-sessions/${a.body.push_id}/commit`);
    expectStatus(converged, 200);
    expect(converged.body).toEqual(done3);
    // A bundle at or below the last committed one whose record was pruned: source_sequence_changed.
    await s.t.operator(`DELETE FROM sync.bundle_rows WHERE bundle_seq = 1 AND user_id = (SELECT user_id FROM sync.user_state WHERE user_id = 'p-seq')`);
    await s.t.operator(`DELETE FROM sync.bundle_log WHERE bundle_seq = 1 AND user_id = (SELECT user_id FROM sync.user_state WHERE user_id = 'p-seq')`);
    const changed = await create(c, { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(changed, 409, 'source_sequence_changed');
    expect(changed.body.last_source_bundle_id).toBe(3);
  });

  it('two sessions of one bundle with different request hashes: the loser gets push_request_mismatch', async () => {
    const c = await user('p-race');
    const rowsA = [list(uuid(), 'A')];
    const rowsB = [list(uuid(), 'B')];
    const a = await create(c, { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(rowsA) });
    const b = await create(c, { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(rowsB) });
    await c.post(`/sync/push-sessions/${a.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rowsA });
    await c.post(`/sync/push-sessions/${b.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rowsB });
    expectStatus(await c.post(`/sync/push-sessions/${a.body.push_id}/commit`), 200);
    // B's rows were never applied; answering "committed" would make the client drop them silently.
    expectStatus(await c.post(`/sync/push-sessions/${b.body.push_id}/commit`), 409, 'push_request_mismatch');
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE id = $1`, [rowsB[0]!.key['id']])).rows[0].n).toBe(0);
  });

  // Issue 15 item 3: without request_hash both sessions answered "committed" and only the first
  // one's rows existed. The server now compares the rows themselves.
  it('two sessions of one bundle without request_hash and with different rows: the loser gets push_request_mismatch', async () => {
    const c = await user('p-race-nohash');
    const rowsA = [list(uuid(), 'A')];
    const rowsB = [list(uuid(), 'B')];
    const a = await create(c, { source_bundle_id: 1, planned_row_count: 1 });
    const b = await create(c, { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(await c.post(`/sync/push-sessions/${a.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rowsA }), 200);
    expectStatus(await c.post(`/sync/push-sessions/${b.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rowsB }), 200);
    expectStatus(await c.post(`/sync/push-sessions/${a.body.push_id}/commit`), 200);
    expectStatus(await c.post(`/sync/push-sessions/${b.body.push_id}/commit`), 409, 'push_request_mismatch');
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE id = $1`, [rowsB[0]!.key['id']])).rows[0].n).toBe(0);
    // The same rows again, by a session without a hash: they are the committed ones, so it converges.
    const again = await push(c, rowsA, { sourceBundleId: 1, requestHash: false });
    expectStatus(again, 200);
    expect(again.body).toMatchObject({ status: 'committed', bundle_seq: 1, source_bundle_id: 1 });
    // With the client's hash the committed tuple is recognised at create, as before.
    const known = await create(c, { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(rowsA) });
    expect(known.body).toMatchObject({ status: 'already_committed', bundle_seq: 1 });
  });

  it('create without request_hash for a committed tuple stages the rows so commit can compare them', async () => {
    const c = await user('p-late-nohash');
    const rowsA = [list(uuid(), 'A')];
    await pushOk(c, rowsA, { sourceBundleId: 1, requestHash: false });
    // "already_committed" here would tell a client whose rows differ that they were applied.
    const late = await create(c, { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(late, 200);
    expect(late.body.status).toBe('staging');
    const rowsB = [list(uuid(), 'B')];
    expectStatus(await c.post(`/sync/push-sessions/${late.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rowsB }), 200);
    expectStatus(await c.post(`/sync/push-sessions/${late.body.push_id}/commit`), 409, 'push_request_mismatch');
    // A hash sent later for the tuple is compared with the hash of the rows that committed.
    const mismatch = await create(c, { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(rowsB) });
    expectStatus(mismatch, 409, 'push_request_mismatch');
    const same = await create(c, { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(rowsA) });
    expect(same.body).toMatchObject({ status: 'already_committed', bundle_seq: 1 });
  });

  it('request_hash: the client-computed hash is accepted, a wrong one is refused at commit', async () => {
    const c = await user('p-hash');
    const listId = uuid();
    const rows: PushRow[] = [
      list(listId, 'h\u00e9llo \ud83d\ude00 "q" \\ \n\t\u0001', 0, { position: -3 }),
      item(uuid(), listId, 'x', 0, { done: true, attachment: Buffer.from([0, 1, 2, 250, 255]).toString('base64') }),
      {
        schema: 'app', table: 'kinds', key: { code: 'k\u00e9y' }, op: 'INSERT', base_row_version: 0,
        payload: { big: '4611686018427387904', amount: '-12345678901234.5678', ratio: 0.1, flag: false, seen_at: '2024-02-29T12:34:56.123456Z',
          // eslint-disable-next-line no-loss-of-precision -- a double JSON number, canonicalised as such
          meta: { z: [1e21, 1e-7, -0, 1.5, 'x'], a: { '\ud83d\ude00': 1, '\uffff': 2, b: null }, n: 12345678901234567890 }, label: 'L', blob: '' },
      },
    ];
    const committed = await pushOk(c, rows, { sourceBundleId: 1 });
    expect(committed.row_count).toBe(3);
    expect(bundleHash((await committedRows(c, committed.bundle_seq)).rows)).toBe(committed.bundle_hash);
    const wrongRows = [list(uuid(), 'w')];
    const wrong = await push(c, wrongRows, { sourceBundleId: 2, requestHash: requestHash([list(uuid(), 'other')]) });
    expectStatus(wrong, 400, 'invalid_request');
    expect(wrong.body.message).toMatch(/request_hash/);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE id = $1`, [wrongRows[0]!.key['id']])).rows[0].n).toBe(0);
    // A DELETE row hashes with payload null, and an UPDATE of a subset of columns hashes what was sent.
    const k = await committedRows(c, committed.bundle_seq);
    const v = k.rows[0]!.row_version;
    await pushOk(c, [del('items', rows[1]!.key, v), { ...list(listId, 'renamed', v), payload: { title: 'renamed' } }], { sourceBundleId: 2 });
  });

  it('bundle_hash recomputed from the committed rows; paging by max_rows and by the byte budget', async () => {
    const c = await user('p-bundle');
    const listId = uuid();
    const rows: PushRow[] = [list(listId, 'parent'), ...Array.from({ length: 11 }, (_, i) => item(uuid(), listId, `item ${i} \u00e9\ud83d\ude00`, 0, { done: i % 2 === 0 }))];
    const committed = await pushOk(c, rows, { sourceBundleId: 1, chunkSize: 4 });
    expect(committed.row_count).toBe(12);
    for (const maxRows of [undefined, 1, 5, 12, 5000]) {
      const { rows: got, pages } = await committedRows(c, committed.bundle_seq, maxRows);
      expect(got).toHaveLength(12);
      expect(bundleHash(got)).toBe(committed.bundle_hash);
      for (const p of pages) expect(p).toMatchObject({ bundle_seq: committed.bundle_seq, source_id: 'p-bundle-dev', source_bundle_id: 1, row_count: 12, bundle_hash: committed.bundle_hash });
      if (maxRows === 5) expect(pages.map((p) => p.rows.length)).toEqual([5, 5, 2]);
      expect(pages.at(-1).has_more).toBe(false);
    }
    // Paging past the end: an empty last page.
    const past = await c.get(`/sync/committed-bundles/${committed.bundle_seq}/rows?after_row_ordinal=12`);
    expect(past.body).toMatchObject({ rows: [], next_row_ordinal: 12, has_more: false });
    // Rows are authoritative committed rows: visible columns only, row_version = bundle_seq.
    const { rows: got } = await committedRows(c, committed.bundle_seq);
    expect(got[0]).toEqual({ schema: 'app', table: 'lists', key: { id: listId }, op: 'INSERT', row_version: 1, payload: { id: listId, title: 'parent', position: null } });
    expect(got[1]!.payload).toMatchObject({ list_id: listId, attachment: null });
    expect(got[1]!.payload).not.toHaveProperty('_sync_scope_id');
    // Another user's bundle, or none: committed_bundle_not_found.
    const other = await user('p-bundle-other');
    await pushOk(other, [list(uuid(), 'o')], { sourceBundleId: 1 });
    expectStatus(await other.get(`/sync/committed-bundles/2/rows`), 404, 'committed_bundle_not_found');
    expectStatus(await s.client('p-bundle-nobody').get(`/sync/committed-bundles/1/rows`), 404, 'committed_bundle_not_found');
    expectStatus(await c.get(`/sync/committed-bundles/99/rows`), 404, 'committed_bundle_not_found');
  });

  it('a 2^62 bigint, an exact numeric and arbitrary bytes round-trip exactly', async () => {
    const c = await user('p-types');
    const bytes = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37 + 11) % 256));
    const payload = {
      big: '4611686018427387904', amount: '9999999999999999.9999', ratio: 1e-7, flag: true,
      meta: { deep: { n: 1e21, s: '\ud83d\ude00' }, arr: [0.1, -0, 2 ** 53] }, seen_at: '2024-01-02T03:04:05.678901Z', blob: bytes.toString('base64'), label: 'types',
    };
    const committed = await pushOk(c, [{ schema: 'app', table: 'kinds', key: { code: 'exact' }, op: 'INSERT', base_row_version: 0, payload }], { sourceBundleId: 1 });
    const db = (await s.t.exec(`SELECT big::text AS big, amount::text AS amount, encode(blob, 'hex') AS blob FROM app.kinds WHERE _sync_scope_id = 'p-types' AND code = 'exact'`)).rows[0];
    expect(db).toEqual({ big: '4611686018427387904', amount: '9999999999999999.9999', blob: bytes.toString('hex') });
    const { rows } = await committedRows(c, committed.bundle_seq);
    expect(rows[0]!.payload).toEqual({ code: 'exact', ...payload, meta: { deep: { n: 1e21, s: '\ud83d\ude00' }, arr: [0.1, 0, 2 ** 53] } });
    expect(Buffer.from(rows[0]!.payload!['blob'] as string, 'base64').equals(bytes)).toBe(true);
    expect(bundleHash(rows)).toBe(committed.bundle_hash);
    // The same values through pull.
    const pulled = await c.get('/sync/pull?after_bundle_seq=0');
    expectStatus(pulled, 200);
    expect(pulled.body.bundles[0].rows[0].payload.big).toBe('4611686018427387904');
    expect(pulled.body.bundles[0].rows[0].payload.blob).toBe(bytes.toString('base64'));
  });
});

describe('write path: limits (small SYNC_LIMIT_* overrides)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({
      env: {
        SYNC_LIMIT_MAX_ROWS_PER_PUSH_CHUNK: '5',
        SYNC_LIMIT_MAX_ROWS_PER_BUNDLE: '12',
        SYNC_LIMIT_MAX_BYTES_PER_BUNDLE: '6000',
        // Counted as Lambda counts a request: the JSON-escaped invoke event, headers and token
        // included (about 2 KB besides the body here).
        SYNC_LIMIT_MAX_REQUEST_BYTES: '8000',
        SYNC_LIMIT_MAX_RESPONSE_BYTES: '2000',
        // Room for a page's envelopes inside so small an answer (core/limits.ts asserts there is).
        SYNC_LIMIT_RESPONSE_ENVELOPE_BYTES: '300',
        SYNC_LIMIT_PAGE_ENVELOPE_BYTES: '300',
      },
    });
  });
  afterAll(async () => s?.close());

  it('payload_too_large: chunk rows, planned rows, bundle bytes, request body', async () => {
    const c = s.client('l-user', 'l-dev');
    await initEmpty(c);
    const caps = await c.get('/sync/capabilities');
    expect(caps.body.bundle_limits).toMatchObject({ max_rows_per_push_chunk: 5, max_rows_per_bundle: 12, max_bytes_per_bundle: 6000, max_request_bytes: 8000, max_response_bytes: 2000 });

    const tooMany = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 13 });
    expectStatus(tooMany, 413, 'payload_too_large');
    expect(tooMany.body.message).toMatch(/max_rows_per_bundle/);

    const created = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 12 });
    expectStatus(created, 200);
    const url = `/sync/push-sessions/${created.body.push_id}/chunks`;
    const six = Array.from({ length: 6 }, () => list(uuid(), 'x'));
    const chunkTooBig = await c.post(url, { start_row_ordinal: 0, rows: six });
    expectStatus(chunkTooBig, 413, 'payload_too_large');
    expect(chunkTooBig.body.message).toMatch(/max_rows_per_push_chunk/);

    const body = await c.post(url, { start_row_ordinal: 0, rows: [list(uuid(), 'y'.repeat(8100))] });
    expectStatus(body, 413, 'payload_too_large');
    expect(body.body.message).toMatch(/max_request_bytes/);

    // Chunk bodies count against max_bytes_per_bundle (6000): two fit, the third crosses it.
    const fat = (n: number) => Array.from({ length: n }, () => list(uuid(), 'z'.repeat(400)));
    const chunks = [fat(5), fat(5), fat(2)].map((rows, i) => ({ start_row_ordinal: i * 5, rows }));
    const sizes = chunks.map((b) => Buffer.byteLength(JSON.stringify(b)));
    expect(sizes[0]! + sizes[1]!).toBeLessThanOrEqual(6000);
    expect(sizes[0]! + sizes[1]! + sizes[2]!).toBeGreaterThan(6000);
    expectStatus(await c.post(url, chunks[0]), 200);
    expectStatus(await c.post(url, chunks[1]), 200);
    const over = await c.post(url, chunks[2]);
    expectStatus(over, 413, 'payload_too_large');
    expect(over.body.message).toMatch(/max_bytes_per_bundle/);
    // Nothing of the refused chunk was staged: the session still expects row 10.
    const retry = await c.post(url, { start_row_ordinal: 11, rows: fat(1) });
    expectStatus(retry, 409, 'push_chunk_out_of_order');
    expect(retry.body.next_expected_row_ordinal).toBe(10);
  });

  it('committed-bundle pages respect max_response_bytes and carry at least one row', async () => {
    const c = s.client('l-pages', 'l-pages-dev');
    await initEmpty(c);
    const listId = uuid();
    const rows = [list(listId, 'p'.repeat(700)), ...Array.from({ length: 9 }, (_, i) => item(uuid(), listId, `${i}`.repeat(300)))];
    const committed = await pushOk(c, rows, { sourceBundleId: 1, chunkSize: 5 });
    const { rows: got, pages } = await committedRows(c, committed.bundle_seq);
    expect(got).toHaveLength(10);
    expect(pages.length).toBeGreaterThan(2);
    for (const p of pages) {
      expect(p.rows.length).toBeGreaterThan(0);
      expect(Buffer.byteLength(JSON.stringify(p))).toBeLessThanOrEqual(2000);
    }
    expect(bundleHash(got)).toBe(committed.bundle_hash);
    // A row no response could carry is refused at commit (protocol §6), the source bundle unused;
    // a row that fills most of a page comes alone (a page always carries one row).
    expectStatus(await push(c, [list(uuid(), 'h'.repeat(3000)), list(uuid(), 'small')], { sourceBundleId: 2 }), 413, 'payload_too_large');
    const huge = await pushOk(c, [list(uuid(), 'h'.repeat(1150)), list(uuid(), 'small')], { sourceBundleId: 2 });
    const page = await c.get(`/sync/committed-bundles/${huge.bundle_seq}/rows`);
    expect(page.body.rows).toHaveLength(1);
    expect(page.body).toMatchObject({ next_row_ordinal: 1, has_more: true });
  });
});
