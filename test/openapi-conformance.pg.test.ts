/**
 * The OpenAPI document describes what the server really answers: one user's whole round (connect,
 * push session, chunk, commit, replay, pull, watch, snapshot, meta) against a real server, every
 * answer checked against the schema its operation documents (the same zod schema the document
 * was generated from), and every error body against ErrorBody with the status its code has.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorRegistry, type ErrorCode } from '../core/errors.js';
import { ErrorBody, OPERATIONS } from '../core/protocol/operations.js';
import { startTestServer, type ApiAnswer, type TestServer } from './support/server.js';

const op = (operationId: string) => {
  const found = OPERATIONS.find((o) => o.operationId === operationId);
  if (!found) throw new Error(`no operation ${operationId}`);
  return found;
};

/** Checks an answer against its operation: the documented success status and body, or a documented error. */
function conforms(operationId: string, answer: ApiAnswer): void {
  const o = op(operationId);
  if (answer.status === o.ok.status) {
    if (o.ok.schema) expect(o.ok.schema.safeParse(answer.body).error, `${operationId} answer`).toBeUndefined();
    return;
  }
  const other = o.other?.[answer.status];
  if (other) return void expect(other.schema.safeParse(answer.body).error).toBeUndefined();
  expect(ErrorBody.safeParse(answer.body).error, `${operationId} error body`).toBeUndefined();
  const code = (answer.body as { error: ErrorCode }).error;
  expect(errorRegistry[code]?.status, `${operationId}: ${code}`).toBe(answer.status);
}

describe('the server answers as the OpenAPI document says', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  it('on every operation of a user\'s round, and on its errors', async () => {
    const c = s.client('openapi-user');
    const listId = randomUUID();
    conforms('capabilities', await c.get('/sync/capabilities'));
    conforms('connect', await c.post('/sync/connect', { has_local_pending_rows: true }));
    const connect = (await c.post('/sync/connect', { has_local_pending_rows: true })).body as { initialization_id: string };
    const create = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1, initialization_id: connect.initialization_id });
    conforms('createPushSession', create);
    const pushId = (create.body as { push_id: string }).push_id;
    const row = { schema: 'app', table: 'lists', key: { id: listId }, op: 'INSERT', base_row_version: 0, payload: { id: listId, title: 'openapi', position: 1 } };
    conforms('uploadChunk', await c.post(`/sync/push-sessions/${pushId}/chunks`, { start_row_ordinal: 0, rows: [row] }));
    conforms('uploadChunk', await c.post(`/sync/push-sessions/${pushId}/chunks`, { start_row_ordinal: 5, rows: [row] }));
    const commit = await c.post(`/sync/push-sessions/${pushId}/commit`);
    conforms('commitPush', commit);
    expect(commit.status).toBe(200);
    conforms('committedBundleRows', await c.get('/sync/committed-bundles/1/rows?after_row_ordinal=0&max_rows=10'));
    conforms('committedBundleRows', await c.get('/sync/committed-bundles/99/rows'));
    conforms('pull', await c.get('/sync/pull?after_bundle_seq=0'));
    conforms('watch', await c.get('/sync/watch?after_bundle_seq=0&wait_seconds=0'));
    conforms('deletePushSession', await c.del(`/sync/push-sessions/${randomUUID()}`));
    const snapshot = await c.post('/sync/snapshot-sessions');
    conforms('createSnapshot', snapshot);
    const snapshotId = (snapshot.body as { snapshot_id: string }).snapshot_id;
    conforms('snapshotPage', await c.get(`/sync/snapshot-sessions/${snapshotId}?max_rows=1`));
    conforms('snapshotPage', await c.get(`/sync/snapshot-sessions/${randomUUID()}`));
    conforms('deleteSnapshot', await c.del(`/sync/snapshot-sessions/${snapshotId}`));
    conforms('health', await fetch(`${s.url}/syncx/health`).then(async (r) => ({ status: r.status, body: await r.json() }) as ApiAnswer));
    conforms('status', await fetch(`${s.url}/syncx/status`).then(async (r) => ({ status: r.status, body: await r.json() }) as ApiAnswer));
    const unauthenticated = await fetch(`${s.url}/sync/pull`).then(async (r) => ({ status: r.status, body: await r.json() }) as ApiAnswer);
    expect(unauthenticated.status).toBe(401);
    conforms('pull', unauthenticated);
  });
});
