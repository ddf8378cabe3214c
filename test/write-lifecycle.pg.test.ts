/**
 * Issue 4 (write path): the first-connect lifecycle (docs/protocol.md §5.1) and the scope failures a
 * push meets while a scope is uninitialized, initializing, superseded or expired.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/server.js';
import { expectStatus, list, push, pushOk, uuid } from './support/write-helpers.js';

describe('write path: connect lifecycle and scope failures', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  it('initialize_empty for a device with nothing; then remote_authoritative for everyone', async () => {
    const a = s.client('life-empty', 'dev-a');
    const first = await a.post('/sync/connect', { has_local_pending_rows: false });
    expectStatus(first, 200);
    expect(first.body).toEqual({ resolution: 'initialize_empty', initialization_id: null, lease_expires_at: null });
    const b = s.client('life-empty', 'dev-b');
    for (const pending of [true, false]) {
      const again = await b.post('/sync/connect', { has_local_pending_rows: pending });
      expectStatus(again, 200);
      expect(again.body).toEqual({ resolution: 'remote_authoritative', initialization_id: null, lease_expires_at: null });
    }
    // An initialized-empty scope takes pushes without an initialization_id.
    await pushOk(b, [list(uuid(), 'after empty init')], { sourceBundleId: 1 });
  });

  it('initialize_local holds a lease; the holder renews it with the same id; others get retry_later', async () => {
    const user = 'life-local';
    const a = s.client(user, 'dev-a');
    const b = s.client(user, 'dev-b');
    const first = await a.post('/sync/connect', { has_local_pending_rows: true });
    expectStatus(first, 200);
    expect(first.body.resolution).toBe('initialize_local');
    expect(first.body.initialization_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(first.body.lease_expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    const leaseMs = Date.parse(first.body.lease_expires_at) - Date.now();
    expect(leaseMs).toBeGreaterThan(800_000); // the default 900 s lease
    expect(leaseMs).toBeLessThanOrEqual(901_000);

    // Another device: retry_later, with a positive retry_after_seconds no longer than the lease.
    for (const pending of [true, false]) {
      const other = await b.post('/sync/connect', { has_local_pending_rows: pending });
      expectStatus(other, 200);
      expect(other.body.resolution).toBe('retry_later');
      expect(other.body.initialization_id).toBeNull();
      expect(Number.isInteger(other.body.retry_after_seconds)).toBe(true);
      expect(other.body.retry_after_seconds).toBeGreaterThan(800);
      expect(other.body.retry_after_seconds).toBeLessThanOrEqual(900);
    }

    // The holder reconnecting with pending rows keeps its id and gets a renewed lease.
    await s.t.operator(`UPDATE sync.scope_state SET lease_expires_at = now() + interval '100 seconds'
                     WHERE user_id = (SELECT user_id FROM sync.user_state WHERE user_id = $1)`, [user]);
    const renewed = await a.post('/sync/connect', { has_local_pending_rows: true });
    expectStatus(renewed, 200);
    expect(renewed.body.resolution).toBe('initialize_local');
    expect(renewed.body.initialization_id).toBe(first.body.initialization_id);
    expect(Date.parse(renewed.body.lease_expires_at) - Date.now()).toBeGreaterThan(800_000);

    // While initializing: another source's push is scope_initializing (409, retry-after).
    const blocked = await push(b, [list(uuid(), 'x')], { sourceBundleId: 1 });
    expectStatus(blocked, 409, 'scope_initializing');
    expect(blocked.body.retry_after_seconds).toBeGreaterThan(0);
    expect(Number(blocked.headers.get('retry-after'))).toBe(blocked.body.retry_after_seconds);

    // The holder without, or with a wrong, initialization_id: initialization_stale.
    expectStatus(await push(a, [list(uuid(), 'x')], { sourceBundleId: 1 }), 409, 'initialization_stale');
    expectStatus(await push(a, [list(uuid(), 'x')], { sourceBundleId: 1, initializationId: uuid() }), 409, 'initialization_stale');

    // The holder's push with its id initializes the scope; afterwards others are remote_authoritative.
    const committed = await pushOk(a, [list(uuid(), 'local data')], { sourceBundleId: 1, initializationId: first.body.initialization_id });
    expect(committed.bundle_seq).toBe(1);
    const after = await b.post('/sync/connect', { has_local_pending_rows: true });
    expect(after.body.resolution).toBe('remote_authoritative');
    // A push naming an initialization that did not initialize the scope is stale; none is fine.
    expectStatus(await push(b, [list(uuid(), 'x')], { sourceBundleId: 1, initializationId: uuid() }), 409, 'initialization_stale');
    await pushOk(b, [list(uuid(), 'x')], { sourceBundleId: 1 });
  });

  it('scope_uninitialized before any connect (create and read paths)', async () => {
    const c = s.client('life-none', 'dev-a');
    const answer = await push(c, [list(uuid(), 'x')], { sourceBundleId: 1 });
    expectStatus(answer, 409, 'scope_uninitialized');
    expect(answer.body.message).toMatch(/connect/);
  });

  it('a lapsed lease: 410 for its holder, uninitialized for others, and another device may take it over', async () => {
    const user = 'life-expire';
    const a = s.client(user, 'dev-a');
    const b = s.client(user, 'dev-b');
    const first = await a.post('/sync/connect', { has_local_pending_rows: true });
    const init = first.body.initialization_id as string;
    // A session created under the live lease, committed after it lapsed: 410 on commit.
    const create = await a.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1, initialization_id: init });
    expectStatus(create, 200);
    const listId = uuid();
    expectStatus(await a.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [list(listId, 'late')] }), 200);
    await s.t.operator(`UPDATE sync.scope_state SET lease_expires_at = now() - interval '1 second'
                     WHERE user_id = (SELECT user_id FROM sync.user_state WHERE user_id = $1)`, [user]);
    const late = await a.post(`/sync/push-sessions/${create.body.push_id}/commit`);
    expectStatus(late, 410, 'initialization_expired');
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM app.lists WHERE id = $1`, [listId])).rows[0].n).toBe(0);
    // Creating a session with the lapsed lease: 410 as well.
    expectStatus(await push(a, [list(uuid(), 'x')], { sourceBundleId: 1, initializationId: init }), 410, 'initialization_expired');
    // Another source is no longer told to wait: the scope is uninitialized again.
    expectStatus(await push(b, [list(uuid(), 'x')], { sourceBundleId: 1 }), 409, 'scope_uninitialized');
    // And it may take the lease over: it gets a new id; the old holder's id is now stale.
    const takeover = await b.post('/sync/connect', { has_local_pending_rows: true });
    expectStatus(takeover, 200);
    expect(takeover.body.resolution).toBe('initialize_local');
    expect(takeover.body.initialization_id).not.toBe(init);
    const stale = await push(a, [list(uuid(), 'x')], { sourceBundleId: 1, initializationId: init });
    expectStatus(stale, 409, 'scope_initializing');
    const retry = await a.post('/sync/connect', { has_local_pending_rows: true });
    expect(retry.body.resolution).toBe('retry_later');
  });

  it('a tiny lease TTL from the environment expires for real', async () => {
    const tiny = await startTestServer({ env: { SYNC_LIMIT_INITIALIZATION_LEASE_TTL_SECONDS: '1' } });
    try {
      const a = tiny.client('life-tiny', 'dev-a');
      const first = await a.post('/sync/connect', { has_local_pending_rows: true });
      expect(first.body.resolution).toBe('initialize_local');
      expect(Date.parse(first.body.lease_expires_at) - Date.now()).toBeLessThanOrEqual(1_100);
      // (Another source told to wait while a lease holds is the first test's; a second request
      // here could arrive after the 1 s lease on a loaded machine.)
      await new Promise((r) => setTimeout(r, 1_200));
      const expired = await push(a, [list(uuid(), 'x')], { sourceBundleId: 1, initializationId: first.body.initialization_id });
      expectStatus(expired, 410, 'initialization_expired');
      // The lapsed holder reconnecting gets a fresh lease and a new id.
      const again = await a.post('/sync/connect', { has_local_pending_rows: true });
      expect(again.body.resolution).toBe('initialize_local');
      expect(again.body.initialization_id).not.toBe(first.body.initialization_id);
      // The superseded id is now stale for its own source.
      expectStatus(await push(a, [list(uuid(), 'x')], { sourceBundleId: 1, initializationId: first.body.initialization_id }), 409, 'initialization_stale');
    } finally {
      await tiny.close();
    }
  });
});
