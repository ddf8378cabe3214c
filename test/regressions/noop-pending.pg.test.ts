/**
 * Regression (found by test/convergence.pg.test.ts, seeds 99 and 2024, run 6 each): a key this
 * device inserted and deleted again before pushing leaves a dirty mark that changes nothing
 * (absent locally, "absent" as its base). Pulls and rebuilds treated it as a pending change and
 * kept the server's row of that key out — another device had created the same key — and the next
 * freeze dropped the mark as a no-op. The device had moved past that bundle: it never learned the
 * row, and stayed different from the server for good.
 *
 * Also (seed 99): the pull came while the local insert still stood, so the server's row was kept
 * out rightly (a pending change); the local delete afterwards made the change a no-op, and the
 * freeze forgot the key. Skipped keys are now remembered (_sync_skipped): a key that vanishes
 * after its server row was skipped sets rebuild_required, and the sync's pull rebuilds.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { clientSuite, expectConverged, localState, openDevice, write } from '../support/client-harness.js';
import { type TestServer } from '../support/server.js';

describe('regression: a dirty mark that changes nothing does not hide the server row', () => {
  let s: TestServer;
  const devices = clientSuite((server) => (s = server));

  it('a pull while the local insert stands, then the local delete: the skipped row comes back', async () => {
    const user = 'noop-skip';
    const [a, b] = [await openDevice(s, user), await openDevice(s, user)];
    devices.push(a, b);
    await a.client.attach(user);
    await b.client.attach(user);
    const list = randomUUID();
    await write.list(a.db, list, 'shared');
    await a.client.sync();
    await b.client.sync();
    const k = randomUUID();
    await write.item(b.db, k, list, 'B, deleted before any push');
    await write.item(a.db, k, list, 'A keeps it');
    await a.client.sync();
    expect((await b.client.pullToStable()).rowsSkippedPending).toBe(1);
    await write.deleteItem(b.db, k);
    await b.client.sync();
    await a.client.sync();
    expect((await expectConverged(s, user, a, b)).items[k]?.body).toBe('A keeps it');
  });

  for (const how of ['pull', 'rebuild'] as const) {
    it(`${how}: a key inserted and deleted locally, created meanwhile by another device`, async () => {
      const user = `noop-${how}`;
      const [a, b] = [await openDevice(s, user), await openDevice(s, user)];
      devices.push(a, b);
      await a.client.attach(user);
      await b.client.attach(user);
      const list = randomUUID();
      await write.list(a.db, list, 'shared');
      await a.client.sync();
      await b.client.sync();
      const k = randomUUID();
      await write.item(b.db, k, list, 'B, deleted before any push');
      await write.item(a.db, k, list, 'A keeps it');
      await a.client.sync();
      await write.deleteItem(b.db, k);
      if (how === 'pull') await b.client.pullToStable();
      else await b.client.rebuild();
      expect((await localState(b.db)).items[k]?.body).toBe('A keeps it');
      await b.client.sync();
      await a.client.sync();
      expect((await expectConverged(s, user, a, b)).items[k]?.body).toBe('A keeps it');
    });
  }
});
