/**
 * Issue 10, isolation between users (docs/protocol.md §2: another user's session or bundle is answered
 * exactly like a missing one; existence never leaks). Extends what the suites already pin —
 * read-pull (B's pull/snapshot hold none of A's rows, one foreign bundle and snapshot are 404),
 * write-push (a foreign push session is 404 for chunk/commit/delete), write-commit (the same key
 * in two scopes) — to every endpoint and every state of A's objects:
 *
 * - B using A's push ids (staging, fully staged, committed, expired), snapshot ids (live,
 *   expired), bundle seqs and query variants gets byte-for-byte the answer a random id gets
 *   (status, error code, message with the id blanked, Retry-After), and A's objects still work;
 * - B using A's source ids (push create with A's committed source tuple and request hash,
 *   source replacement naming A's source, connect) gets what an unknown source id gets;
 * - a token for A with the Sync-Source-ID of B's device writes only into A's stream: B's stream,
 *   source state and pulls are unchanged, and B's device keeps its own sequence;
 * - `_sync_scope_id` appears in no response body of this file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, signToken, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, list, pushOk, requestHash, uuid, type PushRow } from './support/write-helpers.js';

interface Answer {
  readonly status: number;
  readonly text: string;
  readonly body: any;
  readonly retryAfter: string | null;
}

describe('isolation between users on every endpoint', () => {
  let s: TestServer;
  /** Every response text of the file, for the hidden-column grep. */
  const texts: string[] = [];
  const tokens = new Map<string, Promise<string>>();

  async function call(user: string, source: string, method: string, path: string, body?: unknown): Promise<Answer> {
    let token = tokens.get(user);
    if (!token) tokens.set(user, (token = signToken(user)));
    const res = await fetch(s.url + path, {
      method,
      headers: { authorization: `Bearer ${await token}`, 'sync-source-id': source, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    texts.push(text);
    return { status: res.status, text, body: text ? JSON.parse(text) : undefined, retryAfter: res.headers.get('retry-after') };
  }

  const A = { user: 'iso-a', source: 'a-dev' };
  const B = { user: 'iso-b', source: 'b-dev' };
  const a = (method: string, path: string, body?: unknown) => call(A.user, A.source, method, path, body);
  const b = (method: string, path: string, body?: unknown) => call(B.user, B.source, method, path, body);

  /** What a client may compare: status, code, message and extra fields with the id blanked. */
  function shape(answer: Answer, id: string | number): unknown {
    const blank = (v: unknown): unknown => (typeof v === 'string' ? v.split(String(id)).join('<id>') : v);
    const body = answer.body && typeof answer.body === 'object' ? Object.fromEntries(Object.entries(answer.body).map(([k, v]) => [k, blank(v)])) : answer.body;
    return { status: answer.status, body, retryAfter: answer.retryAfter };
  }

  const aRows: PushRow[][] = [];
  const ids = {
    staging: '',
    complete: '',
    committed: '',
    expired: '',
    snapshot: '',
    snapshotExpired: '',
  };
  let aLatest = 0;
  const stagedRows = [list(uuid(), 'A-SECRET-staged-1'), list(uuid(), 'A-SECRET-staged-2')];

  beforeAll(async () => {
    s = await startTestServer();
    const ca = s.client(A.user, A.source);
    const cb = s.client(B.user, B.source);
    await initEmpty(ca);
    await initEmpty(cb);
    for (let i = 1; i <= 3; i++) {
      const rows = [list(uuid(), `A-SECRET-${i}`)];
      aRows.push(rows);
      const committed = await pushOk(ca, rows, { sourceBundleId: i });
      aLatest = committed.bundle_seq;
    }
    await pushOk(cb, [list(uuid(), 'B-own')], { sourceBundleId: 1 });

    // A's push sessions in every state.
    const created = async (sbid: number, rows: PushRow[], upload: number) => {
      const c = await a('POST', '/sync/push-sessions', { source_bundle_id: sbid, planned_row_count: rows.length, request_hash: requestHash(rows) });
      expectStatus({ ...c, roundTrips: 0, headers: new Headers() }, 200);
      if (upload) expect((await a('POST', `/sync/push-sessions/${c.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rows.slice(0, upload) })).status).toBe(200);
      return c.body.push_id as string;
    };
    ids.staging = await created(4, stagedRows, 1);
    ids.expired = await created(4, [list(uuid(), 'A-SECRET-expired')], 0);
    await s.t.operator(`UPDATE sync.push_sessions SET expires_at = now() - interval '1 second' WHERE push_id = $1`, [ids.expired]);
    // The committed session of A's bundle 3: create it again, commit it, keep its id.
    const fourth = [list(uuid(), 'A-SECRET-4')];
    ids.committed = await created(4, fourth, 1);
    const commit = await a('POST', `/sync/push-sessions/${ids.committed}/commit`);
    expect(commit.status, commit.text).toBe(200);
    aRows.push(fourth);
    aLatest = commit.body.bundle_seq;
    ids.complete = await created(5, [list(uuid(), 'A-SECRET-complete')], 1);
    const snap = await a('POST', '/sync/snapshot-sessions', {});
    expect(snap.status).toBe(200);
    ids.snapshot = snap.body.snapshot_id;
    const dead = await a('POST', '/sync/snapshot-sessions', {});
    ids.snapshotExpired = dead.body.snapshot_id;
    await s.t.operator(`UPDATE sync.snapshot_sessions SET expires_at = now() - interval '1 second' WHERE snapshot_id = $1`, [ids.snapshotExpired]);
  });
  afterAll(async () => s?.close());

  it("B using A's push session ids (staging, complete, committed, expired) gets exactly a random id's answer; A's sessions are untouched", async () => {
    const chunk = { start_row_ordinal: 0, rows: [list(uuid(), 'B tries')] };
    const chunkAt1 = { start_row_ordinal: 1, rows: [list(uuid(), 'B tries')] };
    let compared = 0;
    for (const [state, id] of Object.entries({ staging: ids.staging, complete: ids.complete, committed: ids.committed, expired: ids.expired })) {
      for (const [name, request] of [
        ['chunk@0', (pid: string) => b('POST', `/sync/push-sessions/${pid}/chunks`, chunk)],
        ['chunk@1', (pid: string) => b('POST', `/sync/push-sessions/${pid}/chunks`, chunkAt1)],
        ['commit', (pid: string) => b('POST', `/sync/push-sessions/${pid}/commit`)],
        ['delete', (pid: string) => b('DELETE', `/sync/push-sessions/${pid}`)],
      ] as const) {
        const random = uuid();
        const foreign = await request(id);
        const absent = await request(random);
        expect(foreign.status, `${state} ${name}: ${foreign.text}`).toBe(404);
        expect(foreign.body.error).toBe('push_session_not_found');
        expect(shape(foreign, id), `${state} ${name}`).toEqual(shape(absent, random));
        expect(foreign.text).not.toContain('A-SECRET');
        compared++;
      }
    }
    expect(compared).toBe(16);
    // A's sessions still behave as A left them.
    const resumed = await a('POST', `/sync/push-sessions/${ids.staging}/chunks`, { start_row_ordinal: 1, rows: stagedRows.slice(1) });
    expect(resumed.status, resumed.text).toBe(200);
    expect(resumed.body.next_expected_row_ordinal).toBe(2);
    const again = await a('POST', `/sync/push-sessions/${ids.committed}/commit`);
    expect(again.status, again.text).toBe(200);
    expect(again.body.bundle_seq).toBe(aLatest);
    expect((await a('POST', `/sync/push-sessions/${ids.expired}/commit`)).body.error).toBe('push_session_expired');
  });

  it("B using A's snapshot ids (live, expired) and A's bundle seqs gets exactly a random id's answer", async () => {
    let compared = 0;
    for (const [state, id] of Object.entries({ live: ids.snapshot, expired: ids.snapshotExpired })) {
      for (const query of ['', '?after_row_ordinal=0&max_rows=1', '?after_row_ordinal=5']) {
        const random = uuid();
        const foreign = await b('GET', `/sync/snapshot-sessions/${id}${query}`);
        const absent = await b('GET', `/sync/snapshot-sessions/${random}${query}`);
        expect(foreign.status, `${state} page${query}: ${foreign.text}`).toBe(404);
        expect(foreign.body.error).toBe('snapshot_session_not_found');
        expect(shape(foreign, id)).toEqual(shape(absent, random));
        compared++;
      }
      const random = uuid();
      const foreignDelete = await b('DELETE', `/sync/snapshot-sessions/${id}`);
      const absentDelete = await b('DELETE', `/sync/snapshot-sessions/${random}`);
      expect(foreignDelete.status, foreignDelete.text).toBe(404);
      expect(shape(foreignDelete, id)).toEqual(shape(absentDelete, random));
      compared++;
    }
    // B has bundle 1 only; A has 1..aLatest. Every one of A's seqs above B's latest is "missing".
    for (let seq = 2; seq <= aLatest; seq++) {
      for (const query of ['', '?after_row_ordinal=0&max_rows=1', '?after_row_ordinal=1']) {
        const missing = 100_000 + seq;
        const foreign = await b('GET', `/sync/committed-bundles/${seq}/rows${query}`);
        const absent = await b('GET', `/sync/committed-bundles/${missing}/rows${query}`);
        expect(foreign.status, `seq ${seq}${query}: ${foreign.text}`).toBe(404);
        expect(foreign.body.error).toBe('committed_bundle_not_found');
        expect(shape(foreign, seq)).toEqual(shape(absent, missing));
        expect(foreign.text).not.toContain('A-SECRET');
        compared++;
      }
    }
    // Seq 1 exists for both: B gets its own bundle, never A's.
    const own = await b('GET', '/sync/committed-bundles/1/rows');
    expect(own.status).toBe(200);
    expect(own.text).toContain('B-own');
    expect(own.text).not.toContain('A-SECRET');
    expect(compared).toBe(8 + 3 * (aLatest - 1));
    // A's snapshot still reads for A.
    const page = await a('GET', `/sync/snapshot-sessions/${ids.snapshot}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('A-SECRET-1');
  });

  it("B's pull and watch know only B's sequence: A's seqs as checkpoint or target answer like any unknown number", async () => {
    for (const [param, mine, foreignValue, randomValue] of [
      ['target_bundle_seq', 'after_bundle_seq=0&', aLatest, 100_000],
      ['after_bundle_seq', '', aLatest, 100_000],
    ] as const) {
      const foreign = await b('GET', `/sync/pull?${mine}${param}=${foreignValue}`);
      const absent = await b('GET', `/sync/pull?${mine}${param}=${randomValue}`);
      expect(foreign.status, foreign.text).toBeGreaterThanOrEqual(400);
      expect(shape(foreign, foreignValue)).toEqual(shape(absent, randomValue));
    }
    const pulled = await b('GET', '/sync/pull?after_bundle_seq=0');
    expect(pulled.status).toBe(200);
    expect(pulled.body.stable_bundle_seq).toBe(1);
    expect(pulled.text).not.toContain('A-SECRET');
    const watch = await b('GET', '/sync/watch?after_bundle_seq=1&wait_seconds=0');
    expect(watch.body).toEqual({ latest_bundle_seq: 1, changed: false });
  });

  it("B using A's source ids gets what an unknown source id gets, never A's bundles", async () => {
    // A's committed source tuple (a-dev, 1) with A's exact request hash: for B it is a new tuple.
    const body = { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(aRows[0] as PushRow[]) };
    const asA = await call(B.user, A.source, 'POST', '/sync/push-sessions', body);
    const asRandom = await call(B.user, 'never-seen-dev', 'POST', '/sync/push-sessions', body);
    expect(asA.status, asA.text).toBe(200);
    expect(asA.body.status).toBe('staging');
    const strip = (x: any) => ({ ...x, push_id: '<id>', expires_at: '<t>' });
    expect(strip(asA.body)).toEqual(strip(asRandom.body));
    expect(asA.text).not.toMatch(/bundle_hash|bundle_seq/);
    // Later source_bundle_ids of A's source: the same sequence refusal as for an unknown source.
    const laterA = await call(B.user, A.source, 'POST', '/sync/push-sessions', { source_bundle_id: 3, planned_row_count: 1 });
    const laterRandom = await call(B.user, 'never-seen-2', 'POST', '/sync/push-sessions', { source_bundle_id: 3, planned_row_count: 1 });
    expect(shape(laterA, A.source)).toEqual(shape(laterRandom, 'never-seen-2'));
    // Source replacement naming A's device as the previous source.
    for (const reason of ['source_retired', 'history_pruned']) {
      const replaceA = await b('POST', '/sync/snapshot-sessions', { source_replacement: { previous_source_id: A.source, new_source_id: 'b-next', reason } });
      const replaceRandom = await b('POST', '/sync/snapshot-sessions', { source_replacement: { previous_source_id: 'never-seen-3', new_source_id: 'b-next', reason } });
      expect(replaceA.status, replaceA.text).toBe(409);
      expect(shape(replaceA, A.source)).toEqual(shape(replaceRandom, 'never-seen-3'));
    }
    // Connect from A's device id: B's own scope decides.
    const connectA = await call(B.user, A.source, 'POST', '/sync/connect', { has_local_pending_rows: true });
    const connectRandom = await call(B.user, 'never-seen-4', 'POST', '/sync/connect', { has_local_pending_rows: true });
    expect(connectA.body.resolution).toBe('remote_authoritative');
    expect(connectA.body).toEqual(connectRandom.body);
    // A's source is untouched by all of it.
    const next = await pushOk(s.client(A.user, A.source), [list(uuid(), 'A-SECRET-after')], { sourceBundleId: 5 });
    expect(next.source_id).toBe(A.source);
  });

  it("a token for A with B's device id writes only into A's stream; B's stream and source state are unchanged", async () => {
    const bState = async () => {
      const r = await s.t.exec(
        `SELECT (SELECT jsonb_agg(to_jsonb(l) - 'committed_at' ORDER BY l.bundle_seq) FROM sync.bundle_log l WHERE l.user_id = u.user_id) AS log,
                (SELECT jsonb_agg(to_jsonb(ss) ORDER BY ss.source_id) FROM sync.source_state ss WHERE ss.user_id = u.user_id) AS sources,
                to_jsonb(u) AS user_state,
                (SELECT count(*)::int FROM app.lists WHERE _sync_scope_id = u.user_id) AS lists
           FROM sync.user_state u WHERE u.user_id = $1`,
        [B.user],
      );
      return r.rows[0];
    };
    const before = await bState();
    const bPullBefore = await b('GET', '/sync/pull?after_bundle_seq=0');
    const aBefore = await a('GET', '/sync/pull?after_bundle_seq=0');
    const aStable = aBefore.body.stable_bundle_seq as number;

    const aOnBDevice = s.client(A.user, B.source);
    const written = await pushOk(aOnBDevice, [list(uuid(), 'A-SECRET-from-b-device')], { sourceBundleId: 1 });
    expect(written.bundle_seq).toBe(aStable + 1);
    expect(written.source_id).toBe(B.source);

    expect(await bState()).toEqual(before);
    const bPullAfter = await b('GET', '/sync/pull?after_bundle_seq=0');
    expect(bPullAfter.text).toBe(bPullBefore.text);
    const aAfter = await a('GET', `/sync/pull?after_bundle_seq=${aStable}`);
    expect(aAfter.body.bundles.map((x: any) => [x.bundle_seq, x.source_id, x.source_bundle_id])).toEqual([[aStable + 1, B.source, 1]]);
    // B's device keeps its own sequence in B's stream (its next is 2, not affected by A's 1).
    const bNext = await pushOk(s.client(B.user, B.source), [list(uuid(), 'B-own-2')], { sourceBundleId: 2 });
    expect(bNext.bundle_seq).toBe(2);
    const bRows = await b('GET', '/sync/committed-bundles/2/rows');
    expect(bRows.text).toContain('B-own-2');
    expect(bRows.text).not.toContain('A-SECRET');
  });

  it('_sync_scope_id appears in no response body of this file', () => {
    expect(texts.length).toBeGreaterThan(80);
    for (const text of texts) expect(text).not.toContain('_sync_scope_id');
    // And the users' own data did flow through those bodies (the grep read real answers).
    expect(texts.some((t) => t.includes('A-SECRET'))).toBe(true);
    expect(texts.some((t) => t.includes('B-own'))).toBe(true);
  });
});
