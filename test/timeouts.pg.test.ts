/**
 * Issue 15 item 6 and issue 17 item 3: every wait is bounded, in every mode, in an order that
 * lets the typed answer out (lock < statement < query < request < function < API Gateway):
 * - a user whose row is locked gets 503s within the lock bound, and uses only its share of the
 *   pool, so another user's pull and /syncx/health keep answering;
 * - a connection that silently stops answering (black-holed) is given up after the client-side
 *   query timeout: 503 (commit_outcome_unknown for a commit), and it serves again once the path
 *   is back;
 * - a commit cancelled while it waits (57014 with no statement bound behind it) is a 503 to retry,
 *   not the statement bound's answer to split the bundle;
 * - in Lambda the request's deadline follows the function's remaining time;
 * - bootstrap installs the bounds: a lock bound on every managed function a request calls, and
 *   the role's settings in this database (unless SYNC_ROLE_TIMEOUTS=off).
 */
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../core/config.js';
import { Db, createPool, sql, type PoolOptions } from '../core/db/index.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { REQUEST_FUNCTIONS } from '../core/bootstrap/bounds.js';
import { defaultLimits } from '../core/limits.js';
import { createHandler, createRuntime, functionRoutes, type HttpApiEvent, type Runtime } from '../functions/index.js';
import { startGateway } from '../dev/gateway.js';
import { createDatabase } from './support/pg-server.js';
import { bootstrapAppSchema, openTestDb, runtimePoolOptions, type TestDb } from './support/server-db.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './support/schemas.js';
import { apiClient, TEST_JWT_SECRET, type ApiAnswer, type ApiClient } from './support/server.js';
import { startTcpProxy } from './support/tcp-proxy.js';
import { expectStatus, initEmpty, list, pushOk, requestHash, uuid, type PushRow } from './support/write-helpers.js';

const SYNC_TABLES = APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(',');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function serve(url: string, poolOptions: PoolOptions, env: Record<string, string> = {}): Promise<{ runtime: Runtime; client(user: string, source?: string): ApiClient }> {
  const pool = await createPool(poolOptions);
  cleanups.push(() => pool.end());
  const runtime = createRuntime(loadConfig({ DATABASE_URL: url, SYNC_TABLES, SYNC_DB_POOL_MAX: String(poolOptions.max), ...env }), pool);
  const gateway = await startGateway({ runtime, auth: { secret: TEST_JWT_SECRET } });
  cleanups.push(() => gateway.close());
  return { runtime, client: (user, source) => apiClient(gateway.url, user, source) };
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

/** A push session with every row uploaded, ready to commit. */
async function staged(c: ApiClient, rows: PushRow[], sourceBundleId = 1): Promise<string> {
  const create = await c.post('/sync/push-sessions', { source_bundle_id: sourceBundleId, planned_row_count: rows.length, request_hash: requestHash(rows) });
  expectStatus(create, 200);
  expectStatus(await c.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: 0, rows }), 200);
  return create.body.push_id as string;
}

