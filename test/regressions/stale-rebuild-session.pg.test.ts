/**
 * Regression (found by test/convergence.pg.test.ts, seed 5150, run 21): a rebuild cut off after
 * its snapshot session was recorded left that session to be resumed by the next rebuild() — even
 * after pulls and pushes had applied newer bundles. The resumed, older snapshot then moved the
 * checkpoint back and deleted rows of those newer bundles with their base versions; a local write
 * to such a row before the next pull went out with base 0 and lost to the server as a conflict.
 * A pull page or push replay past the recorded snapshot now drops the stale session.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HttpApiEvent } from '../../functions/index.js';
import { expectConverged, localState, openDevice, write, type Device } from '../support/client-harness.js';
import { startTestServer, type TestServer } from '../support/server.js';

describe('regression: a stale interrupted rebuild is not resumed over newer data', () => {
  let s: TestServer;
  let failSnapshotPages = false;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({
      intercept: async (event: HttpApiEvent, next) => {
        if (failSnapshotPages && event.requestContext.http.method === 'GET' && event.rawPath.startsWith('/sync/snapshot-sessions/')) {
          return { statusCode: 500, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ error: 'internal', message: 'injected' }) };
        }
        return next();
      },
    });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('rebuild cut off, then a push and a pull, then rebuild(): no rows go missing, no write is lost', async () => {
    // A asks for every snapshot page on its own, so the injected failure cuts its rebuild off
    // after the session was recorded (a create answering the page would carry the one row).
    const [a, b] = [await openDevice(s, 'stale-rebuild', { config: { snapshotFirstPage: false } }), await openDevice(s, 'stale-rebuild')];
    devices.push(a, b);
    await a.client.attach('stale-rebuild');
    await b.client.attach('stale-rebuild');
    await write.list(b.db, randomUUID(), 'before');
    await b.client.sync();
    await a.client.sync();
    // A's rebuild records its session (snapshot at bundle 1), then every page fails.
    failSnapshotPages = true;
    await expect(a.client.rebuild()).rejects.toBeDefined();
    failSnapshotPages = false;
    expect(await a.db.query('SELECT snapshot_bundle_seq FROM _sync_rebuild_state')).toHaveLength(1);
    // Newer bundles arrive: A's own push and B's, pulled.
    const mine = randomUUID();
    await write.list(a.db, mine, 'A, first');
    await a.client.sync();
    await write.list(b.db, randomUUID(), 'after');
    await b.client.sync();
    await a.client.sync();
    const checkpoint = (await a.client.pendingStatus()).checkpoint;
    const rebuilt = await a.client.rebuild();
    expect(rebuilt.resumed).toBe(false);
    expect(rebuilt.snapshotBundleSeq).toBeGreaterThanOrEqual(checkpoint);
    expect((await localState(a.db)).lists[mine]?.title).toBe('A, first');
    await write.list(a.db, mine, 'A, second');
    expect(await a.client.pushPending()).toMatchObject({ status: 'committed', conflictsResolved: 0 });
    await b.client.sync();
    expect((await expectConverged(s, 'stale-rebuild', a, b)).lists[mine]?.title).toBe('A, second');
  });
});
