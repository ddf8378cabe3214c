/**
 * Issue 25 item 1: every answer fits max_response_bytes as Lambda counts it (the function result,
 * its body escaped inside it), not only the pages. Each answer kind is driven past the limit: a
 * conflict list whose server rows add up to more than the limit (and the first conflict twice, in
 * `conflict` and `conflicts[0]`), a rejection whose message is larger than the limit, a problems
 * list (`details`) of a chunk, and the operator status that keeps the last conflict and rejection.
 *
 * The local gateway enforces Lambda's invoke limit (here equal to the response limit), answering
 * 502 like API Gateway does for a result Lambda refuses: before the fix every one of these was
 * a 502, and the client retried its conflicted bundle forever. The client resolves the cut
 * conflict list round by round and keeps its own edits. Low limits (64 KiB) keep the data small;
 * the arithmetic is the same at 4 MiB (test/built-bundles.pg.test.ts drives the audit's 1.1 M
 * characters through the built push function).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../core/config.js';
import { createHandler, createRuntime, functionRoutes, type HttpApiEvent } from '../functions/index.js';
import { fitBody, escapedBytes } from '../functions/edge/answer-budget.js';
import { APP_TABLES } from './support/schemas.js';
import { openDevice, write, expectConverged, type Device } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, item, list, pushOk, uuid } from './support/write-helpers.js';

const LIMIT = 64 * 1024;
const OPERATOR_TOKEN = 'operator-budget-token';
/** Three bytes of UTF-8 each, escaped as they are: Lambda counts them as three. */
const CJK = '漢字仮名交じり文';
const cjk = (chars: number): string => CJK.repeat(Math.ceil(chars / CJK.length)).slice(0, chars);

