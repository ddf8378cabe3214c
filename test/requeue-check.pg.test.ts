/**
 * Issue 24 (a defect a new user met in the demo): Retry on a set-aside to-do whose list was deleted
 * on another device failed with a raw `FOREIGN KEY constraint failed`. A re-queue that cannot
 * succeed is now refused with `quarantine_parent_missing`, naming the missing list, and a re-queue
 * with a fix that points at an existing list goes through. Real wa-sqlite, HTTP, PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientError } from '../client-web/errors.js';
import { blobOfUuid, openDevice, serverState, write, type Device } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';

describe('re-queueing a quarantined row whose parent is gone', () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('is refused with the missing parent named; with a fix pointing at another list it syncs', async () => {
    const user = 'requeue-parent';
    const a = await openDevice(s, user, { config: { onRejected: 'quarantine' } });
    const b = await openDevice(s, user);
    devices.push(a, b);
    await a.client.attach(user);
    await b.client.attach(user);
    const party = randomUUID();
    const home = randomUUID();
    await write.list(a.db, party, 'party');
    await write.list(a.db, home, 'home');
    await a.client.sync();
    await b.client.sync();
    // A adds a to-do to the party list offline; B deletes the list meanwhile.
    const balloons = randomUUID();
    await write.item(a.db, balloons, party, 'balloons');
    await write.deleteList(b.db, party);
    await b.client.sync();
    expect((await a.client.sync()).push).toMatchObject({ quarantinedRows: 1 });
    const [q] = await a.client.quarantined();
    expect(q).toMatchObject({ table: 'items', key: balloons, op: 'INSERT' });
    await a.client.sync();

    const refused = await a.client.requeueQuarantined(q?.id as number).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ClientError);
    expect(refused).toMatchObject({
      code: 'quarantine_parent_missing',
      details: { missing: [{ column: 'list_id', localTable: 'lists', schema: 'app', table: 'lists', key: party }] },
    });
    // Nothing changed: the row is still set aside.
    expect((await a.client.quarantined()).map((r) => r.id)).toEqual([q?.id]);

    await a.client.requeueQuarantined(q?.id as number, { list_id: blobOfUuid(home) });
    expect(await a.client.quarantined()).toEqual([]);
    await a.client.sync();
    expect((await serverState(s, user)).items[balloons]).toMatchObject({ list_id: home, body: 'balloons' });
  });
});
