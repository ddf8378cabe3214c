/**
 * Regression (found by test/convergence.pg.test.ts, seed 7, run 10): server rows whose parent is
 * not in the local database broke the local apply transaction at COMMIT (deferred FOREIGN KEY
 * constraint failed), and since the same rows came again on every retry the device was stuck
 * for good.
 *
 * 1. A push conflict the server wins applies the server's row; that row sits in a list this
 *    device has not pulled yet. (The fuzzer's case, deterministic here.)
 * 2. A pull brings an item into a list this device has deleted locally and not pushed yet.
 * 3. A rebuild's snapshot holds an item of such a locally deleted list.
 *
 * Case 1: the orphan is dropped and `rebuild_required` set, so the sync's pull rebuilds with the
 * list. Cases 2–3: the local delete of the list cascades to the arriving item as a local change
 * (as SQLite's cascade would have done had the item arrived first), pushed with the list's delete.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectConverged, openDevice, serverState, write, type Device } from '../support/client-harness.js';
import { startTestServer, type TestServer } from '../support/server.js';

const uuid = () => randomUUID();

describe('regression: rows arriving without their parent locally', () => {
  let s: TestServer;
  const devices: Device[] = [];
  const trio = async (user: string) => {
    const ds: Device[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await openDevice(s, user);
      devices.push(d);
      await d.client.attach(user);
      ds.push(d);
    }
    return ds as [Device, Device, Device];
  };
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('a push conflict the server wins, whose server row is in a list not pulled yet', async () => {
    const [a, b, c] = await trio('orphan-conflict');
    // A's list reaches the server; B pulls it and puts item K in it.
    const listA = uuid();
    await write.list(a.db, listA, 'A');
    await a.client.sync();
    await b.client.sync();
    const k = uuid();
    await write.item(b.db, k, listA, 'from B');
    await b.client.sync();
    // C never pulled: it inserts the same key K into a list of its own and pushes.
    const listC = uuid();
    await write.list(c.db, listC, 'C');
    await write.item(c.db, k, listC, 'from C');
    const pushed = await c.client.pushPending();
    expect(pushed).toMatchObject({ status: 'committed', conflictsResolved: 1 });
    await c.client.sync();
    await a.client.sync();
    await b.client.sync();
    const state = await expectConverged(s, 'orphan-conflict', a, b, c);
    expect(state.items[k]).toMatchObject({ list_id: listA, body: 'from B' });
    expect(Object.keys(state.lists).sort()).toEqual([listA, listC].sort());
  });

  it('a pull bringing an item into a list deleted locally and not pushed yet', async () => {
    const [a, b] = await trio('orphan-pull');
    const list = uuid();
    await write.list(a.db, list, 'shared');
    await a.client.sync();
    await b.client.sync();
    const k = uuid();
    await write.item(b.db, k, list, 'added by B');
    await b.client.sync();
    await write.deleteList(a.db, list);
    const pulled = await a.client.pullToStable();
    expect(pulled.checkpoint).toBe(2);
    expect(await a.db.query('SELECT id FROM items')).toEqual([]);
    await a.client.sync();
    await b.client.sync();
    const state = await expectConverged(s, 'orphan-pull', a, b);
    expect(state).toEqual({ lists: {}, items: {} });
  });

  it('a rebuild whose snapshot holds an item of a list deleted locally and not pushed yet', async () => {
    const [a, b] = await trio('orphan-rebuild');
    const list = uuid();
    await write.list(a.db, list, 'shared');
    await a.client.sync();
    await b.client.sync();
    await write.item(b.db, uuid(), list, 'added by B');
    await b.client.sync();
    await write.deleteList(a.db, list);
    await a.client.rebuild();
    expect(await a.db.query('SELECT id FROM items')).toEqual([]);
    await a.client.sync();
    await b.client.sync();
    expect(await expectConverged(s, 'orphan-rebuild', a, b)).toEqual({ lists: {}, items: {} });
    expect(await serverState(s, 'orphan-rebuild')).toEqual({ lists: {}, items: {} });
  });
});
