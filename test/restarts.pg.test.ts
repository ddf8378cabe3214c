/**
 * Issue 10, restarts under load. Clients push bundles the way the client library does: each
 * bundle's rows are frozen with its source_bundle_id, and after a 503 or a lost connection the
 * client retries from push-session create with the same id and request hash, so an
 * already-committed bundle converges without uploading again. "Acknowledged" = a 200 commit (or
 * the 200 `already_committed` of such a retry).
 *
 * 1. The runtime and gateway restart mid-workload (in-flight requests cut, new pool, same port):
 *    nothing acknowledged is lost, nothing is committed twice.
 * 2. PostgreSQL itself stops and starts mid-workload (a private cluster, so no other suite
 *    notices): during the outage answers are 503 (`service_unavailable`, or
 *    `commit_outcome_unknown` for a commit in flight), never 500; afterwards the same clients'
 *    retries converge on their own, and every acknowledged bundle is in sync.bundle_log exactly
 *    once. On the pooled projects the runtime reaches the private cluster the same way the
 *    project does (a private PgBouncer in transaction mode, or the Neon driver over a private
 *    WebSocket forwarder).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../core/config.js';
import { createPool, type PoolLike, type PoolOptions } from '../core/db/index.js';
import { createRuntime } from '../functions/index.js';
import { startGateway, type Gateway } from '../dev/gateway.js';
import { createDatabase, freePort, startEmbedded, type PgMajor } from './support/pg-server.js';
import { startPgBouncer } from './support/pgbouncer.js';
import { startWsForwarder } from './support/ws-forwarder.js';
import { bootstrapAppSchema, runtimePoolOptions } from './support/server-db.js';
import { APP_TABLES } from './support/schemas.js';
import { apiClient, TEST_JWT_SECRET, type ApiClient } from './support/server.js';
import { initEmpty, list, push, uuid, type PushRow } from './support/write-helpers.js';
import { until } from './support/until.js';

const SYNC_TABLES = APP_TABLES.map((d) => `${d.schema}.${d.table}:${d.keyColumn}`).join(',');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Ack {
  readonly user: string;
  readonly source: string;
  readonly sourceBundleId: number;
  readonly bundleSeq: number;
  readonly bundleHash: string;
  readonly title: string;
}

/** What clients saw: answers by `status error`, transport failures, and when. */
class Observations {
  readonly answers = new Map<string, number>();
  readonly timeline: Array<{ at: number; what: string }> = [];
  transportFailures = 0;
  unexpected: string[] = [];
  note(what: string): void {
    this.answers.set(what, (this.answers.get(what) ?? 0) + 1);
    this.timeline.push({ at: Date.now(), what });
  }
  between(from: number, to: number): string[] {
    return this.timeline.filter((e) => e.at >= from && e.at <= to).map((e) => e.what);
  }
}

/**
 * One device pushing `bundles` one-row bundles in order, retrying each from create until it is
 * acknowledged. Anything but 200/503/a lost connection is recorded as unexpected.
 */
async function device(c: ApiClient, bundles: number, seen: Observations, acks: Ack[], deadline: number): Promise<void> {
  for (let sbid = 1; sbid <= bundles; sbid++) {
    const title = `${c.userId}#${sbid}`;
    const rows: PushRow[] = [list(uuid(), title)];
    for (;;) {
      if (Date.now() > deadline) throw new Error(`${title} not acknowledged before the deadline; saw ${JSON.stringify([...seen.answers])}`);
      let answer;
      try {
        answer = await push(c, rows, { sourceBundleId: sbid });
      } catch {
        seen.transportFailures++;
        seen.note('transport');
        await sleep(50);
        continue;
      }
      const status = answer.body?.status;
      if (answer.status === 200 && (status === 'committed' || status === 'already_committed')) {
        seen.note(`200 ${status}`);
        acks.push({ user: c.userId, source: c.sourceId, sourceBundleId: sbid, bundleSeq: answer.body.bundle_seq, bundleHash: answer.body.bundle_hash, title });
        break;
      }
      seen.note(`${answer.status} ${answer.body?.error ?? status}`);
      if (answer.status === 503) {
        expect(answer.headers.get('retry-after')).toMatch(/^\d+$/);
        await sleep(100);
        continue;
      }
      seen.unexpected.push(`${title}: ${answer.status} ${JSON.stringify(answer.body)}`);
      throw new Error(`unexpected answer for ${title}: ${answer.status} ${JSON.stringify(answer.body)}`);
    }
  }
}

