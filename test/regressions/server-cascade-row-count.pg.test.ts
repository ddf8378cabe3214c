/**
 * Regression (found by test/convergence.pg.test.ts, seed 12345, run 2): the replay after a push
 * required the committed bundle's row_count to equal the frozen bundle's, but the server captures
 * its own cascades into the same bundle. A device deleting a list that holds an item it has not
 * pulled yet pushed 1 row and the server committed 2 (the list and the cascaded item): the client
 * raised protocol_violation, kept the bundle frozen, and failed the same way on every retry.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { clientSuite, expectConverged, openDevice, write } from '../support/client-harness.js';
import { type TestServer } from '../support/server.js';

describe('regression: a committed bundle larger than the pushed one (server cascade)', () => {
  let s: TestServer;
  const devices = clientSuite((server) => (s = server));

  it('deleting a list with an item this device never saw commits, replays and converges', async () => {
    const [a, b] = [await openDevice(s, 'cascade-count'), await openDevice(s, 'cascade-count')];
    devices.push(a, b);
    await a.client.attach('cascade-count');
    await b.client.attach('cascade-count');
    const list = randomUUID();
    await write.list(a.db, list, 'shared');
    await a.client.sync();
    await b.client.sync();
    await write.item(a.db, randomUUID(), list, 'B has not seen this');
    await a.client.sync();
    await write.deleteList(b.db, list);
    const pushed = await b.client.pushPending();
    expect(pushed).toMatchObject({ status: 'committed', rowCount: 2, alreadyCommitted: false });
    // Bundle 2 (A's item) is not pulled yet, so the checkpoint stays below the replayed bundle 3.
    expect(await b.client.pendingStatus()).toMatchObject({ frozenRows: 0, dirtyRows: 0, checkpoint: 1 });
    await b.client.sync();
    await a.client.sync();
    expect(await expectConverged(s, 'cascade-count', a, b)).toEqual({ lists: {}, items: {} });
  });
});
