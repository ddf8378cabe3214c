/**
 * Issue 10, exactly-once commit through the real client: the database connection of a commit is
 * cut by terminating its backend from a second connection while the commit statement runs, while
 * deferred constraints fire at its end, and after it committed (the answer lost on the way back).
 * Every retry converges to one bundle, never two, and never zero when the first one committed.
 * Both ways a client commits: the staged session (create, chunk, commit) and the one request
 * whose create carries the rows (`single_request_push`), which stages and commits at once.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConverged, openDevice, serverState, write, type Device } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uuid = () => randomUUID();

/** A request that commits: a session's commit, or a create that carries its rows. */
function commits(event: { rawPath: string; body?: string }): boolean {
  if (event.rawPath.endsWith('/commit')) return true;
  return event.rawPath.endsWith('/push-sessions') && Array.isArray((JSON.parse(event.body ?? '{}') as { rows?: unknown }).rows);
}

for (const oneRequest of [false, true]) describe(`exactly-once commit under connection cuts (${oneRequest ? 'one request' : 'staged session'})`, () => {
  let s: TestServer;
  /** When set, the next commit answer is replaced by a failure after the commit ran (the answer is lost). */
  let dropNextCommitAnswer = false;
  /** Each commit's answer, by status and code, in order. */
  const commitAnswers: string[] = [];
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({
      intercept: async (event, next) => {
        const answer = (await next()) as { statusCode: number; body?: string };
        if (commits(event)) commitAnswers.push(`${answer.statusCode} ${String(JSON.parse(answer.body ?? '{}').error ?? '')}`.trim());
        if (dropNextCommitAnswer && commits(event)) {
          dropNextCommitAnswer = false;
          throw new Error('injected: the connection broke after the commit');
        }
        return answer;
      },
    });
    // Stalls once per sequence: the first commit that reaches it sleeps (and is cut); retries pass.
    // A sequence, because the cut transaction rolls back everything transactional.
    await s.t.exec(`
      CREATE SEQUENCE public.stall_in_statement;
      CREATE SEQUENCE public.stall_at_end;
      CREATE FUNCTION public.stall_once() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval(TG_ARGV[0]::regclass) = 1 THEN PERFORM pg_sleep(30); END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER stall_in_statement AFTER INSERT ON app.items FOR EACH ROW
        WHEN (NEW.body = 'stall in statement') EXECUTE FUNCTION public.stall_once('public.stall_in_statement');
      CREATE CONSTRAINT TRIGGER stall_at_end AFTER INSERT ON app.items DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
        WHEN (NEW.body = 'stall at end') EXECUTE FUNCTION public.stall_once('public.stall_at_end');`);
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  async function terminateWhenStalled(): Promise<void> {
    for (let i = 0; i < 400; i++) {
      const r = await s.t.exec(
        `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event = 'PgSleep' AND query LIKE '%push_commit%'`);
      if (r.rows.some((row) => row.done)) return;
      await sleep(25);
    }
    throw new Error('no stalled commit to cut');
  }

  async function bundlesOf(user: string): Promise<{ source_id: string; source_bundle_id: number; n: number }[]> {
    const r = await s.t.exec(
      `SELECT source_id, source_bundle_id::int, count(*)::int AS n FROM sync.bundle_log b JOIN sync.user_state u USING (user_id)
        WHERE u.user_id = $1 GROUP BY 1, 2 ORDER BY 2`, [user]);
    return r.rows;
  }

  for (const [when, body] of [['while the commit statement runs', 'stall in statement'], ['while deferred constraints fire at its end', 'stall at end']] as const) {
    it(`a cut ${when}: commit_outcome_unknown, and the retry commits exactly once`, async () => {
      const user = `u-cut-${body.replaceAll(' ', '-')}`;
      const a = await openDevice(s, user, { config: { pushInOneRequest: oneRequest } });
      const b = await openDevice(s, user);
      devices.push(a, b);
      await a.client.attach(user);
      await b.client.attach(user);
      const listId = uuid();
      await write.list(a.db, listId, 'cut');
      await write.item(a.db, uuid(), listId, body);
      const from = commitAnswers.length;
      const pushing = a.client.pushPending();
      await terminateWhenStalled();
      const result = await pushing;
      expect(result).toMatchObject({ status: 'committed', sourceBundleId: 1, rowCount: 2, alreadyCommitted: false });
      // The cut commit was answered as unknown; the retry (from session create) committed.
      expect(commitAnswers.slice(from)).toEqual(['503 commit_outcome_unknown', '200']);
      expect(await bundlesOf(user)).toEqual([{ source_id: (await a.client.pendingStatus()).sourceId, source_bundle_id: 1, n: 1 }]);
      await b.client.sync();
      const state = await expectConverged(s, user, a, b);
      expect(Object.values(state.items).map((i) => i.body)).toEqual([body]);
    });
  }

  it('a cut after the commit (its answer lost): the retry answers the same bundle, not a second one', async () => {
    const user = 'u-cut-after';
    const a = await openDevice(s, user, { config: { pushInOneRequest: oneRequest } });
    devices.push(a);
    await a.client.attach(user);
    const listId = uuid();
    await write.list(a.db, listId, 'after');
    dropNextCommitAnswer = true;
    const from = commitAnswers.length;
    const result = await a.client.pushPending();
    expect(dropNextCommitAnswer).toBe(false);
    // Committed, its answer lost, and the commit retried: the same bundle answered again (by the
    // commit of the same session, or by the create that carried the rows: already committed).
    expect(commitAnswers.slice(from)).toEqual(['200', '200']);
    expect(result).toMatchObject({ status: 'committed', sourceBundleId: 1, rowCount: 1 });
    expect((await bundlesOf(user)).map((b) => b.n)).toEqual([1]);
    expect(Object.keys((await serverState(s, user)).lists)).toEqual([listId]);
    expect(await a.client.pendingStatus()).toMatchObject({ dirtyRows: 0, frozenRows: 0, nextSourceBundleId: 2, checkpoint: 1 });
  });
});