/** Every acknowledged bundle is in the log exactly once, as acknowledged; each stream is gapless. */
async function verifyLog(url: string, users: readonly string[], bundles: number, acks: readonly Ack[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    expect(acks).toHaveLength(users.length * bundles);
    for (const user of users) {
      const log = await client.query(
        `SELECT l.bundle_seq::int AS seq, l.source_id, l.source_bundle_id::int AS sbid, l.bundle_hash
           FROM sync.bundle_log l JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1 ORDER BY l.bundle_seq`,
        [user],
      );
      expect(log.rows.map((r) => r.seq), user).toEqual(Array.from({ length: bundles }, (_, i) => i + 1));
      expect(new Set(log.rows.map((r) => `${r.source_id}/${r.sbid}`)).size, user).toBe(bundles);
      for (const ack of acks.filter((x) => x.user === user)) {
        const row = log.rows.find((r) => r.source_id === ack.source && r.sbid === ack.sourceBundleId);
        expect(row, `${ack.title}`).toBeDefined();
        expect(row.seq, ack.title).toBe(ack.bundleSeq);
        expect(row.bundle_hash, ack.title).toBe(ack.bundleHash);
      }
      const titles = await client.query(`SELECT title FROM app.lists WHERE _sync_scope_id = $1 ORDER BY title`, [user]);
      expect(titles.rows.map((r) => r.title).sort(), user).toEqual(acks.filter((x) => x.user === user).map((x) => x.title).sort());
    }
  } finally {
    await client.end();
  }
}

interface Served {
  readonly gateway: Gateway;
  readonly pool: PoolLike;
}

