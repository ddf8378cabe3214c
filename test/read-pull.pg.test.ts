/**
 * Issue 5, pull and committed-bundle pages: paging to a frozen ceiling concatenates to exactly the
 * committed log (also while commits land), users never see each other's data, the hidden scope
 * never leaves the server, history_pruned after pruning, rows_omitted under a small response
 * budget, the long-poll watch, and the round trips of each read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type ApiClient } from './support/server.js';
import { expectStatus, initEmpty, item, list, pushOk, uuid } from './support/write-helpers.js';
import { bundleRows, pullAll, rawGet, serverLists, snapshotAll, type RawAnswer } from './support/read-helpers.js';
import { runMaintenance } from '../core/sync/maintenance/maintenance.js';
import { defaultLimits, limitsFromEnv } from '../core/limits.js';

/** The committed log as the server stores it, for comparison with what pull hands out. */
async function committedLog(s: TestServer, user: string): Promise<any[]> {
  const { rows } = await s.t.exec(`
    SELECT b.bundle_seq::int, b.source_id, b.source_bundle_id::int, b.row_count, b.bundle_hash
      FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1 ORDER BY b.bundle_seq`, [user]);
  return rows;
}

const summary = (b: any): any => ({ bundle_seq: b.bundle_seq, source_id: b.source_id, source_bundle_id: b.source_bundle_id, row_count: b.row_count, bundle_hash: b.bundle_hash });

