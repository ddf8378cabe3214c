/**
 * Issue 26 items 5 and 6, through the local gateway over real PostgreSQL:
 * - a commit that never reached the database (its user's part of the pool was full) is
 *   `429 rate_limited`, not `503 commit_outcome_unknown`: nothing was sent, the session stays
 *   staged, the same commit succeeds later without any row uploaded again, and the
 *   commit_outcome_unknown counter does not move;
 * - a flood of unauthenticated `/syncx/status` requests holds one connection at most (coalesced,
 *   on the unauthenticated routes' own place), so a user's pull is served while every one of
 *   them waits on a lock.
 * Counts and orders only: no answer time is asserted.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, list, pushOk, requestHash, uuid } from './support/write-helpers.js';

describe('the pool: nothing sent is no unknown outcome; status floods hold one place', () => {
  let s: TestServer;
  let alice: ApiClient;
  let statusRequests = 0;
  beforeAll(async () => {
    s = await startTestServer({
      env: { SYNC_LIMIT_DB_CONNECT_TIMEOUT_MS: '300' },
      intercept: async (event, next) => {
        if (event.rawPath === '/syncx/status') statusRequests++;
        return next();
      },
    });
    alice = s.client('alice');
    await initEmpty(alice);
    await pushOk(alice, [list(uuid(), 'first')], { sourceBundleId: 1 });
  });
  afterAll(async () => {
    await s?.close();
  });

  const unknownCount = async (): Promise<number> => Number((await s.client('x').get('/syncx/status')).body.error_counters.commit_outcome_unknown);

  it('a commit refused for a full share is 429 rate_limited; the staged session commits later, nothing uploaded again', async () => {
    const rows = [list(uuid(), 'second')];
    const created = await alice.post('/sync/push-sessions', { source_bundle_id: 2, planned_row_count: 1, request_hash: requestHash(rows) });
    expectStatus(created, 200);
    expectStatus(await alice.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows }), 200);
    const before = await unknownCount();
    // Alice's requests hold her whole part of the container's pool.
    const share = s.runtime.db.share;
    expect(share).toBeDefined();
    const held = await Promise.all(Array.from({ length: share?.perOwner ?? 0 }, () => share?.acquire('alice', 1000) as Promise<() => void>));
    const refused = await alice.post(`/sync/push-sessions/${created.body.push_id}/commit`);
    for (const release of held) release();
    expectStatus(refused, 429, 'rate_limited');
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await unknownCount()).toBe(before);
    // The same session, as staged: the commit goes through on its own.
    const committed = await alice.post(`/sync/push-sessions/${created.body.push_id}/commit`);
    expectStatus(committed, 200);
    expect(committed.body).toMatchObject({ status: 'committed', source_bundle_id: 2, row_count: 1 });
  });

  it('32 requests on /syncx/status waiting on a lock hold one connection; a user\'s pull is served meanwhile', async () => {
    await alice.get('/sync/pull?after_bundle_seq=0'); // the catalog is loaded
    const admin = new pg.Client({ connectionString: s.t.url });
    // pg_stat_activity is read outside admin's transaction, as test/timeouts.pg.test.ts reads it.
    const watcher = new pg.Client({ connectionString: s.t.url });
    await admin.connect();
    await watcher.connect();
    try {
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE sync.counter_deltas IN ACCESS EXCLUSIVE MODE');
      const blocked = async (): Promise<number> => (await watcher.query(`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%sync.status_facts%' AND pid <> pg_backend_pid()`)).rows[0].n;
      /** 32 requests, and the number of status reads seen waiting on the lock once all of them have arrived. */
      const flood = async () => {
        statusRequests = 0;
        let answered = false;
        const answers = Promise.all(Array.from({ length: 32 }, () => s.client('anyone').get('/syncx/status'))).finally(() => (answered = true));
        answers.catch(() => undefined); // a flood given up on is not an unhandled rejection; the one kept is awaited
        let waiting = 0;
        while (!answered && (statusRequests < 32 || (waiting = await blocked()) < 1)) await new Promise((resolve) => setImmediate(resolve));
        return { answers, waiting, answered: () => answered };
      };
      // Every request has reached the gateway and one status read waits on the lock. Once, beside a
      // CPU burner, the read ran out its lock bound (503 for all 32) before this saw it waiting;
      // the lock is still held, so another flood waits again.
      let f = await flood();
      for (let attempt = 1; f.answered() && attempt < 3; attempt++) f = await flood();
      expect(f.answered()).toBe(false);
      expect(f.waiting).toBe(1);
      const pulled = await alice.get('/sync/pull?after_bundle_seq=0');
      expectStatus(pulled, 200);
      expect(pulled.body.bundles.length).toBe(2);
      const afterPull = await blocked();
      await admin.query('ROLLBACK');
      // One shared read answered them all: 200 once the lock went, or, on a machine slow enough
      // that the read outlived the lock bound first, the same typed 503 for all 32.
      const answers = await f.answers;
      const first = answers[0]?.status;
      expect([200, 503]).toContain(first);
      expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 32 }, () => first));
      if (first === 503) expect(answers[0]?.body).toMatchObject({ error: 'service_unavailable' });
      // A 200 means the read waited until the rollback, so through the pull too: still one read.
      if (first === 200) expect(afterPull).toBe(1);
      else expect(afterPull).toBeLessThanOrEqual(1);
    } finally {
      await watcher.end();
      await admin.end();
    }
  });
});