async function serve(url: string, poolOptions: PoolOptions, port?: number): Promise<Served> {
  const pool = await createPool(poolOptions);
  const runtime = createRuntime(loadConfig({ DATABASE_URL: url, SYNC_TABLES }), pool);
  const gateway = await startGateway({ runtime, auth: { secret: TEST_JWT_SECRET }, ...(port ? { port } : {}) });
  return { gateway, pool };
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('restarts lose nothing acknowledged', () => {
  it('a runtime and gateway restart mid-workload: in-flight work is cut, retries converge, every ack is in the log once', async () => {
    const url = await createDatabase(inject('pgAdminUrl'), 'restart');
    await bootstrapAppSchema(url);
    const port = await freePort();
    let served = await serve(url, runtimePoolOptions(url, 6), port);
    cleanups.push(
      () => served.pool.end(),
      () => served.gateway.close(),
    );
    const base = served.gateway.url;
    const users = ['r-ann', 'r-ben', 'r-cat', 'r-dan'];
    const bundles = 15;
    const seen = new Observations();
    const acks: Ack[] = [];
    const clients = users.map((u) => apiClient(base, u, `${u}-dev`));
    for (const c of clients) await initEmpty(c);
    // Minutes: only a device that never gets its bundle acknowledged fails this, not a slow machine.
    const deadline = Date.now() + 10 * 60_000;
    const work = Promise.all(clients.map((c) => device(c, bundles, seen, acks, deadline)));

    // Restart twice while every device is mid-stream: cut every connection, abandon the old
    // runtime (its in-flight statements finish on their own, their answers have nowhere to go),
    // and serve a new runtime with a new pool on the same port after a moment of downtime.
    for (const after of [12, 36]) {
      while (acks.length < after) await sleep(5);
      const old = served;
      await old.gateway.close();
      cleanups.push(() => old.pool.end());
      await sleep(200);
      served = await serve(url, runtimePoolOptions(url, 6), port);
    }
    await work;
    expect(seen.unexpected).toEqual([]);
    // The restarts did hit the workload.
    expect(seen.transportFailures, JSON.stringify([...seen.answers])).toBeGreaterThan(0);
    expect([...seen.answers.keys()].filter((k) => k.startsWith('5') && !k.startsWith('503'))).toEqual([]);
    await verifyLog(url, users, bundles, acks);
  });

  it('PostgreSQL stops and starts mid-workload: 503 during the outage (never 500), then the same retries converge', async () => {
    const major = inject('pgMajor') as PgMajor;
    const dataDir = mkdtempSync(join(tmpdir(), `lockstep-restart-pg${major}-`));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    let cluster = await startEmbedded(major, { dataDir, persistent: true });
    const pgPort = cluster.port;
    cleanups.push(() => cluster.stop());
    const url = await createDatabase(cluster.adminUrl, 'restart');
    await bootstrapAppSchema(url);

    // Reach the private cluster the way this project reaches its own server.
    const project = inject('pgRuntime') ?? { driver: 'pg' };
    let poolOptions: PoolOptions = { connectionString: url, max: 6, driver: 'pg' };
    if (project.driver === 'neon') {
      const forwarder = await startWsForwarder({ allow: [`127.0.0.1:${pgPort}`] });
      cleanups.push(() => forwarder.close());
      poolOptions = { connectionString: url, max: 6, driver: 'neon', neonWsProxy: forwarder.proxy };
    } else if (project.bouncerPort !== undefined) {
      // A short query wait and login retry: while the server is down PgBouncer fails queued
      // queries after 2 s (the runtime's 503) and retries the login every second once it is back.
      const bouncer = await startPgBouncer(cluster.adminUrl, { queryWaitTimeoutSeconds: 2, serverLoginRetrySeconds: 1 });
      cleanups.push(() => bouncer.stop());
      poolOptions = { connectionString: bouncer.rewrite(url), max: 6, driver: 'pg' };
    }
    const served = await serve(url, poolOptions);
    cleanups.push(() => served.pool.end(), () => served.gateway.close());

    const users = ['p-ann', 'p-ben', 'p-cat'];
    const bundles = 12;
    const seen = new Observations();
    const acks: Ack[] = [];
    const clients = users.map((u) => apiClient(served.gateway.url, u, `${u}-dev`));
    for (const c of clients) await initEmpty(c);
    const deadline = Date.now() + 10 * 60_000;
    const work = Promise.all(clients.map((c) => device(c, bundles, seen, acks, deadline)));

    while (acks.length < 9) await sleep(5);
    const down = Date.now();
    await cluster.stop();
    const ackedBeforeOutage = acks.length;
    // Keep it down long enough for PgBouncer's query wait, and until the devices have met the
    // outage (a 503 after the stop: an event, however busy the machine).
    await sleep(3000);
    await until('a device met the outage', () => seen.between(down, Date.now()).filter((w) => w.startsWith('503')).length, (n) => n > 0);
    const acksDuringOutage = acks.length - ackedBeforeOutage;
    cluster = await startEmbedded(major, { dataDir, port: pgPort, persistent: true });
    const up = Date.now();
    await work;

    expect(seen.unexpected).toEqual([]);
    const outage = seen.between(down, up);
    // During the outage: only 503s (or answers of requests that completed just before the stop).
    expect(outage.filter((w) => w.startsWith('503')).length, JSON.stringify(outage)).toBeGreaterThan(0);
    expect(outage.filter((w) => !w.startsWith('503') && !w.startsWith('200')), JSON.stringify(outage)).toEqual([]);
    expect(acksDuringOutage).toBeLessThanOrEqual(users.length);
    for (const what of seen.answers.keys()) {
      if (what.startsWith('503')) expect(['503 service_unavailable', '503 commit_outcome_unknown']).toContain(what);
      expect(what.startsWith('500'), what).toBe(false);
    }
    expect(seen.transportFailures).toBe(0);
    await verifyLog(url, users, bundles, acks);
    const health = await apiClient(served.gateway.url, 'p-ann').get('/syncx/health');
    expect(health.status).toBe(200);
    console.log(`restarts: outage ${up - down} ms; answers ${JSON.stringify(Object.fromEntries(seen.answers))}`);
  });
});