describe('one user must not hurt the others', () => {
  it("while a user's state row is locked, its commits answer 503 within the lock bound, and another user's pull and health keep answering", async () => {
    const url = await createDatabase(inject('pgAdminUrl'), 'share');
    await bootstrapAppSchema(url, { ...defaultLimits, lockTimeoutMs: 1000 });
    // DATABASE_URL mode: the runtime's own pool of 4, as `npm start` has it.
    const s = await serve(url, runtimePoolOptions(url, 4));
    const bob = s.client('bob');
    await initEmpty(bob);
    await pushOk(bob, [list(uuid(), 'bob list')], { sourceBundleId: 1 });
    const alice = s.client('alice');
    await initEmpty(alice);
    // Six devices of alice, each with a bundle ready to commit.
    const devices = Array.from({ length: 6 }, (_, i) => s.client('alice', `alice-dev-${i}`));
    const sessions = await Promise.all(devices.map((d) => staged(d, [list(uuid(), `from ${d.sourceId}`)])));

    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    cleanups.push(() => admin.end());
    await admin.query('BEGIN');
    await admin.query(`SELECT 1 FROM sync.user_state WHERE user_id = 'alice' FOR UPDATE`);
    // The row stays locked until every commit has answered (an order, not a time): an answer
    // that came from anything but a bound (the lock bound, or alice's share of the pool) would
    // have to wait for this rollback, and never come.
    try {
      let answered = false;
      const commits = Promise.all(devices.map((d, i) => timed(() => d.post(`/sync/push-sessions/${sessions[i]}/commit`)))).finally(() => (answered = true));
      // Meanwhile bob pulls and anyone checks health, over and over, at least 10 times and until
      // alice's commits have answered: each of those would be a 503 had it waited on alice.
      const others: Array<{ what: string; status: number; ms: number }> = [];
      while (!answered || others.length < 20) {
        const [pull, health] = await Promise.all([timed(() => bob.get('/sync/pull?after_bundle_seq=0')), timed(() => bob.get('/syncx/health'))]);
        others.push({ what: 'pull', status: pull.value.status, ms: pull.ms }, { what: 'health', status: health.value.status, ms: health.ms });
        await sleep(100);
      }
      const answers = await commits;
      for (const { value, ms } of answers) {
        expect(value.status, JSON.stringify(value.body)).toBeGreaterThanOrEqual(429);
        expect(['service_unavailable', 'rate_limited']).toContain(value.body.error);
        expect(value.headers.get('retry-after')).not.toBeNull();
        // The lock bound (1 s) answered, not the statement bound behind it, which cannot answer
        // before 20 s: a time compared with a bound that load can only delay, never advance.
        expect(ms).toBeLessThan(defaultLimits.statementTimeoutMs);
      }
      for (const o of others) expect(o, JSON.stringify(o)).toMatchObject({ status: 200 });
      console.log(`while alice's row was locked: bob's slowest pull or health ${Math.round(Math.max(...others.map((o) => o.ms)))} ms over ${others.length} requests`);
    } finally {
      await admin.query('ROLLBACK');
    }
    // Nothing was lost: the same sessions commit once the row is free.
    for (const [i, d] of devices.entries()) expectStatus(await d.post(`/sync/push-sessions/${sessions[i]}/commit`), 200);
  });
});

describe('a commit cancelled while it waits', () => {
  it('is a 503 to retry the same commit, not a bundle to split; the same session commits afterwards', async () => {
    // No statement bound anywhere (the default), and a lock bound far behind the runtime's own
    // query timeout: nothing but the cancel below can stop the commit's wait.
    const url = await createDatabase(inject('pgAdminUrl'), 'cancel');
    await bootstrapAppSchema(url, { ...defaultLimits, lockTimeoutMs: 600_000 });
    const s = await serve(url, runtimePoolOptions(url, 4));
    const alice = s.client('alice');
    await initEmpty(alice);
    const session = await staged(alice, [list(uuid(), 'waits, is cancelled, commits')]);

    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    cleanups.push(() => admin.end());
    const watcher = new pg.Client({ connectionString: url });
    await watcher.connect();
    cleanups.push(() => watcher.end());
    await admin.query('BEGIN');
    await admin.query(`SELECT 1 FROM sync.user_state WHERE user_id = 'alice' FOR UPDATE`);
    let answer: ApiAnswer;
    try {
      const commit = alice.post(`/sync/push-sessions/${session}/commit`);
      // An order, not a time: the commit is cancelled once it is seen waiting for alice's row.
      let cancelled = false;
      while (!cancelled) {
        // A fresh view each time: inside admin's transaction pg_stat_activity would not change.
        const waiting = await watcher.query(`SELECT pg_cancel_backend(pid) AS sent FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%sync.push_commit(%'`);
        cancelled = waiting.rows.some((r) => r.sent === true);
        if (!cancelled) await sleep(20);
      }
      answer = await commit;
    } finally {
      await admin.query('ROLLBACK');
    }
    // 57014 with no statement bound set is a cancel: retry, as for any transient condition. Read
    // as the statement bound it would tell the client to split a one-row bundle it cannot split.
    expectStatus(answer, 503, 'service_unavailable');
    expect(answer.headers.get('retry-after')).not.toBeNull();
    const retry = await alice.post(`/sync/push-sessions/${session}/commit`);
    expectStatus(retry, 200);
    expect(retry.body).toMatchObject({ status: 'committed', source_bundle_id: 1 });
  });
});

