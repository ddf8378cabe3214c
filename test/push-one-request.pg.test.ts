/**
 * A push in one request (protocol §5.2, `single_request_push`, issue 24 item 4): a push-session
 * create that carries the whole bundle stages and commits it at once and answers as commit does;
 * repeated after a lost answer it is `already_committed`; a conflict, a rejection or rows the
 * server refuses answer as they would from a chunk or a commit, and leave no session staged or
 * counted against the user; rows that are not the whole bundle are refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, item, list, pushOk, requestHash, uuid, type PushRow } from './support/write-helpers.js';

describe('a push in one request', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  const create = (c: ApiClient, rows: readonly PushRow[], sourceBundleId: number, extra: Record<string, unknown> = {}) =>
    c.post('/sync/push-sessions', { source_bundle_id: sourceBundleId, planned_row_count: rows.length, request_hash: requestHash(rows), rows, ...extra });

  /** Staging sessions of the user and what they count against the user's caps. */
  async function staged(userId: string): Promise<{ sessions: number; open: number; bytes: number }> {
    const r = await s.t.exec(
      `SELECT (SELECT count(*)::int FROM sync.push_sessions p WHERE p.user_id = u.user_id AND p.status = 'staging') AS sessions,
              coalesce(q.open_push_sessions, 0)::int AS open, coalesce(q.staged_bytes, 0)::int AS bytes
         FROM sync.user_state u LEFT JOIN sync.user_quota q USING (user_id) WHERE u.user_id = $1`, [userId]);
    return r.rows[0] as { sessions: number; open: number; bytes: number };
  }

  it('is announced in capabilities', async () => {
    const caps = await s.client('one-caps').get('/sync/capabilities');
    expect(caps.body.features.single_request_push).toBe(true);
  });

  it('commits the bundle and answers as commit does; the same request again is already_committed', async () => {
    const c = s.client('one-commit', 'src-one');
    await initEmpty(c);
    const listId = uuid();
    const rows = [list(listId, 'in one request'), item(uuid(), listId, 'and its item')];
    const answer = await create(c, rows, 1);
    expectStatus(answer, 200);
    expect(answer.body).toMatchObject({ status: 'committed', source_id: 'src-one', source_bundle_id: 1, row_count: 2, bundle_seq: 1 });
    // Two database statements: the create that stages its rows, and the commit.
    expect(answer.roundTrips).toBe(2);
    const again = await create(c, rows, 1);
    expectStatus(again, 200);
    expect(again.body).toMatchObject({ status: 'already_committed', bundle_seq: 1, bundle_hash: answer.body.bundle_hash });
    const committed = await c.get('/sync/committed-bundles/1/rows');
    expect(committed.body.rows.map((r: { table: string }) => r.table)).toEqual(['lists', 'items']);
    expect(await staged('one-commit')).toEqual({ sessions: 0, open: 0, bytes: 0 });
  });

  it('answers a conflict as commit does, and leaves no session staged', async () => {
    const c = s.client('one-conflict', 'src-a');
    await initEmpty(c);
    const listId = uuid();
    await pushOk(c, [list(listId, 'first')], { sourceBundleId: 1 });
    const stale = [list(listId, 'stale edit', 0)];
    const answer = await create(c, [{ ...stale[0] as PushRow, op: 'UPDATE', base_row_version: 99 }], 2);
    expectStatus(answer, 409, 'push_conflict');
    expect(answer.body.conflicts).toHaveLength(1);
    expect(answer.body.conflict).toMatchObject({ table: 'lists', key: { id: listId } });
    expect(await staged('one-conflict')).toEqual({ sessions: 0, open: 0, bytes: 0 });
  });

  it('answers a rejection as commit does, naming the row, and leaves no session staged', async () => {
    const c = s.client('one-reject', 'src-r');
    await initEmpty(c);
    // An item whose list does not exist: the deferred foreign key refuses it at commit.
    const answer = await create(c, [item(uuid(), uuid(), 'orphan')], 1);
    expectStatus(answer, 422, 'push_rejected');
    expect(answer.body.violation).toMatchObject({ table: 'items' });
    expect(await staged('one-reject')).toEqual({ sessions: 0, open: 0, bytes: 0 });
  });

  it('refuses rows the server cannot stage as a chunk would, and leaves no session staged', async () => {
    const c = s.client('one-invalid', 'src-i');
    await initEmpty(c);
    const listId = uuid();
    const answer = await create(c, [{ ...list(listId, 'x'), payload: { id: listId, title: 'x', no_such_column: 1 } }], 1);
    expectStatus(answer, 400, 'invalid_request');
    expect(await staged('one-invalid')).toEqual({ sessions: 0, open: 0, bytes: 0 });
  });

  it('refuses rows that are not the whole bundle, before opening a session', async () => {
    const c = s.client('one-partial', 'src-p');
    await initEmpty(c);
    const listId = uuid();
    const rows = [list(listId, 'one of two')];
    const answer = await create(c, rows, 1, { planned_row_count: 2 });
    expectStatus(answer, 400, 'invalid_request');
    expect(await staged('one-partial')).toEqual({ sessions: 0, open: 0, bytes: 0 });
  });
});
