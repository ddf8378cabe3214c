/**
 * Issue 26 item 7: a rejected push session used to stay open, and every repeated commit POST
 * applied the bundle and searched for the offending row again (seconds for a large bundle,
 * without limit). Now the rejection is remembered on the session: a repeated commit answers the
 * same body in one round trip (no apply, no search, no second count), and the session no longer
 * counts against the user's caps. Counts only, no times.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, item, list, pushOk, requestHash, uuid } from './support/write-helpers.js';

describe('a rejected push session remembers its answer', () => {
  let s: TestServer;
  let alice: ApiClient;
  beforeAll(async () => {
    s = await startTestServer();
    alice = s.client('alice');
    await initEmpty(alice);
    await pushOk(alice, [list(uuid(), 'a list')], { sourceBundleId: 1 });
  });
  afterAll(async () => {
    await s?.close();
  });

  const rejectedCount = async (): Promise<number> => Number((await s.client('x').get('/syncx/status')).body.error_counters.push_rejected);
  const openSessions = async (): Promise<number> =>
    (await s.t.exec(`SELECT q.open_push_sessions::int AS n FROM sync.user_quota q JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'alice'`)).rows[0].n;

  it('a repeated commit answers the same rejection in one round trip, counted once; the session stops counting', async () => {
    // 200 good rows and one item whose list does not exist: a foreign-key violation at commit.
    const rows = [...Array.from({ length: 200 }, (_, i) => list(uuid(), `row ${i}`)), item(uuid(), uuid(), 'orphan')];
    const before = { rejected: await rejectedCount(), open: await openSessions() };
    const created = await alice.post('/sync/push-sessions', { source_bundle_id: 2, planned_row_count: rows.length, request_hash: requestHash(rows) });
    expectStatus(created, 200);
    expectStatus(await alice.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows }), 200);
    expect(await openSessions()).toBe(before.open + 1);
    const first = await alice.post(`/sync/push-sessions/${created.body.push_id}/commit`);
    expectStatus(first, 422, 'push_rejected');
    expect(first.body.violation.key).toEqual({ id: rows[200]?.key.id });
    expect(first.roundTrips).toBeGreaterThanOrEqual(2);
    for (let i = 0; i < 3; i++) {
      const again = await alice.post(`/sync/push-sessions/${created.body.push_id}/commit`);
      expectStatus(again, 422, 'push_rejected');
      expect(again.body).toEqual(first.body);
      expect(again.roundTrips).toBe(1);
    }
    expect(await rejectedCount()).toBe(before.rejected + 1);
    // Closed: it holds none of the user's sessions or staged bytes, nor its staged rows.
    expect(await openSessions()).toBe(before.open);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.push_session_rows WHERE push_id = $1`, [created.body.push_id])).rows[0].n).toBe(0);
    // The same source bundle id, fixed, commits through a new session.
    await pushOk(alice, rows.slice(0, 200), { sourceBundleId: 2 });
  });
});