describe('a black-holed connection', () => {
  /**
   * Bounds small enough for a test, in the order the limits require; the request's own deadline
   * as far behind them as API Gateway allows, so which bound answered is never a close call.
   */
  const TIGHT = {
    SYNC_LIMIT_LOCK_TIMEOUT_MS: '400',
    SYNC_LIMIT_STATEMENT_TIMEOUT_MS: '800',
    SYNC_LIMIT_QUERY_TIMEOUT_MS: '1200',
    SYNC_LIMIT_DB_CONNECT_TIMEOUT_MS: '800',
    SYNC_LIMIT_REQUEST_TIMEOUT_MS: '25000',
    SYNC_LIMIT_WATCH_MAX_WAIT_SECONDS: '2',
    SYNC_LIMIT_WATCH_DEFAULT_WAIT_SECONDS: '1',
  };

  async function behindProxy(env: Record<string, string>) {
    const url = await createDatabase(inject('pgAdminUrl'), 'blackhole');
    await bootstrapAppSchema(url);
    const proxy = await startTcpProxy(url);
    // Registered before the pool's cleanup, so it runs after: closing the proxy's sockets lets
    // the pool end connections that would otherwise wait for an answer forever.
    cleanups.push(() => proxy.close());
    const s = await serve(proxy.url, { connectionString: proxy.url, max: 4, driver: 'pg', connectTimeoutMs: Number(env['SYNC_LIMIT_DB_CONNECT_TIMEOUT_MS'] ?? 5000) }, env);
    return { url, proxy, ...s };
  }

  it('every endpoint answers 503 within the query timeout, a commit commit_outcome_unknown; it serves again once the path is back', async () => {
    const { proxy, client } = await behindProxy(TIGHT);
    const c = client('hole');
    await initEmpty(c);
    await pushOk(c, [list(uuid(), 'before')], { sourceBundleId: 1 });
    const pending = await staged(c, [list(uuid(), 'in flight')], 2);
    proxy.blackHole();
    const answers: Array<[string, ApiAnswer, number]> = [];
    // The commit first, on the pool's idle connection: its statement is sent and never answered,
    // an unknown outcome. (Once that connection is dropped, a request waits for a new one that
    // never comes: nothing is sent, so a commit then answers service_unavailable, issue 26 item 6.)
    for (const [what, call] of [
      ['commit', () => c.post(`/sync/push-sessions/${pending}/commit`)],
      ['pull', () => c.get('/sync/pull?after_bundle_seq=0')],
      ['connect', () => c.post('/sync/connect', { has_local_pending_rows: false })],
      ['watch', () => c.get('/sync/watch?after_bundle_seq=1&wait_seconds=1')],
      ['health', () => c.get('/syncx/health')],
    ] as const) {
      const { value, ms } = await timed(call);
      answers.push([what, value, ms]);
    }
    for (const [what, answer, ms] of answers) {
      expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(503);
      expect(answer.headers.get('retry-after'), what).not.toBeNull();
      // The client-side query timeout (1.2 s) or the connect bound (0.8 s) answered, not the
      // request's own deadline, which cannot answer before 25 s.
      expect(ms, what).toBeLessThan(Number(TIGHT.SYNC_LIMIT_REQUEST_TIMEOUT_MS));
    }
    expect(answers.find(([what]) => what === 'commit')?.[1].body.error).toBe('commit_outcome_unknown');
    expect(answers.find(([what]) => what === 'health')?.[1].body).toMatchObject({ status: 'unhealthy' });

    proxy.restore();
    // The connections given up on were dropped; new ones serve. The commit's fate is known again.
    expectStatus(await c.get('/sync/pull?after_bundle_seq=0'), 200);
    const retry = await c.post(`/sync/push-sessions/${pending}/commit`);
    expectStatus(retry, 200);
    expect(retry.body).toMatchObject({ status: 'committed', source_bundle_id: 2 });
  });

  it("in Lambda the request's deadline follows the function's remaining time, before Lambda would kill it", async () => {
    // Default limits (a 22 s query timeout): only the remaining time can stop the wait in time.
    const { proxy, runtime, client } = await behindProxy({});
    await initEmpty(client('lam'));
    const handler = createHandler(functionRoutes['pull'] ?? [], async () => runtime);
    const event = {
      version: '2.0',
      routeKey: 'GET /sync/pull',
      rawPath: '/sync/pull',
      rawQueryString: 'after_bundle_seq=0',
      headers: { 'sync-source-id': 'lam-dev' },
      queryStringParameters: { after_bundle_seq: '0' },
      requestContext: {
        http: { method: 'GET', path: '/sync/pull', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'vitest' },
        authorizer: { jwt: { claims: { sub: 'lam' }, scopes: [] } },
        requestId: 'req-1',
        routeKey: 'GET /sync/pull',
        stage: '$default',
      },
      isBase64Encoded: false,
    } as unknown as HttpApiEvent;
    expect((await handler(event, { getRemainingTimeInMillis: () => 20_000 })).statusCode).toBe(200);
    proxy.blackHole();
    const { value, ms } = await timed(() => handler(event, { getRemainingTimeInMillis: () => 3500 }));
    expect(value.statusCode, value.body).toBe(503);
    expect(value.headers['retry-after']).toBe('1');
    // 3.5 s remaining less the 1.5 s reserve: the answer leaves after about 2 s (never before:
    // load only delays), and certainly not at the query timeout, which cannot answer before 22 s.
    expect(ms).toBeGreaterThan(1500);
    expect(ms).toBeLessThan(defaultLimits.queryTimeoutMs);
  });
});

