/**
 * Issue 16 (the quarantine): a rejected bundle is salvaged, not just discarded. The
 * row `push_rejected` names (and the rows of the bundle depending on it by foreign key) move into
 * `_sync_quarantine` with the violation, the rest is pushed, later writes keep flowing, and the app
 * lists the quarantine, fixes and re-queues a row, or drops it. Real wa-sqlite, HTTP, PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { blobOfUuid, expectConverged, localState, openDevice, serverState, write, type Device, type DeviceOptions } from './support/client-harness.js';
import { APP_SCHEMA_SQL } from './support/schemas.js';
import { startTestServer, type TestServer } from './support/server.js';

const uuid = () => randomUUID();
/**
 * A constraint only the server has: a list title may not be blank. And an app trigger that refuses
 * a label with its own exception, which names no row.
 */
const SCHEMA_SQL = `${APP_SCHEMA_SQL}
ALTER TABLE app.lists ADD CONSTRAINT lists_title_not_blank CHECK (title <> '');
CREATE FUNCTION app.refuse_forbidden() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.label = 'forbidden' THEN RAISE EXCEPTION 'this label is forbidden'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_forbidden BEFORE INSERT OR UPDATE ON app.kinds FOR EACH ROW EXECUTE FUNCTION app.refuse_forbidden();`;

