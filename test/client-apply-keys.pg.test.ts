/**
 * Foreign keys while the client applies pulled bundles (client-web/apply.ts, `KeyChecks`). A small
 * page applies with immediate key checks first, because the pragma that defers them makes SQLite
 * prepare every statement again; a page whose order breaks a key at a statement's end runs again
 * deferred. The server writes a bundle's rows in its tables' order (parents first), but a server
 * whose order lags its foreign keys (an operator's hand edit of `apply_order`, as in
 * client-recovery's snapshot case) sends a child before its parent: the page must apply whole,
 * small or large. (A parent missing locally, which fails both checks, is regressions/orphan-rows.)
 */
import { describe, expect, it } from 'vitest';
import { IMMEDIATE_KEYS_ROWS } from '../client-web/apply.js';
import { clientSuite, expectConverged, openDevice } from './support/client-harness.js';
import { sql } from '../core/db/index.js';
import { type TestServer } from './support/server.js';
import { initEmpty, item, list, pushOk, uuid } from './support/write-helpers.js';

describe('client apply: foreign keys in the order a bundle brings them', () => {
  let s: TestServer;
  const devices = clientSuite((server) => (s = server));

  /** Runs `fn` with lists after items in the server's table order, as an operator holding the bootstrap lock would set it. */
  const listsLast = async (fn: () => Promise<void>) => {
    const [lists] = await s.t.db.query<{ apply_order: number }>(sql`SELECT apply_order FROM sync.table_catalog WHERE table_name = 'lists'`);
    const order = lists?.apply_order as number;
    const set = (to: number) => s.t.exec(`BEGIN; SELECT pg_advisory_xact_lock(7020140421);
      UPDATE sync.table_catalog SET apply_order = ${to} WHERE table_name = 'lists'; COMMIT`);
    await set(9999);
    try {
      await fn();
    } finally {
      await set(order);
    }
  };

  /** A device attached to an empty stream, and a raw writer of the same user. */
  const setup = async (user: string) => {
    const d = await openDevice(s, user);
    devices.push(d);
    await d.client.attach(user);
    const writer = s.client(user, `raw-${user}`);
    await initEmpty(writer);
    return { d, writer };
  };

  it('a small bundle with an item before its list applies whole (the immediate check fails, the page runs again deferred)', async () => {
    const { d, writer } = await setup('keys-small');
    const listId = uuid();
    const k = uuid();
    await listsLast(async () => {
      await pushOk(writer, [list(listId, 'parent'), item(k, listId, 'child')], { sourceBundleId: 1 });
    });
    // The bundle as committed: the item first.
    const page = await writer.get('/sync/committed-bundles/1/rows?after_row_ordinal=0');
    expect(page.body.rows.map((r: { table: string }) => r.table)).toEqual(['items', 'lists']);
    const pulled = await d.client.pullToStable();
    expect(pulled).toMatchObject({ checkpoint: 1, rowsApplied: 2 });
    const state = await expectConverged(s, 'keys-small', d);
    expect(state.items[k]).toMatchObject({ list_id: listId, body: 'child' });
    // The next small bundle, in order, applies as usual on the same connection.
    const k2 = uuid();
    await pushOk(writer, [item(k2, listId, 'in order')], { sourceBundleId: 2 });
    expect(await d.client.pullToStable()).toMatchObject({ checkpoint: 2, rowsApplied: 1 });
    expect((await expectConverged(s, 'keys-small', d)).items[k2]).toMatchObject({ body: 'in order' });
    expect((await d.client.pendingStatus()).dirtyRows).toBe(0);
  });

  it('a bundle above the immediate bound with items before their list applies deferred at once', async () => {
    const { d, writer } = await setup('keys-large');
    const listId = uuid();
    const items = Array.from({ length: IMMEDIATE_KEYS_ROWS + 10 }, (_, i) => item(uuid(), listId, `item ${i}`));
    await listsLast(async () => {
      await pushOk(writer, [list(listId, 'parent'), ...items], { sourceBundleId: 1 });
    });
    expect(await d.client.pullToStable()).toMatchObject({ checkpoint: 1, rowsApplied: items.length + 1 });
    const state = await expectConverged(s, 'keys-large', d);
    expect(Object.keys(state.items)).toHaveLength(items.length);
  });
});