describe('bootstrap installs the bounds', () => {
  const roleSettingsOf = (t: TestDb) => async (): Promise<string[]> =>
    (await t.exec(`SELECT coalesce(s.setconfig, '{}') AS config FROM pg_db_role_setting s
        WHERE s.setrole = (SELECT oid FROM pg_roles WHERE rolname = current_user)
          AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())`)).rows[0]?.config ?? [];

  it('a lock bound on every managed function a request calls, and the role settings only when asked (RoleTimeouts=on); a revalidation writes nothing', async () => {
    const t = await openTestDb({ schemaSql: APP_SCHEMA_SQL });
    cleanups.push(() => t.close());
    const roleSettings = roleSettingsOf(t);
    // Every function a request calls, each overload: the page readers of layout 27 once lacked it.
    const functionBounds = async () =>
      (await t.exec(`SELECT DISTINCT p.proname AS name, coalesce(array_to_string(p.proconfig, ','), '') AS config FROM pg_proc p
          WHERE p.pronamespace = 'sync'::regnamespace AND p.proname = ANY ($1::text[])
          ORDER BY 1`, [REQUEST_FUNCTIONS])).rows.map((r) => `${r.name} ${(r.config as string).split(',').filter((c) => c.startsWith('lock_timeout=')).join(',')}`);
    const everyRequestFunction = [...new Set(REQUEST_FUNCTIONS)].sort();
    expect(everyRequestFunction).toEqual(expect.arrayContaining(['committed_rows_parts', 'pull_parts', 'snapshot_page_parts', 'ws_targets', 'layout_state']));

    const first = await bootstrap(t.db, { tables: APP_TABLES, bounds: { ...defaultLimits, lockTimeoutMs: 1500, statementTimeoutMs: 7000 }, roleBounds: true });
    expect(first.roleBounds).toBe('installed');
    expect(await roleSettings()).toEqual(expect.arrayContaining(['statement_timeout=7000', 'lock_timeout=1500',
      `idle_in_transaction_session_timeout=${defaultLimits.idleInTransactionTimeoutMs}`, `client_connection_check_interval=${defaultLimits.clientCheckIntervalMs}`]));
    expect(await functionBounds()).toEqual(everyRequestFunction.map((n) => `${n} lock_timeout=1500`));
    // A new session of the role takes them.
    const session = new pg.Client({ connectionString: t.url });
    await session.connect();
    expect((await session.query('SHOW statement_timeout')).rows[0].statement_timeout).toBe('7s');
    await session.end();

    // Revalidating with the same bounds writes nothing.
    const again = await bootstrap(t.db, { tables: APP_TABLES, bounds: { ...defaultLimits, lockTimeoutMs: 1500, statementTimeoutMs: 7000 }, roleBounds: true });
    expect(again).toMatchObject({ unchanged: true, roleBounds: 'unchanged' });
    // Other bounds are applied by the next bootstrap.
    const changed = await bootstrap(new Db(t.db.pool, defaultLimits), { tables: APP_TABLES, roleBounds: true });
    expect(changed).toMatchObject({ unchanged: false, roleBounds: 'installed' });
    expect(await functionBounds()).toEqual(everyRequestFunction.map((n) => `${n} lock_timeout=${defaultLimits.lockTimeoutMs}`));
    expect(loadConfig({ DATABASE_URL: 'x', SYNC_TABLES: SYNC_TABLES, SYNC_ROLE_TIMEOUTS: 'on' }).roleTimeouts).toBe(true);
  });

  it('by default bootstrap puts no timeout on the role, and removes the ones an earlier release put there, leaving the operator\'s own (issue 25 item 6)', async () => {
    const t = await openTestDb({ schemaSql: APP_SCHEMA_SQL });
    cleanups.push(() => t.close());
    const roleSettings = roleSettingsOf(t);
    const roleSession = async (): Promise<Record<string, string>> => {
      const session = new pg.Client({ connectionString: t.url });
      await session.connect();
      try {
        const rows = (await session.query(`SELECT name, setting FROM pg_settings WHERE name IN ('statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout')`)).rows;
        return Object.fromEntries(rows.map((r) => [r.name, r.setting]));
      } finally {
        await session.end();
      }
    };
    expect(loadConfig({ DATABASE_URL: 'x', SYNC_TABLES: SYNC_TABLES }).roleTimeouts).toBe(false);
    // A fresh bootstrap with the defaults: an unrelated session of the same role is unbounded
    // (before, its statement_timeout was 20 s and a pg_sleep(21) failed with 57014).
    const fresh = await bootstrap(t.db, { tables: APP_TABLES, bounds: defaultLimits });
    expect(fresh.roleBounds).toBe('unchanged');
    expect(await roleSettings()).toEqual([]);
    expect(await roleSession()).toEqual({ statement_timeout: '0', lock_timeout: '0', idle_in_transaction_session_timeout: '0' });

    // An earlier release installed them; the operator also set a value of their own.
    await bootstrap(t.db, { tables: APP_TABLES, bounds: defaultLimits, roleBounds: true });
    const database = (await t.exec('SELECT current_database() AS d')).rows[0].d as string;
    await t.exec(`ALTER ROLE CURRENT_USER IN DATABASE "${database}" SET lock_timeout = 45000`);
    expect(await roleSettings()).toContain(`statement_timeout=${defaultLimits.statementTimeoutMs}`);
    const upgraded = await bootstrap(t.db, { tables: APP_TABLES, bounds: defaultLimits });
    expect(upgraded.roleBounds).toBe('removed');
    expect(await roleSettings()).toEqual(['lock_timeout=45000']);
    expect(await roleSession()).toMatchObject({ statement_timeout: '0', idle_in_transaction_session_timeout: '0' });
    expect((await bootstrap(t.db, { tables: APP_TABLES, bounds: defaultLimits })).roleBounds).toBe('unchanged');

    // The service still bounds its own transactions, whatever the role says.
    const runtimeDb = new Db(t.db.pool, { ...defaultLimits });
    const own = await runtimeDb.runTx((tx) => tx.query<{ s: string; i: string }>(sql`
      SELECT current_setting('statement_timeout') AS s, current_setting('idle_in_transaction_session_timeout') AS i`));
    expect(own[0]).toEqual({ s: '20s', i: '30s' });
  });
});