describe('web client: rejected bundles are salvaged into the quarantine', () => {
  let s: TestServer;
  const devices: Device[] = [];
  const device = async (user: string, options: DeviceOptions = {}) => {
    const d = await openDevice(s, user, options);
    devices.push(d);
    return d;
  };
  const quarantining = { config: { onRejected: 'quarantine' as const } };
  const kinds = async (user: string) =>
    (await s.t.exec('SELECT code, label FROM app.kinds WHERE _sync_scope_id = $1 ORDER BY code', [user])).rows as { code: string; label: string }[];
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA_SQL, tables: parseTables('app.lists:id,app.items:id,app.kinds:code') });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('one bad row among 100: 99 commit, one is quarantined with its reason, then fixed and re-pushed', async () => {
    const user = 'q-hundred';
    const a = await device(user);
    const b = await device(user, quarantining);
    await a.client.attach(user);
    await b.client.attach(user);
    await a.db.run("INSERT INTO kinds (code, label) VALUES ('k-first', 'taken')");
    await a.client.sync();
    // B has not pulled A's row: one of its 100 new rows takes the same unique label.
    for (let i = 0; i < 100; i++) await b.db.run('INSERT INTO kinds (code, label) VALUES (?, ?)', [`k-${String(i).padStart(3, '0')}`, i === 42 ? 'taken' : `label ${i}`]);
    const result = await b.client.sync();
    expect(result.push).toMatchObject({ status: 'committed', rowCount: 99, quarantinedRows: 1 });
    expect((await kinds(user)).length).toBe(100);
    const [q, ...more] = await b.client.quarantined();
    expect(more).toEqual([]);
    expect(q).toMatchObject({
      schema: 'app', table: 'kinds', localTable: 'kinds', key: 'k-042', op: 'INSERT', code: 'push_rejected', dependsOn: null,
      row: expect.objectContaining({ code: 'k-042', label: 'taken' }),
      violation: expect.objectContaining({ sqlstate: '23505', constraint: 'kinds_label_key', table: 'kinds', key: { code: 'k-042' } }),
    });
    // The local table holds what the server holds: the refused new row is gone, nothing is pending.
    expect(await b.db.query("SELECT code FROM kinds WHERE code = 'k-042'")).toEqual([]);
    expect(await b.client.pendingStatus()).toMatchObject({ dirtyRows: 0, frozenRows: 0, rejected: null, quarantinedRows: 1 });
    // Later writes keep flowing.
    await b.db.run("INSERT INTO kinds (code, label) VALUES ('k-later', 'later')");
    expect((await b.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });

    // The app fixes the row and re-queues it: it is pushed with the next bundle.
    await b.client.requeueQuarantined(q?.id as number, { label: 'fixed' });
    expect(await b.client.quarantined()).toEqual([]);
    expect((await b.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
    expect((await kinds(user)).find((k) => k.code === 'k-042')).toEqual({ code: 'k-042', label: 'fixed' });
    await a.client.sync();
    expect(await a.db.query('SELECT code, label FROM kinds ORDER BY code')).toEqual(await b.db.query('SELECT code, label FROM kinds ORDER BY code'));
  });

  it('a refused change of a row the server knows is quarantined and the row gets the server version back; dropping forgets it', async () => {
    const user = 'q-update';
    const b = await device(user, quarantining);
    await b.client.attach(user);
    await b.db.run("INSERT INTO kinds (code, label) VALUES ('k1', 'one'), ('k2', 'two')");
    await b.client.sync();
    await b.db.run("UPDATE kinds SET label = 'one' WHERE code = 'k2'");
    await b.db.run("INSERT INTO kinds (code, label) VALUES ('k3', 'three')");
    const result = await b.client.sync();
    expect(result.push).toMatchObject({ status: 'committed', rowCount: 1, quarantinedRows: 1 });
    const [q] = await b.client.quarantined();
    expect(q).toMatchObject({ key: 'k2', op: 'UPDATE', row: expect.objectContaining({ label: 'one' }) });
    // The same sync rebuilt the row from the server.
    expect(await b.db.query('SELECT code, label FROM kinds ORDER BY code')).toEqual([{ code: 'k1', label: 'one' }, { code: 'k2', label: 'two' }, { code: 'k3', label: 'three' }]);
    await b.client.dropQuarantined(q?.id as number);
    expect(await b.client.quarantined()).toEqual([]);
    expect(await b.client.pendingStatus()).toMatchObject({ dirtyRows: 0, quarantinedRows: 0, rebuildRequired: false });
    expect(await kinds(user)).toEqual([{ code: 'k1', label: 'one' }, { code: 'k2', label: 'two' }, { code: 'k3', label: 'three' }]);
    await expect(b.client.dropQuarantined(q?.id as number)).rejects.toMatchObject({ code: 'quarantine_not_found' });
  });

  it('held by default; quarantineRejected() moves the row and the rows depending on it, and the rest is pushed', async () => {
    const user = 'q-dependents';
    const a = await device(user);
    await a.client.attach(user);
    const blank = uuid();
    await write.list(a.db, blank, '');
    const items = [uuid(), uuid(), uuid()];
    for (const id of items) await write.item(a.db, id, blank, `under the blank list ${id.slice(0, 4)}`);
    const others = Array.from({ length: 10 }, () => uuid());
    for (const id of others) await write.list(a.db, id, `list ${id.slice(0, 4)}`);
    const held = await a.client.sync();
    expect(held.push).toMatchObject({ status: 'rejected', code: 'push_rejected', violation: expect.objectContaining({ constraint: 'lists_title_not_blank', table: 'lists', key: { id: blank } }) });
    expect((await a.client.pendingStatus()).rejected).toMatchObject({ code: 'push_rejected' });

    expect(await a.client.quarantineRejected()).toEqual({ quarantinedRows: 4 });
    const quarantined = await a.client.quarantined();
    const list = quarantined.find((r) => r.table === 'lists');
    expect(list).toMatchObject({ key: blank, op: 'INSERT', dependsOn: null, violation: expect.objectContaining({ constraint: 'lists_title_not_blank' }) });
    expect(quarantined.filter((r) => r.table === 'items').map((r) => [r.key, r.dependsOn]).sort()).toEqual(items.map((id) => [id, list?.id]).sort());
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 10 });
    expect(Object.keys((await serverState(s, user)).lists).sort()).toEqual([...others].sort());
    expect((await localState(a.db)).lists[blank]).toBeUndefined();

    // Fixed: the list first, then its items as they were.
    await a.client.requeueQuarantined(list?.id as number, { title: 'named now' });
    for (const r of quarantined.filter((q) => q.table === 'items')) await a.client.requeueQuarantined(r.id);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 4 });
    const state = await expectConverged(s, user, a);
    expect(state.lists[blank]?.title).toBe('named now');
    expect(Object.values(state.items).filter((i) => i.list_id === blank)).toHaveLength(3);
    expect(await a.db.query('SELECT count(*) AS n FROM items WHERE list_id = ?', [blobOfUuid(blank)])).toEqual([{ n: 3 }]);
  });

  it('a value PostgreSQL cannot store is named like a constraint (its table and row), so it is salvaged', async () => {
    const user = 'q-unstorable';
    const a = await device(user, quarantining);
    await a.client.attach(user);
    // A value the numeric(20,4) column cannot take: a data exception, found row by row by the server.
    // (Decimal text, so the local write takes it; text that is no number at all is refused there.)
    await a.db.run("INSERT INTO kinds (code, amount) VALUES ('a-ok', '2.5'), ('bad', '1e30'), ('ok', '1.5')");
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 2, quarantinedRows: 1 });
    expect(await a.client.quarantined()).toEqual([expect.objectContaining({
      key: 'bad',
      row: expect.objectContaining({ amount: '1e30' }),
      violation: expect.objectContaining({ sqlstate: '22003', table: 'kinds', key: { code: 'bad' } }),
    })]);
    expect((await kinds(user)).map((k) => k.code)).toEqual(['a-ok', 'ok']);
  });

  it("an app trigger's refusal in a multi-row bundle is named like a constraint: held with its row, or quarantined alone (issue 23 item 7)", async () => {
    const user = 'q-trigger';
    const a = await device(user);
    await a.client.attach(user);
    // The app's trigger raises its own exception, which names no row: the server finds it.
    await a.db.run("INSERT INTO kinds (code, label) VALUES ('a-ok', 'fine'), ('bad', 'forbidden'), ('ok', 'also fine')");
    const held = await a.client.sync();
    expect(held.push).toMatchObject({ status: 'rejected', code: 'push_rejected', violation: { sqlstate: 'P0001', table: 'kinds', key: { code: 'bad' } } });
    expect(held.push.status === 'rejected' && held.push.message).toMatch(/this label is forbidden/);
    expect(await a.client.quarantineRejected()).toEqual({ quarantinedRows: 1 });
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 2 });
    expect((await kinds(user)).map((k) => k.code)).toEqual(['a-ok', 'ok']);
    expect(await a.client.quarantined()).toEqual([expect.objectContaining({ key: 'bad', row: expect.objectContaining({ label: 'forbidden' }), code: 'push_rejected' })]);

    // Quarantine mode: set aside at once, the rest commits.
    const b = await device('q-trigger-b', quarantining);
    await b.client.attach('q-trigger-b');
    await b.db.run("INSERT INTO kinds (code, label) VALUES ('a', 'x'), ('b', 'forbidden'), ('c', 'y')");
    expect((await b.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 2, quarantinedRows: 1 });
    expect((await b.client.quarantined()).map((q) => q.key)).toEqual(['b']);
  });
});
