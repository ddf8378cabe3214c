import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { startTestServer, type TestServer } from './support/server.js';

describe('smoke', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  it('connect, push, commit, pull, snapshot', async () => {
    const c = s.client('alice');
    expect((await c.get('/syncx/health')).status).toBe(200);
    const conn = await c.post('/sync/connect', { has_local_pending_rows: true });
    expect(conn.status, JSON.stringify(conn.body)).toBe(200);
    expect(conn.body.resolution).toBe('initialize_local');
    const create = await c.post('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 2, initialization_id: conn.body.initialization_id });
    expect(create.status, JSON.stringify(create.body)).toBe(200);
    const listId = '11111111-1111-4111-8111-111111111111';
    const chunk = await c.post(`/sync/push-sessions/${create.body.push_id}/chunks`, {
      start_row_ordinal: 0,
      rows: [
        { schema: 'app', table: 'lists', key: { id: listId }, op: 'INSERT', base_row_version: 0, payload: { id: listId, title: 'groceries', position: 1 } },
        { schema: 'app', table: 'items', key: { id: '22222222-2222-4222-8222-222222222222' }, op: 'INSERT', base_row_version: 0, payload: { list_id: listId, body: 'milk \u00e9\ud83d\ude00 "q"\n', done: false, attachment: 'AAEC' } },
      ],
    });
    expect(chunk.status, JSON.stringify(chunk.body)).toBe(200);
    const commit = await c.post(`/sync/push-sessions/${create.body.push_id}/commit`);
    expect(commit.status, JSON.stringify(commit.body)).toBe(200);
    expect(commit.roundTrips).toBe(1);
    const rows = await c.get(`/sync/committed-bundles/${commit.body.bundle_seq}/rows`);
    expect(rows.status, JSON.stringify(rows.body)).toBe(200);
    const hashed = rows.body.rows.map((r: any, i: number) => ({ ...r, row_ordinal: i }));
    expect(createHash('sha256').update(canonicalize(hashed) as string).digest('hex')).toBe(commit.body.bundle_hash);
    const p = await c.get('/sync/pull?after_bundle_seq=0');
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    const snap = await c.post('/sync/snapshot-sessions');
    expect(snap.status, JSON.stringify(snap.body)).toBe(200);
    const page = await c.get(`/sync/snapshot-sessions/${snap.body.snapshot_id}`);
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    expect(page.body.rows).toHaveLength(2);
    const st = await c.get('/syncx/status');
    expect(st.body.bundle_visibility.bundles_committed).toBe(1);
  });
});
