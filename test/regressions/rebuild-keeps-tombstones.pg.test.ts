/**
 * Regression (found by test/convergence.pg.test.ts, seeds 99 run 10 and 31337 run 19): a rebuild
 * replaced every base version with the snapshot's, and a snapshot carries no tombstones, so the
 * device forgot that it had deleted a key. Its later re-insert of that key went out with base 0,
 * met the server's tombstone as a conflict, and the default policy (server wins) dropped the
 * write — though nobody else had touched the key. Tombstones of keys the snapshot lacks now
 * survive the rebuild.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { clientSuite, expectConverged, openDevice, write } from '../support/client-harness.js';
import { type TestServer } from '../support/server.js';

describe('regression: a rebuild keeps the tombstones of keys the snapshot lacks', () => {
  let s: TestServer;
  const devices = clientSuite((server) => (s = server));

  it('insert, delete, rebuild, insert again: the last insert lands', async () => {
    const [a, b] = [await openDevice(s, 'tombstone'), await openDevice(s, 'tombstone')];
    devices.push(a, b);
    await a.client.attach('tombstone');
    await b.client.attach('tombstone');
    const list = randomUUID();
    await write.list(a.db, list, 'first life');
    await a.client.sync();
    await write.deleteList(a.db, list);
    await a.client.sync();
    await a.client.rebuild();
    await write.list(a.db, list, 'second life');
    const pushed = await a.client.pushPending();
    expect(pushed).toMatchObject({ status: 'committed', conflictsResolved: 0 });
    await b.client.sync();
    expect((await expectConverged(s, 'tombstone', a, b)).lists[list]?.title).toBe('second life');
  });
});