describe('pull (default limits)', () => {
  let s: TestServer;
  let alice: ApiClient;
  let bob: ApiClient;
  const lists: string[] = [];
  beforeAll(async () => {
    s = await startTestServer();
    alice = s.client('alice');
    bob = s.client('bob');
    await initEmpty(alice);
    await initEmpty(bob);
    // 12 bundles for alice: client pushes (lists, then items under them) and server writes.
    for (let i = 1; i <= 8; i++) {
      const id = uuid();
      lists.push(id);
      const rows = i % 2 ? [list(id, `list ${i}`)] : [list(id, `list ${i}`), item(uuid(), id, `item ${i}`), item(uuid(), lists[0] as string, `more ${i}`)];
      await pushOk(alice, rows, { sourceBundleId: i });
    }
    for (let i = 0; i < 4; i++) await serverLists(s.t.db, 'alice', i + 1);
    await pushOk(bob, [list(uuid(), 'bob secret')], { sourceBundleId: 1 });
  });
  afterAll(async () => s?.close());

  it('pages of max_bundles with a frozen target concatenate to exactly the committed log', async () => {
    const log = await committedLog(s, 'alice');
    expect(log).toHaveLength(12);
    for (const size of [1, 5, 12, 1000]) {
      const pulled = await pullAll(s.url, alice, 0, size);
      expect(pulled.stable).toBe(12);
      expect(pulled.pages).toHaveLength(Math.ceil(12 / size));
      expect(pulled.bundles.map(summary)).toEqual(log);
    }
    // From a checkpoint in the middle, the rest of the log.
    const rest = await pullAll(s.url, alice, 7, 2);
    expect(rest.bundles.map(summary)).toEqual(log.slice(7));
    // Each pulled bundle's rows are the committed-bundle rows of that seq.
    for (const b of (await pullAll(s.url, alice, 0)).bundles) expect(b.rows).toEqual(await bundleRows(s.url, alice, b.bundle_seq, 2));
  });

  it('a commit after the first page never leaks into the frozen pull; the next pull gets it', async () => {
    const first = await rawGet(s.url, alice, '/sync/pull?after_bundle_seq=0&max_bundles=4');
    const stable = first.body.stable_bundle_seq as number;
    const seq = await serverLists(s.t.db, 'alice', 2);
    expect(seq).toBe(stable + 1);
    let cursor = 4;
    const seen: number[] = first.body.bundles.map((b: any) => b.bundle_seq);
    for (;;) {
      const page = await rawGet(s.url, alice, `/sync/pull?after_bundle_seq=${cursor}&max_bundles=4&target_bundle_seq=${stable}`);
      expect(page.status, page.text).toBe(200);
      expect(page.body.stable_bundle_seq).toBe(stable);
      seen.push(...page.body.bundles.map((b: any) => b.bundle_seq));
      cursor = seen[seen.length - 1] as number;
      if (!page.body.has_more) break;
    }
    expect(seen).toEqual(Array.from({ length: stable }, (_, i) => i + 1));
    const next = await pullAll(s.url, alice, stable);
    expect(next.bundles.map((b) => b.bundle_seq)).toEqual([seq]);
  });

  it('concurrent commits while draining: every page is a complete, contiguous prefix of the log', async () => {
    let writing = true;
    const writer = (async () => {
      let n = 0;
      while (writing && n < 40) {
        await serverLists(s.t.db, 'alice', 1 + (n % 3));
        n++;
      }
      return n;
    })();
    const start = (await committedLog(s, 'alice')).length;
    let checkpoint = start;
    const pulled: any[] = [];
    for (let round = 0; round < 15; round++) {
      const drained = await pullAll(s.url, alice, checkpoint, 3); // checks contiguity, completeness, hashes
      pulled.push(...drained.bundles);
      checkpoint = drained.stable;
    }
    writing = false;
    await writer;
    const tail = await pullAll(s.url, alice, checkpoint);
    pulled.push(...tail.bundles);
    expect(pulled.map(summary)).toEqual((await committedLog(s, 'alice')).slice(start));
  });

  it("another user's data never appears: pull, snapshot, committed bundles (404 like a missing one)", async () => {
    const bobPull = await pullAll(s.url, bob, 0);
    expect(bobPull.bundles).toHaveLength(1);
    expect(JSON.stringify(bobPull.pages.map((p) => p.body))).not.toContain('list 1');
    const bobSnap = await snapshotAll(s.url, bob);
    expect(bobSnap.rows.map((r) => r.payload.title)).toEqual(['bob secret']);
    // alice has bundles 2..n; bob has only bundle 1: bob asking for 2 is exactly "not found".
    const other = await rawGet(s.url, bob, '/sync/committed-bundles/2/rows');
    const missing = await rawGet(s.url, bob, '/sync/committed-bundles/999999/rows');
    expect(other.status).toBe(404);
    expect(other.body.error).toBe('committed_bundle_not_found');
    expect(other.body.message.replace('2', 'N')).toBe(missing.body.message.replace('999999', 'N'));
    // alice's snapshot session is invisible to bob.
    const aliceSnap = await alice.post('/sync/snapshot-sessions');
    expectStatus(aliceSnap, 200);
    expectStatus(await bob.get(`/sync/snapshot-sessions/${aliceSnap.body.snapshot_id}`), 404, 'snapshot_session_not_found');
    expectStatus(await bob.del(`/sync/snapshot-sessions/${aliceSnap.body.snapshot_id}`), 404, 'snapshot_session_not_found');
    expectStatus(await alice.get(`/sync/snapshot-sessions/${aliceSnap.body.snapshot_id}?max_rows=1`), 200);
    // bob's target beyond his own latest bundle is refused, not answered with alice's.
    expectStatus(await bob.get('/sync/pull?after_bundle_seq=0&target_bundle_seq=5'), 400, 'invalid_request');
  });

  it('the hidden _sync_scope_id never appears in any response text', async () => {
    const texts: string[] = [];
    const pulled = await pullAll(s.url, alice, 0, 5);
    texts.push(...pulled.pages.map((p) => p.text));
    const pages: RawAnswer[] = [];
    await bundleRows(s.url, alice, 2, 1, pages);
    texts.push(...pages.map((p) => p.text));
    const snap = await snapshotAll(s.url, alice, { maxRows: 7 });
    texts.push(JSON.stringify(snap.session), ...snap.pages.map((p) => p.text));
    texts.push((await rawGet(s.url, alice, '/sync/capabilities')).text);
    texts.push(JSON.stringify((await alice.get('/syncx/status')).body));
    // A conflict answer carries the server row: it must not carry the scope either.
    const conflict = await alice.post('/sync/push-sessions', { source_bundle_id: 9, planned_row_count: 1 });
    expectStatus(conflict, 200);
    await alice.post(`/sync/push-sessions/${conflict.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [list(lists[0] as string, 'stale', 0)] });
    const answer = await alice.post(`/sync/push-sessions/${conflict.body.push_id}/commit`);
    expectStatus(answer, 409, 'push_conflict');
    expect(answer.body.conflict.server_row).toMatchObject({ id: lists[0] });
    texts.push(JSON.stringify(answer.body));
    expect(texts.length).toBeGreaterThan(10);
    for (const text of texts) expect(text).not.toContain('_sync_scope_id');
  });

  it('pull parameter checks: after beyond latest is history_pruned, bad numbers are 400', async () => {
    expectStatus(await alice.get('/sync/pull?after_bundle_seq=100000'), 409, 'history_pruned');
    expectStatus(await alice.get('/sync/pull?after_bundle_seq=-1'), 400, 'invalid_request');
    expectStatus(await alice.get('/sync/pull?after_bundle_seq=0&max_bundles=0'), 400, 'invalid_request');
    expectStatus(await alice.get('/sync/pull?after_bundle_seq=5&target_bundle_seq=3'), 400, 'invalid_request');
    // max_bundles above the published maximum is clamped, not an error.
    const big = await alice.get('/sync/pull?after_bundle_seq=0&max_bundles=1000000');
    expectStatus(big, 200);
    // A row ordinal beyond 32 bits is past the end of any bundle: an empty last page, not a 500.
    const far = await alice.get('/sync/committed-bundles/2/rows?after_row_ordinal=3000000000');
    expectStatus(far, 200);
    expect(far.body).toMatchObject({ rows: [], next_row_ordinal: 3000000000, has_more: false });
  });

  it('watch wakes on a commit, answers at once when already behind, and times out with changed: false', async () => {
    // The only upper bound is each poll's own deadline (the longest wait the server allows):
    // a wake-up or an immediate answer ends long before it, whatever the load; lower bounds are
    // safe (load only adds time).
    const deadlineMs = defaultLimits.watchMaxWaitSeconds * 1000;
    const latest = (await committedLog(s, 'alice')).length;
    const started = Date.now();
    const waiting = alice.get(`/sync/watch?after_bundle_seq=${latest}&wait_seconds=${defaultLimits.watchMaxWaitSeconds}`);
    await new Promise((r) => setTimeout(r, 500));
    await serverLists(s.t.db, 'alice', 1);
    const woke = await waiting;
    const answeredAt = Date.now();
    expectStatus(woke, 200);
    expect(woke.body).toEqual({ latest_bundle_seq: latest + 1, changed: true });
    expect(answeredAt - started).toBeLessThan(deadlineMs);
    expect(answeredAt - started).toBeGreaterThanOrEqual(500);
    // Already behind: immediate.
    const t0 = Date.now();
    expect((await alice.get(`/sync/watch?after_bundle_seq=0&wait_seconds=${defaultLimits.watchMaxWaitSeconds}`)).body).toEqual({ latest_bundle_seq: latest + 1, changed: true });
    expect(Date.now() - t0).toBeLessThan(deadlineMs);
    // Nothing new: changed false after (never before) wait_seconds.
    const t1 = Date.now();
    const idle = await alice.get(`/sync/watch?after_bundle_seq=${latest + 1}&wait_seconds=1`);
    expectStatus(idle, 200);
    expect(idle.body).toEqual({ latest_bundle_seq: latest + 1, changed: false });
    expect(Date.now() - t1).toBeGreaterThanOrEqual(900);
  });

  it('round trips: a pull page, a snapshot chunk and a committed-bundle page each take ≤ 2', async () => {
    await alice.get('/sync/capabilities'); // warm-up: the container loads its catalog once
    const pull = await alice.get('/sync/pull?after_bundle_seq=0&max_bundles=5');
    const rows = await alice.get('/sync/committed-bundles/2/rows?max_rows=2');
    const snap = await alice.post('/sync/snapshot-sessions');
    const chunk = await alice.get(`/sync/snapshot-sessions/${snap.body.snapshot_id}?max_rows=5`);
    for (const answer of [pull, rows, snap, chunk]) expectStatus(answer, 200);
    console.log(`round trips: pull page ${pull.roundTrips}, committed-bundle page ${rows.roundTrips}, snapshot create ${snap.roundTrips}, snapshot chunk ${chunk.roundTrips}`);
    expect(pull.roundTrips).toBeLessThanOrEqual(2);
    expect(rows.roundTrips).toBeLessThanOrEqual(2);
    expect(chunk.roundTrips).toBeLessThanOrEqual(2);
    expect(pull.roundTrips).toBeGreaterThan(0);
  });
});

describe('history_pruned after pruning (retained_bundles_per_user = 3)', () => {
  let s: TestServer;
  let alice: ApiClient;
  const retained = 3;
  beforeAll(async () => {
    s = await startTestServer({ env: { SYNC_LIMIT_RETAINED_BUNDLES_PER_USER: String(retained) } });
    alice = s.client('alice');
    await initEmpty(alice);
    for (let i = 1; i <= 4; i++) await pushOk(alice, [list(uuid(), `l${i}`)], { sourceBundleId: i });
    for (let i = 0; i < 3; i++) await serverLists(s.t.db, 'alice', 2, retained);
  });
  afterAll(async () => s?.close());

  it('a checkpoint below the retained floor (including 0) is history_pruned, before and after maintenance', async () => {
    // 7 bundles, 3 retained: bundles 1..4 are below the floor.
    const status = async (): Promise<number> => Number((await alice.get('/syncx/status')).body.error_counters.history_pruned);
    const before = await status();
    for (const after of [0, 3]) {
      const answer = await alice.get(`/sync/pull?after_bundle_seq=${after}`);
      expectStatus(answer, 409, 'history_pruned');
      expect(answer.body.retained_floor).toBe(4);
    }
    expectStatus(await alice.get('/sync/committed-bundles/2/rows'), 409, 'history_pruned');
    expect(await status()).toBe(before + 3);
    const ok = await pullAll(s.url, alice, 4);
    expect(ok.bundles.map((b) => b.bundle_seq)).toEqual([5, 6, 7]);

    const limits = limitsFromEnv({ SYNC_LIMIT_RETAINED_BUNDLES_PER_USER: String(retained) });
    const totals = await runMaintenance(s.t.db, limits);
    expect(totals.finished).toBe(true);
    expect(totals.bundle_rows).toBe(4);
    const { rows } = await s.t.exec(`SELECT min(bundle_seq)::int AS lo, count(*)::int AS n FROM sync.bundle_log`);
    expect(rows[0]).toEqual({ lo: 5, n: 3 });
    expectStatus(await alice.get('/sync/pull?after_bundle_seq=0'), 409, 'history_pruned');
    expectStatus(await alice.get('/sync/pull?after_bundle_seq=3'), 409, 'history_pruned');
    expectStatus(await alice.get('/sync/committed-bundles/4/rows'), 409, 'history_pruned');
    expect((await pullAll(s.url, alice, 4)).bundles.map((b) => b.bundle_seq)).toEqual([5, 6, 7]);
    // A snapshot rebuild lands at the latest bundle; pulling on from there works.
    const snap = await snapshotAll(s.url, alice);
    expect(snap.session.snapshot_bundle_seq).toBe(7);
    expect(snap.rows).toHaveLength(10);
    expectStatus(await alice.get('/sync/pull?after_bundle_seq=7'), 200);
  });
});

describe('rows_omitted under a small response budget', () => {
  const maxResponseBytes = 16 * 1024;
  let s: TestServer;
  let alice: ApiClient;
  beforeAll(async () => {
    s = await startTestServer({ env: { SYNC_LIMIT_MAX_RESPONSE_BYTES: String(maxResponseBytes) } });
    alice = s.client('alice');
    await initEmpty(alice);
    // 1: small; 2: ~60 kB (too large for one response); 3, 4: small.
    await pushOk(alice, [list(uuid(), 'small one')], { sourceBundleId: 1 });
    const big = uuid();
    await pushOk(alice, [list(big, 'big'), ...Array.from({ length: 120 }, (_, i) => item(uuid(), big, `${i} ${'x'.repeat(400)}`))], { sourceBundleId: 2 });
    await pushOk(alice, [list(uuid(), 'small three')], { sourceBundleId: 3 });
    await pushOk(alice, [list(uuid(), 'small four \u00e9\ud83d\ude00'.repeat(20))], { sourceBundleId: 4 });
  });
  afterAll(async () => s?.close());

  it('a bundle larger than the budget comes with rows: [] and rows_omitted, and is completed page by page', async () => {
    const pulled = await pullAll(s.url, alice, 0); // completes omitted bundles from committed-bundle rows
    expect(pulled.bundles.map((b) => b.row_count)).toEqual([1, 121, 1, 1]);
    const omitted = pulled.pages.flatMap((p) => p.body.bundles.filter((b: any) => b.rows_omitted).map((b: any) => b.bundle_seq));
    expect(omitted).toEqual([2]);
    for (const page of pulled.pages) expect(page.bytes).toBeLessThanOrEqual(maxResponseBytes);
    const pages: RawAnswer[] = [];
    const rows = await bundleRows(s.url, alice, 2, undefined, pages);
    expect(rows).toHaveLength(121);
    expect(pages.length).toBeGreaterThan(3);
    for (const page of pages) expect(page.bytes).toBeLessThanOrEqual(maxResponseBytes);
  });

  it('snapshot chunks stay within the budget too', async () => {
    const snap = await snapshotAll(s.url, alice);
    expect(snap.rows).toHaveLength(124);
    expect(snap.pages.length).toBeGreaterThan(3);
    for (const page of snap.pages) expect(page.bytes).toBeLessThanOrEqual(maxResponseBytes);
  });
});