describe('every answer within max_response_bytes (issue 25 item 1)', () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({
      env: { SYNC_LIMIT_MAX_REQUEST_BYTES: String(LIMIT), SYNC_LIMIT_MAX_RESPONSE_BYTES: String(LIMIT) },
      invokeLimitBytes: LIMIT,
      operatorToken: OPERATOR_TOKEN,
    });
    // A business trigger whose refusal says more than any answer can carry.
    await s.t.exec(`
      CREATE FUNCTION app.refuse_loudly() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.body LIKE 'refuse:%' THEN
          RAISE EXCEPTION USING ERRCODE = 'check_violation', MESSAGE = 'refused: ' || repeat('"', 100000);
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_loudly BEFORE INSERT OR UPDATE ON app.items FOR EACH ROW EXECUTE FUNCTION app.refuse_loudly();`);
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('a conflict list larger than the limit is cut (conflict_count), the duplicate row left out, and the client resolves it round by round keeping its own edit', async () => {
    const user = 'budget-conflicts';
    const a = await openDevice(s, user);
    const b = await openDevice(s, user);
    devices.push(a, b);
    const listId = uuid();
    const ids = [uuid(), uuid(), uuid()];
    await write.list(a.db, listId, 'big rows');
    for (const id of ids) await write.item(a.db, id, listId, 'small');
    expect(await a.client.attach(user)).toMatchObject({ status: 'attached' });
    expect(await b.client.attach(user)).toMatchObject({ status: 'attached' });
    await expectConverged(s, user, a, b);

    // A makes each row ~36 KB (under a page alone, three of them far over one answer) ...
    for (const [i, id] of ids.entries()) await write.item(a.db, id, listId, `${i} ${cjk(12_000)}`);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed' });
    // ... while B, not having pulled, edits the same rows and adds one of its own.
    for (const id of ids) await write.item(b.db, id, listId, 'b was here');
    const own = uuid();
    await write.item(b.db, own, listId, 'b keeps this one');

    // What B's first commit is answered (read through a plain client, the same user and source).
    const probe = s.client(user, 'probe-source');
    const created = await probe.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 3 });
    expectStatus(created, 200);
    const chunk = await probe.post(`/sync/push-sessions/${created.body.push_id}/chunks`, {
      start_row_ordinal: 0, rows: ids.map((id) => item(id, listId, 'probe', 1)),
    });
    expectStatus(chunk, 200);
    const conflict = await probe.post(`/sync/push-sessions/${created.body.push_id}/commit`);
    expectStatus(conflict, 409, 'push_conflict');
    expect(conflict.body.conflict_count).toBe(3);
    expect(conflict.body.conflicts.length).toBeLessThan(3);
    expect(conflict.body.conflicts[0]).toMatchObject({ server_row_version: 2, server_row: { body: expect.stringContaining(cjk(100)) } });
    // The copy of the first conflict left its row out: both would not fit.
    expect(conflict.body.conflict).toMatchObject({ server_row: null, server_row_omitted: true, server_row_deleted: false });
    expect(escapedBytes(conflict.body)).toBeLessThanOrEqual(LIMIT);

    const synced = await b.client.sync();
    expect(synced.push).toMatchObject({ status: 'committed', conflictsResolved: 3 });
    // The server won the three conflicts (the default policy); B's own new row went through.
    await a.client.sync();
    const state = await expectConverged(s, user, a, b);
    for (const [i, id] of ids.entries()) expect(state.items[id]?.body.startsWith(`${i} `)).toBe(true);
    expect(state.items[own]?.body).toBe('b keeps this one');
  });

  it('a server row too large for any answer is left out and marked; the client reads it from its committed bundle instead of taking it for deleted', async () => {
    const user = 'budget-omitted';
    const b = await openDevice(s, user);
    devices.push(b);
    const listId = uuid();
    const itemId = uuid();
    await write.list(b.db, listId, 'one big row');
    await write.item(b.db, itemId, listId, 'small');
    expect(await b.client.attach(user)).toMatchObject({ status: 'attached' });

    // Another writer, on a runtime with a larger limit (a deployment before the limit was
    // lowered), commits a row no 64 KiB answer can carry next to anything else.
    const config = loadConfig({
      DATABASE_URL: s.t.url,
      SYNC_TABLES: APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(','),
      SYNC_LIMIT_MAX_RESPONSE_BYTES: String(4 * LIMIT),
      SYNC_LIMIT_MAX_REQUEST_BYTES: String(4 * LIMIT),
    });
    const push = createHandler(functionRoutes['push'] ?? [], async () => createRuntime(config, s.t.db.pool));
    const call = async (method: string, route: string, path: string, body?: unknown) => {
      const answer = await push({
        version: '2.0', routeKey: `${method} ${route}`, rawPath: path, rawQueryString: '', headers: { 'sync-source-id': 'src-big-writer', 'content-type': 'application/json' },
        requestContext: { http: { method, path }, authorizer: { jwt: { claims: { sub: user } } } },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }), isBase64Encoded: false,
      } as unknown as HttpApiEvent);
      return { status: answer.statusCode, body: answer.body ? JSON.parse(answer.body as string) : undefined };
    };
    const created = await call('POST', '/sync/push-sessions', '/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const big = `big ${cjk(25_000)}`;
    const pushId = created.body.push_id as string;
    expect((await call('POST', '/sync/push-sessions/{push_id}/chunks', `/sync/push-sessions/${pushId}/chunks`, { start_row_ordinal: 0, rows: [item(itemId, listId, big, 1)] })).status).toBe(200);
    expect((await call('POST', '/sync/push-sessions/{push_id}/commit', `/sync/push-sessions/${pushId}/commit`)).status).toBe(200);

    // B edits the row; its conflict cannot carry the server row, so the row comes marked as left out.
    await write.item(b.db, itemId, listId, 'b edit');
    const synced = await b.client.sync();
    expect(synced.push).toMatchObject({ conflictsResolved: 1 });
    // Server wins, with the server's row as it is: not a deletion of it.
    const state = await expectConverged(s, user, b);
    expect(state.items[itemId]?.body).toBe(big);
  });

  it('a rejection whose message is larger than the limit is answered 422 with the message shortened and marked', async () => {
    const c = s.client('budget-rejection', 'src-budget');
    await initEmpty(c);
    const listId = uuid();
    await pushOk(c, [list(listId, 'for a refusal')], { sourceBundleId: 1 });
    const created = await c.post('/sync/push-sessions', { source_bundle_id: 2, planned_row_count: 1 });
    await c.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [item(uuid(), listId, 'refuse: now')] });
    const refused = await c.post(`/sync/push-sessions/${created.body.push_id}/commit`);
    expectStatus(refused, 422, 'push_rejected');
    expect(refused.body).toMatchObject({ message_truncated: true, violation: { sqlstate: '23514', table: 'items' } });
    expect(refused.body.message.slice(0, 300)).toContain('refused: ""');
    expect(escapedBytes(refused.body)).toBeLessThanOrEqual(LIMIT);
  });

  it('a problems list (details) larger than the limit keeps the first problems that fit and counts them all (detail_count)', async () => {
    const c = s.client('budget-details', 'src-budget');
    await initEmpty(c);
    const created = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    // Twenty unknown columns of 800 characters: each problem names its column twice.
    const payload: Record<string, unknown> = { id: uuid(), title: 't' };
    for (let i = 0; i < 20; i++) payload[`${i}${cjk(800)}`] = 1;
    const refused = await c.post(`/sync/push-sessions/${created.body.push_id}/chunks`, {
      start_row_ordinal: 0, rows: [{ schema: 'app', table: 'lists', key: { id: payload['id'] }, op: 'INSERT', base_row_version: 0, payload }],
    });
    expectStatus(refused, 400, 'invalid_request');
    expect(refused.body.detail_count).toBe(20);
    expect(refused.body.details.length).toBeGreaterThan(0);
    expect(refused.body.details.length).toBeLessThan(20);
    expect(refused.body.details[0]).toMatchObject({ row_ordinal: 0, path: expect.stringMatching(/^payload\.0/) });
    expect(escapedBytes(refused.body)).toBeLessThanOrEqual(LIMIT);
  });

  it('the operator status, which keeps the last conflict and rejection, fits too', async () => {
    const c = s.client('budget-rejection', 'src-budget');
    // A conflict for the same user as the refusal above: its server row is kept in the note.
    const listId = uuid();
    await pushOk(c, [list(listId, cjk(15_000))], { sourceBundleId: 2 });
    c.sourceId = 'src-budget-2';
    const created = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1 });
    await c.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows: [list(listId, 'stale', 0)] });
    expectStatus(await c.post(`/sync/push-sessions/${created.body.push_id}/commit`), 409, 'push_conflict');
    const status = await fetch(`${s.url}/syncx/operator/users/budget-rejection`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
    expect(status.status).toBe(200);
    const body = await status.json() as Record<string, any>;
    expect(escapedBytes(body)).toBeLessThanOrEqual(LIMIT);
    expect(body['last_rejection']).toMatchObject({ message_truncated: true });
    expect(body['last_conflict']).toBeDefined();
  });
});

