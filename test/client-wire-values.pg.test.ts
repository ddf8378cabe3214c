/**
 * Issue 15 item 1, end to end through the real client: with the demo schema, one device writes the
 * values JSON and RFC 3339 cannot spell (timestamptz infinities, a date before the common era);
 * the server stores them exactly, and another attached device and a fresh device receive them
 * exactly, with no NOT NULL failure and nothing stuck (protocol §4.2). Before the fix the other
 * devices received null and every sync() failed on the NOT NULL column.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TableConfig } from '../client-web/api.js';
import { parseTables } from '../core/config.js';
import { DEMO_SCHEMA_SQL, DEMO_SYNC_TABLES } from '../demo/schema.js';
import { openDevice, type Device } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';

const LOCAL_SQL = `
CREATE TABLE IF NOT EXISTS lists (id TEXT PRIMARY KEY, title TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS todos (id TEXT PRIMARY KEY, list_id TEXT NOT NULL REFERENCES lists (id) ON DELETE CASCADE,
  title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL);
`;
const TABLES: readonly TableConfig[] = [{ schema: 'demo', table: 'lists' }, { schema: 'demo', table: 'todos' }];

const LIST = '00000000-0000-4000-8000-000000000001';
const FOREVER = '00000000-0000-4000-8000-000000000011';
const ANCIENT = '00000000-0000-4000-8000-000000000012';
const BIG_BANG = '00000000-0000-4000-8000-000000000013';

describe('values JSON cannot spell, through the real client (protocol §4.2)', () => {
  let s: TestServer;
  const devices: Device[] = [];
  const device = async (name: string) => {
    const d = await openDevice(s, 'eve', { schemaSql: LOCAL_SQL, tables: TABLES });
    devices.push(d);
    expect(await d.client.attach('eve'), name).toMatchObject({ status: 'attached' });
    return d;
  };
  const todos = async (d: Device) => d.db.query('SELECT id, title, updated_at FROM todos ORDER BY id');

  beforeAll(async () => {
    s = await startTestServer({ schemaSql: DEMO_SCHEMA_SQL, tables: parseTables(DEMO_SYNC_TABLES) });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  it('infinity and BC timestamps reach the server, another device and a fresh device exactly', async () => {
    const writer = await device('writer');
    const reader = await device('reader');
    await writer.db.run('INSERT INTO lists (id, title, created_at) VALUES (?, ?, ?)', [LIST, 'Eras', '-0043-03-15T12:00:00Z']);
    const insert = 'INSERT INTO todos (id, list_id, title, updated_at) VALUES (?, ?, ?, ?)';
    await writer.db.run(insert, [FOREVER, LIST, 'forever', 'infinity']);
    await writer.db.run(insert, [ANCIENT, LIST, 'ancient', '-0043-03-15T12:00:00Z']);
    await writer.db.run(insert, [BIG_BANG, LIST, 'before time', '-infinity']);
    expect((await writer.client.sync()).push).toMatchObject({ status: 'committed' });

    // PostgreSQL holds the values themselves, not NULL and not a year of the common era.
    const server = await s.t.exec(`SELECT title, updated_at = 'infinity' AS inf, updated_at = '-infinity' AS neg_inf,
        to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS BC') AS text
      FROM demo.todos WHERE _sync_scope_id = 'eve' ORDER BY id`);
    expect(server.rows).toEqual([
      { title: 'forever', inf: true, neg_inf: false, text: null },
      { title: 'ancient', inf: false, neg_inf: false, text: '0044-03-15 12:00:00 BC' },
      { title: 'before time', inf: false, neg_inf: true, text: null },
    ]);
    const lists = await s.t.exec(`SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD BC') AS d FROM demo.lists WHERE _sync_scope_id = 'eve'`);
    expect(lists.rows).toEqual([{ d: '0044-03-15 BC' }]);

    const expected = [
      { id: FOREVER, title: 'forever', updated_at: 'infinity' },
      // The server's rendering of a year outside 1–9999: all six fraction digits (protocol §4.2).
      { id: ANCIENT, title: 'ancient', updated_at: '-0043-03-15T12:00:00.000000Z' },
      { id: BIG_BANG, title: 'before time', updated_at: '-infinity' },
    ];
    // The other attached device pulls them; a fresh device hydrates them from a snapshot.
    expect((await reader.client.sync()).pull).not.toBeNull();
    expect(await todos(reader)).toEqual(expected);
    const fresh = await device('fresh');
    expect(await todos(fresh)).toEqual(expected);
    expect(await todos(writer)).toEqual(expected);

    // Nothing is stuck: a later ordinary write syncs on every device.
    await reader.db.run(insert.replace('INSERT', 'INSERT OR REPLACE'), [FOREVER, LIST, 'forever, renamed', 'infinity']);
    expect((await reader.client.sync()).push).toMatchObject({ status: 'committed' });
    await fresh.client.sync();
    expect((await todos(fresh))[0]).toEqual({ id: FOREVER, title: 'forever, renamed', updated_at: 'infinity' });
  });
});
