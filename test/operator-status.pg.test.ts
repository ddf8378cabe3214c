/**
 * Issue 17 item 7: an operator's view of one user, through the operator route
 * (GET /syncx/operator/users/{user_id}, IAM-authorized in AWS, the operator token locally) and
 * `npm run status`: the stream, each source's last bundle and lag, open sessions, the last
 * conflict and the last rejection with their reasons. Every plan the status statement runs
 * probes indexes: no sequential scan of any sync table, whatever the statistics.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SOURCES_PER_STATUS } from '../core/sync/index.js';
import { ROOT } from '../infra/build.js';
import { nodesOf, planRecorder } from './support/plans.js';
import { signToken, startTestServer, type ApiClient, type TestServer } from './support/server.js';
import { expectStatus, initEmpty, item, list, push, pushOk, uuid } from './support/write-helpers.js';

const OPERATOR_TOKEN = 'operator-secret-for-tests';

describe('operator status of one user', () => {
  let s: TestServer;
  let phone: ApiClient;
  let laptop: ApiClient;
  let listId: string;

  const operatorGet = (userId: string, authorization = `Bearer ${OPERATOR_TOKEN}`) =>
    fetch(`${s.url}/syncx/operator/users/${encodeURIComponent(userId)}`, { headers: { authorization } });

  beforeAll(async () => {
    s = await startTestServer({ operatorToken: OPERATOR_TOKEN });
    phone = s.client('olivia', 'phone-1');
    laptop = s.client('olivia', 'laptop-1');
    await initEmpty(phone);
    listId = uuid();
    const first = await pushOk(phone, [list(listId, 'groceries')], { sourceBundleId: 1 });
    await pushOk(phone, [list(listId, 'groceries, renamed', first.bundle_seq)], { sourceBundleId: 2 });
    // The laptop edits from the first version: a conflict. Then an item of a list that does not
    // exist: a rejection by the foreign key.
    expectStatus(await push(laptop, [list(listId, 'stale edit', first.bundle_seq)], { sourceBundleId: 1 }), 409, 'push_conflict');
    expectStatus(await push(laptop, [item(uuid(), uuid(), 'orphan')], { sourceBundleId: 1 }), 422, 'push_rejected');
    await pushOk(laptop, [list(uuid(), 'work')], { sourceBundleId: 1 });
    // A push session left open, and a snapshot session.
    expectStatus(await phone.post('/sync/push-sessions', { source_bundle_id: 3, planned_row_count: 5 }), 200);
    expectStatus(await phone.post('/sync/snapshot-sessions', {}), 200);
  });
  afterAll(async () => s?.close());

  it('answers the stream, the sources with their last bundle and lag, sessions, the last conflict and rejection', async () => {
    const answer = await operatorGet('olivia');
    expect(answer.status).toBe(200);
    const body = await answer.json();
    expect(body).toMatchObject({
      user_id: 'olivia',
      latest_bundle_seq: 3,
      retained_floor: expect.any(Number),
      source_count: 2,
      // The one left open, and the conflicted and the rejected ones: a failed commit leaves its
      // session for the client to delete (or to expire), and the operator sees them.
      // The conflicting session and the one left open; the rejected one is closed (issue 26 item 7).
      open_push_sessions: 2,
      open_snapshot_sessions: 1,
    });
    const bySource = Object.fromEntries(body.sources.map((src: any) => [src.source_id, src]));
    expect(bySource['phone-1']).toMatchObject({ status: 'active', last_source_bundle_id: 2, last_bundle_seq: 2, last_row_count: 1, bundles_since_last_push: 1 });
    expect(bySource['laptop-1']).toMatchObject({ last_source_bundle_id: 1, last_bundle_seq: 3, bundles_since_last_push: 0 });
    expect(body.last_conflict).toMatchObject({
      source_id: 'laptop-1',
      conflict: { table: 'lists', key: { id: listId }, op: 'UPDATE', base_row_version: 1, server_row_version: 2 },
      conflict_count: 1,
      at: expect.any(String),
    });
    expect(body.last_conflict.message).toMatch(/lists/);
    expect(body.last_rejection).toMatchObject({ source_id: 'laptop-1', violation: { sqlstate: '23503', table: 'items' } });
    expect(typeof body.last_rejection.message).toBe('string');
  });

  it('refuses anyone without the operator credentials (403), even a signed-in user; a user never seen is 404', async () => {
    const none = await operatorGet('olivia', '');
    expect(none.status).toBe(403);
    expect((await none.json()).error).toBe('forbidden');
    const user = await operatorGet('olivia', `Bearer ${await signToken('olivia')}`);
    expect(user.status).toBe(403);
    const wrong = await operatorGet('olivia', `Bearer ${OPERATOR_TOKEN}x`);
    expect(wrong.status).toBe(403);
    const unknown = await operatorGet('nobody-ever');
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toBe('user_not_found');
  });

  it('the Lambda handler itself refuses an event without the IAM authorizer (a route deployed without it)', async () => {
    const { createHandler } = await import('../functions/edge/handler.js');
    const { routes } = await import('../functions/meta.js');
    const handler = createHandler(routes, async () => s.runtime);
    const event = {
      version: '2.0', routeKey: 'GET /syncx/operator/users/{user_id}', rawPath: '/syncx/operator/users/olivia', rawQueryString: '', headers: {},
      requestContext: { http: { method: 'GET', path: '/syncx/operator/users/olivia' } },
      isBase64Encoded: false,
    } as any;
    expect((await handler(event)).statusCode).toBe(403);
    const signed = { ...event, requestContext: { ...event.requestContext, authorizer: { iam: { userArn: 'arn:aws:iam::1:role/operator' } } } };
    expect((await handler(signed)).statusCode).toBe(200);
  });

  it('reads only through indexes: no sequential scan of a sync table, analyzed or not', async () => {
    // Other users' rows around olivia's, so a scan would show.
    for (let i = 0; i < 20; i++) {
      const c = s.client(`other-${i}`, `dev-${i}`);
      await initEmpty(c);
      await pushOk(c, [list(uuid(), `l${i}`)], { sourceBundleId: 1 });
    }
    const recorder = await planRecorder(s.t.url);
    try {
      for (const analyzed of [false, true]) {
        if (analyzed) await recorder.client.query('ANALYZE');
        // Sequential scans are what a plan may still pick for tiny tables; forbid them to see
        // whether an index exists for every read (a missing one leaves a Seq Scan anyway).
        await recorder.client.query('SET enable_seqscan = off');
        const plans = await recorder.record((c) => c.query('SELECT sync.user_status($1, $2)', ['olivia', MAX_SOURCES_PER_STATUS]));
        await recorder.client.query('RESET enable_seqscan');
        const scans = plans.flatMap((p) => nodesOf(p.plan)).filter((n) => n['Node Type'] === 'Seq Scan').map((n) => n['Relation Name']);
        expect(scans, `analyzed: ${analyzed}`).toEqual([]);
        expect(plans.length).toBeGreaterThan(5);
      }
    } finally {
      await recorder.close();
    }
  });

  it('npm run status prints the same view, and exits 3 for a user never seen', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
        execFile(join(ROOT, 'node_modules', '.bin', 'tsx'), [join(ROOT, 'dev', 'status.ts'), ...args], { env: { ...process.env, DATABASE_URL: s.t.url }, encoding: 'utf8', timeout: 60_000 },
          (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })));
    const shown = await run(['--user', 'olivia']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/user olivia/);
    expect(shown.stdout).toMatch(/latest bundle 3/);
    expect(shown.stdout).toMatch(/phone-1 \[active\]: last bundle 2 \(source bundle 2, 1 rows, .*\), 1 bundle\(s\) since/);
    expect(shown.stdout).toMatch(/last conflict: .* from laptop-1: /);
    expect(shown.stdout).toMatch(/last rejection: .* from laptop-1: /);
    const json = await run(['--user', 'olivia', '--json']);
    expect(JSON.parse(json.stdout).latest_bundle_seq).toBe(3);
    const unknown = await run(['--user', 'nobody-ever']);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toMatch(/never seen/);
  });
});
