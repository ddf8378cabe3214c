/**
 * Issue 15 item 7, per-user caps (protocol §8): open push sessions, open snapshot sessions and
 * staged bytes per user. Over a cap: 429 rate_limited with Retry-After, nothing stored, other users
 * unaffected; committing, deleting or expiring a session (maintenance, which the local runtime
 * runs on a timer as Lambda's schedule does) gives the room back. The caps are published in
 * capabilities' bundle_limits and kept as counters per user, so enforcing them reads no session
 * table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type ApiAnswer, type ApiClient, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, list, pushOk, requestHash, uuid } from './support/write-helpers.js';
import { runMaintenance } from '../core/sync/index.js';
import { defaultLimits } from '../core/limits.js';
import { HANG_MS, until } from './support/until.js';

/** Ages a session past its expiry, as time would (under the lock operators take for repairs). */
async function expire(s: TestServer, table: 'push_sessions' | 'snapshot_sessions', id: string): Promise<void> {
  const column = table === 'push_sessions' ? 'push_id' : 'snapshot_id';
  await s.t.exec(`BEGIN; SELECT pg_advisory_xact_lock(7020140421);
    UPDATE sync.${table} SET expires_at = now() - interval '1 second' WHERE ${column} = '${id}'; COMMIT`);
}

describe('per-user caps', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({
      env: {
        SYNC_LIMIT_MAX_OPEN_PUSH_SESSIONS_PER_USER: '3',
        SYNC_LIMIT_MAX_OPEN_SNAPSHOT_SESSIONS_PER_USER: '2',
        SYNC_LIMIT_MAX_STAGED_BYTES_PER_USER: '3000',
        // A bundle never exceeds what one user may stage (core/limits.ts asserts it).
        SYNC_LIMIT_MAX_BYTES_PER_BUNDLE: '3000',
        SYNC_LIMIT_MAINTENANCE_INTERVAL_SECONDS: '1',
      },
      maintenance: true,
    });
  });
  afterAll(async () => s?.close());

  async function user(name: string): Promise<ApiClient> {
    const c = s.client(name);
    await initEmpty(c);
    return c;
  }

  const createPush = (c: ApiClient, sourceBundleId = 1) => c.post('/sync/push-sessions', { source_bundle_id: sourceBundleId, planned_row_count: 10 });

  it('capabilities publish the caps in bundle_limits', async () => {
    const caps = await s.client('caps-reader').get('/sync/capabilities');
    expectStatus(caps, 200);
    expect(caps.body.bundle_limits).toMatchObject({
      max_open_push_sessions_per_user: 3,
      max_open_snapshot_sessions_per_user: 2,
      max_staged_bytes_per_user: 3000,
    });
  });

  it('open push sessions: 429 with Retry-After over the cap, another user unaffected; delete and commit give room back', async () => {
    const c = await user('cap-push');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await createPush(c);
      expectStatus(created, 200);
      ids.push(created.body.push_id);
    }
    const over = await createPush(c);
    expectStatus(over, 429, 'rate_limited');
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(defaultLimits.pushSessionTtlSeconds - 60);
    expect(retryAfter).toBeLessThanOrEqual(defaultLimits.pushSessionTtlSeconds);
    expect(over.body.message).toMatch(/max_open_push_sessions_per_user/);
    expect((await s.t.exec(`SELECT count(*)::int AS n FROM sync.push_sessions p JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'cap-push'`)).rows[0].n).toBe(3);
    // Another user is not counted against this one.
    expectStatus(await createPush(await user('cap-push-other')), 200);
    // Deleting a session frees its place.
    expectStatus(await c.del(`/sync/push-sessions/${ids[0]}`), 204);
    const replacement = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash([list(uuid(), 'x')]) });
    expectStatus(replacement, 200);
    expectStatus(await createPush(c), 429, 'rate_limited');
    // Committing one frees its place too.
    const rows = [list(uuid(), 'committed')];
    const session = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    expectStatus(session, 429, 'rate_limited');
    expectStatus(await c.del(`/sync/push-sessions/${ids[1]}`), 204);
    const committed = await pushOk(c, rows, { sourceBundleId: 1 });
    expect(committed.bundle_seq).toBe(1);
    expectStatus(await createPush(c, 2), 200);
  });

  it('expired sessions stop counting once maintenance removes them; the local runtime runs it on a timer', async () => {
    const c = await user('cap-expire');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await createPush(c)).body.push_id);
    expectStatus(await createPush(c), 429, 'rate_limited');
    await expire(s, 'push_sessions', ids[0]!);
    // Expired but not yet removed: Retry-After points at the next maintenance run (unless the
    // timer already ran).
    const waiting = await createPush(c);
    if (waiting.status === 429) expect(Number(waiting.headers.get('retry-after'))).toBe(1);
    // The gateway's timer (SYNC_LIMIT_MAINTENANCE_INTERVAL_SECONDS=1) removes it.
    const created = waiting.status === 200 ? waiting : await until('the maintenance timer frees the cap', () => createPush(c), (answer) => answer.status !== 429, HANG_MS, 250);
    expectStatus(created, 200);
  });

  it('staged bytes: a chunk beyond max_staged_bytes_per_user is 429 and stages nothing; commit gives the bytes back', async () => {
    const c = await user('cap-bytes');
    const big = (n: number) => Array.from({ length: n }, () => list(uuid(), 'x'.repeat(200)));
    const a = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 4 });
    expectStatus(a, 200);
    const rowsA = big(4);
    expectStatus(await c.post(`/sync/push-sessions/${a.body.push_id}/chunks`, { start_row_ordinal: 0, rows: rowsA.slice(0, 2) }), 200);
    expectStatus(await c.post(`/sync/push-sessions/${a.body.push_id}/chunks`, { start_row_ordinal: 2, rows: rowsA.slice(2) }), 200);
    const b = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 10 });
    expectStatus(b, 200);
    const rowsB = big(10);
    let staged = 0;
    let refused: ApiAnswer | undefined;
    for (let i = 0; i < 10; i += 2) {
      const chunk = await c.post(`/sync/push-sessions/${b.body.push_id}/chunks`, { start_row_ordinal: i, rows: rowsB.slice(i, i + 2) });
      if (chunk.status !== 200) {
        refused = chunk;
        break;
      }
      staged += 2;
    }
    expect(refused, 'a chunk beyond 3000 staged bytes').toBeDefined();
    expectStatus(refused!, 429, 'rate_limited');
    expect(refused!.body.message).toMatch(/max_staged_bytes_per_user/);
    expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThan(0);
    const stagedRows = async (id: string) => (await s.t.exec(`SELECT count(*)::int AS n FROM sync.push_session_rows WHERE push_id = $1`, [id])).rows[0].n;
    expect(await stagedRows(b.body.push_id)).toBe(staged);
    // Committing the first bundle gives its bytes back, and the refused chunk now goes in.
    expectStatus(await c.post(`/sync/push-sessions/${a.body.push_id}/commit`), 200);
    expectStatus(await c.post(`/sync/push-sessions/${b.body.push_id}/chunks`, { start_row_ordinal: staged, rows: rowsB.slice(staged, staged + 2) }), 200);
  });

  it('a push in one request that stages beyond max_staged_bytes_per_user is 429, and its session (created in the same statement) is dropped', async () => {
    const c = await user('cap-one-request');
    // Six rows of another session stay staged (over 2,000 bytes), so a one-request bundle of three does not fit.
    const a = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 6 });
    expectStatus(a, 200);
    const big = (n: number) => Array.from({ length: n }, () => list(uuid(), 'x'.repeat(200)));
    expectStatus(await c.post(`/sync/push-sessions/${a.body.push_id}/chunks`, { start_row_ordinal: 0, rows: big(6) }), 200);
    const rows = big(3);
    // Another device of the user (its own source) pushes in one request.
    const other = s.client('cap-one-request', 'src-cap-one-request-2');
    await initEmpty(other);
    const refused = await other.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: rows.length, request_hash: requestHash(rows), rows });
    expectStatus(refused, 429, 'rate_limited');
    expect(refused.body.message).toMatch(/max_staged_bytes_per_user/);
    const { rows: left } = await s.t.exec(`
      SELECT count(*) FILTER (WHERE p.status = 'staging')::int AS staging, max(q.open_push_sessions)::int AS open
        FROM sync.user_state u JOIN sync.user_quota q USING (user_id) LEFT JOIN sync.push_sessions p USING (user_id)
       WHERE u.user_id = 'cap-one-request'`);
    expect(left[0]).toEqual({ staging: 1, open: 1 });
  });

  it('open snapshot sessions: 429 over the cap; delete and maintenance give room back', async () => {
    const c = await user('cap-snap');
    const a = await c.post('/sync/snapshot-sessions', {});
    const b = await c.post('/sync/snapshot-sessions', {});
    expectStatus(a, 200);
    expectStatus(b, 200);
    const over = await c.post('/sync/snapshot-sessions', {});
    expectStatus(over, 429, 'rate_limited');
    expect(over.body.message).toMatch(/max_open_snapshot_sessions_per_user/);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(defaultLimits.snapshotSessionTtlSeconds - 60);
    expectStatus(await (await user('cap-snap-other')).post('/sync/snapshot-sessions', {}), 200);
    expectStatus(await c.del(`/sync/snapshot-sessions/${a.body.snapshot_id}`), 204);
    const c2 = await c.post('/sync/snapshot-sessions', {});
    expectStatus(c2, 200);
    await expire(s, 'snapshot_sessions', b.body.snapshot_id);
    await runMaintenance(s.t.db, defaultLimits);
    expectStatus(await c.post('/sync/snapshot-sessions', {}), 200);
  });

  it('counters per user stay equal to the open sessions after all of the above', async () => {
    await runMaintenance(s.t.db, defaultLimits);
    const { rows } = await s.t.exec(`
      SELECT q.user_id, q.open_push_sessions, q.open_snapshot_sessions, q.staged_bytes,
        (SELECT count(*) FROM sync.push_sessions p WHERE p.user_id = q.user_id AND p.status = 'staging')::int AS push,
        (SELECT count(*) FROM sync.snapshot_sessions p WHERE p.user_id = q.user_id)::int AS snap,
        (SELECT coalesce(sum(byte_count), 0) FROM sync.push_sessions p WHERE p.user_id = q.user_id AND p.status = 'staging')::bigint AS bytes
      FROM sync.user_quota q`);
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect([r.open_push_sessions, r.open_snapshot_sessions, String(r.staged_bytes)]).toEqual([r.push, r.snap, String(r.bytes)]);
    }
  });
});
