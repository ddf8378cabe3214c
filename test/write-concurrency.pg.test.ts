/**
 * Issue 4 (write path): commits under failure and concurrency, and the SQL round trips each
 * write endpoint costs (docs/protocol.md §1: over a pooled database in Lambda they are the latency).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { startTestServer, type ApiAnswer, type TestServer } from './support/server.js';
import { committedRows, del, expectStatus, initEmpty, item, list, push, pushOk, requestHash, uuid } from './support/write-helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('write path: failures, concurrency and round trips', () => {
  let s: TestServer;
  /** When set, the next commit's answer is replaced by a 503, as if the response was lost. */
  let loseNextCommitAnswer = false;
  beforeAll(async () => {
    s = await startTestServer({
      intercept: async (event, next) => {
        const answer = await next();
        if (loseNextCommitAnswer && event.rawPath.endsWith('/commit')) {
          loseNextCommitAnswer = false;
          return { statusCode: 503, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: 'commit_outcome_unknown', message: 'lost' }) };
        }
        return answer;
      },
    });
  });
  afterAll(async () => s?.close());

  /** Waits until a backend runs `fragment` and matches `where` (pg_stat_activity columns). */
  async function backendPid(fragment: string, where: string): Promise<number> {
    for (let i = 0; i < 200; i++) {
      const r = await s.t.exec(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE $1 AND ${where}`,
        [`%${fragment}%`],
      );
      if (r.rows[0]) return r.rows[0].pid as number;
      await sleep(25);
    }
    throw new Error(`no backend running ${fragment} with ${where}`);
  }

  it('a connection cut during commit answers 503 commit_outcome_unknown; the retry converges to one bundle', async () => {
    const c = s.client('k-cut', 'k-cut-dev');
    await initEmpty(c);
    // A business trigger that stalls the commit so the test can cut its connection mid-statement.
    await s.t.exec(`
      CREATE FUNCTION public.test_stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$;
      CREATE TRIGGER test_stall AFTER INSERT ON app.items FOR EACH ROW WHEN (NEW.body = 'stall') EXECUTE FUNCTION public.test_stall();`);
    const listId = uuid();
    const rows = [list(listId, 'cut'), item(uuid(), listId, 'stall')];
    const hash = requestHash(rows);
    const created = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 2, request_hash: hash });
    expectStatus(await c.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows }), 200);
    const commit = c.post(`/sync/push-sessions/${created.body.push_id}/commit`);
    const pid = await backendPid('sync.push_commit', `wait_event = 'PgSleep'`);
    await s.t.exec(`SELECT pg_terminate_backend($1)`, [pid]);
    const answer = await commit;
    expectStatus(answer, 503, 'commit_outcome_unknown');
    expect(answer.body.message).toMatch(/retry from push-session create/);
    await s.t.exec(`DROP TRIGGER test_stall ON app.items; DROP FUNCTION public.test_stall()`);

    // Retry from create with the frozen source_bundle_id and request hash.
    const retry = await push(c, rows, { sourceBundleId: 1, requestHash: hash });
    expectStatus(retry, 200);
    expect(retry.body).toMatchObject({ status: 'committed', bundle_seq: 1, source_bundle_id: 1, row_count: 2 });
    // A second retry (say its answer was lost too) converges without uploading anything.
    const again = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 2, request_hash: hash });
    expect(again.body).toEqual({ ...retry.body, status: 'already_committed' });
    const counts = await s.t.exec(`
      SELECT (SELECT count(*)::int FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = 'k-cut') AS bundles,
             (SELECT count(*)::int FROM app.items WHERE _sync_scope_id = 'k-cut') AS items`);
    expect(counts.rows[0]).toEqual({ bundles: 1, items: 1 });
  });

  it('an answer lost after a successful commit: the retry from create answers already_committed', async () => {
    const c = s.client('k-lost', 'k-lost-dev');
    await initEmpty(c);
    const rows = [list(uuid(), 'lost answer')];
    loseNextCommitAnswer = true;
    const lost = await push(c, rows, { sourceBundleId: 1 });
    expectStatus(lost, 503, 'commit_outcome_unknown');
    const retry = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(rows) });
    expectStatus(retry, 200);
    expect(retry.body).toMatchObject({ status: 'already_committed', bundle_seq: 1, source_bundle_id: 1, row_count: 1 });
    const { rows: got } = await committedRows(c, 1);
    expect(got).toHaveLength(1);
  });

  it('20 concurrent committers of one user get bundle_seq 1..20 without a gap', async () => {
    const user = 'k-many';
    await initEmpty(s.client(user, 'k-many-init'));
    const clients = Array.from({ length: 20 }, (_, i) => s.client(user, `k-many-${i}`));
    const answers = await Promise.all(clients.map((c, i) => pushOk(c, [list(uuid(), `from ${i}`)], { sourceBundleId: 1 })));
    expect(answers.map((a) => a.bundle_seq).sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(new Set(answers.map((a) => a.source_id)).size).toBe(20);
    const log = await s.t.exec(`SELECT b.bundle_seq::int AS seq FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1 ORDER BY 1`, [user]);
    expect(log.rows.map((r) => r.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const pulled = await clients[0]!.get('/sync/pull?after_bundle_seq=0');
    expect(pulled.body.bundles.map((b: any) => b.bundle_seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    // Each row's version is its bundle's sequence.
    for (const b of pulled.body.bundles) expect(b.rows[0].row_version).toBe(b.bundle_seq);
  });

  it('different users do not block each other', async () => {
    const a = s.client('k-block-a', 'k-block-a-dev');
    const b = s.client('k-block-b', 'k-block-b-dev');
    await initEmpty(a);
    await initEmpty(b);
    const created = await a.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    await a.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [list(uuid(), 'a')] });
    // Hold user A's state row, as a long commit of A would.
    const locker = new pg.Client({ connectionString: s.t.url });
    await locker.connect();
    try {
      await locker.query(`BEGIN; SELECT 1 FROM sync.user_state WHERE user_id = 'k-block-a' FOR UPDATE`);
      let settled: ApiAnswer | undefined;
      const commitA = a.post(`/sync/push-sessions/${created.body.push_id}/commit`).then((r) => (settled = r));
      await backendPid('sync.push_commit', `wait_event_type = 'Lock'`);
      // B commits while A still waits on the lock (an order, not a time): had B waited for A's
      // row it would answer 503 at the lock bound instead.
      const committedB = await pushOk(b, [list(uuid(), 'b')], { sourceBundleId: 1 });
      expect(committedB.bundle_seq).toBe(1);
      expect(settled).toBeUndefined();
      await locker.query('ROLLBACK');
      const answerA = await commitA;
      expectStatus(answerA, 200);
      expect(answerA.body.bundle_seq).toBe(1);
    } finally {
      await locker.end();
    }
  });

  it('round trips per endpoint', async () => {
    const c = s.client('k-rt', 'k-rt-dev');
    await c.get('/sync/capabilities'); // warms the catalog cache
    const trips: Record<string, number> = {};
    const record = (name: string, answer: ApiAnswer, status: number) => {
      expectStatus(answer, status);
      trips[name] = Math.max(trips[name] ?? 0, answer.roundTrips);
    };
    record('connect', await c.post('/sync/connect', { has_local_pending_rows: false }), 200);
    const listId = uuid();
    const rows = [list(listId, 'rt'), ...Array.from({ length: 500 }, (_, i) => item(uuid(), listId, `row ${i}`))];
    const created = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: rows.length, request_hash: requestHash(rows) });
    record('create', created, 200);
    const base = `/sync/push-sessions/${created.body.push_id}`;
    record('chunk', await c.post(`${base}/chunks`, { start_row_ordinal: 0, rows: rows.slice(0, 250) }), 200);
    record('chunk', await c.post(`${base}/chunks`, { start_row_ordinal: 250, rows: rows.slice(250) }), 200);
    record('chunk (idempotent re-send)', await c.post(`${base}/chunks`, { start_row_ordinal: 250, rows: rows.slice(250) }), 200);
    const committed = await c.post(`${base}/commit`);
    record('commit', committed, 200);
    record('commit (again)', await c.post(`${base}/commit`), 200);
    record('create (already committed)', await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: rows.length, request_hash: requestHash(rows) }), 200);
    record('committed rows', await c.get(`/sync/committed-bundles/${committed.body.bundle_seq}/rows?max_rows=100`), 200);
    record('commit (conflict)', await push(c, [list(listId, 'stale')], { sourceBundleId: 2 }), 409);
    record('commit (rejected)', await push(c, [item(uuid(), uuid(), 'orphan')], { sourceBundleId: 2 }), 422);
    const doomed = await c.post('/sync/push-sessions', { source_bundle_id: 2, planned_row_count: 1 });
    record('delete', await c.del(`/sync/push-sessions/${doomed.body.push_id}`), 204);
    record('commit (delete row)', await push(c, [del('lists', { id: listId }, committed.body.bundle_seq)], { sourceBundleId: 2 }), 200);
    console.log('write path round trips per endpoint', trips);
    for (const name of ['connect', 'chunk', 'commit', 'commit (conflict)', 'commit (rejected)']) expect(trips[name], name).toBeLessThanOrEqual(2);
    for (const name of ['create', 'create (already committed)', 'commit (again)', 'delete', 'committed rows', 'chunk (idempotent re-send)']) expect(trips[name], name).toBeLessThanOrEqual(1);
    for (const value of Object.values(trips)) expect(value).toBeGreaterThanOrEqual(1);
  });
});