describe('fitBody', () => {
  it('leaves an answer that fits alone, and cuts one that does not in the documented order', () => {
    const small = { error: 'push_conflict', message: 'm', conflicts: [{ server_row: { a: 1 } }], conflict_count: 1 };
    expect(fitBody(small, 1000)).toBe(small);
    const row = (n: number) => ({ schema: 'app', table: 't', key: { id: String(n) }, server_row_version: n, server_row_deleted: false, server_row: { body: 'x'.repeat(400) } });
    const big = { error: 'push_conflict', message: 'm', conflict: row(1), conflicts: [row(1), row(2), row(3)], conflict_count: 3 };
    const cut = fitBody(big, 1000) as typeof big & { conflict: { server_row_omitted?: boolean } };
    expect(escapedBytes(cut)).toBeLessThanOrEqual(1000);
    expect(cut.conflicts.map((x) => x.key.id)).toEqual(['1']);
    expect(cut.conflict_count).toBe(3);
    expect(cut.conflict).toMatchObject({ server_row: null, server_row_omitted: true });
    expect(cut.conflicts[0]?.server_row).toEqual(row(1).server_row);
    // The input is untouched.
    expect(big.conflicts).toHaveLength(3);
    // Nothing left to cut: as it is while Lambda carries it, a marked stub beyond.
    const uncuttable = { error: 'internal_error', message: 'm', keys: Array.from({ length: 200 }, (_, i) => i) };
    expect(fitBody(uncuttable, 100, 10_000)).toEqual(uncuttable);
    expect(fitBody(uncuttable, 100)).toEqual({
      error: 'internal_error', message: 'the answer did not fit max_response_bytes and was left out', answer_omitted: true,
    });
  });
});
