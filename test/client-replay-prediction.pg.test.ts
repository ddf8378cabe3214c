/**
 * The replay of a device's own bundle built from its pushed rows (client-web/replay-prediction.ts):
 * used only where the bundle hash the server answered proves the guess to be the committed rows,
 * read back otherwise. Real wa-sqlite, HTTP through the local gateway, PostgreSQL; the requests a
 * device makes are counted at its fetch.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { sql } from '../core/db/index.js';
import { serverTimestamptz } from '../client-web/replay-prediction.js';
import { type SqlValue } from '../client-web/sqlite/port.js';
import { openDevice, type Device } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';

const SCHEMA_SQL = `
CREATE SCHEMA app;
CREATE TABLE app.parents (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  at timestamptz,
  PRIMARY KEY (_sync_scope_id, id)
);
CREATE TABLE app.children (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  parent_id uuid NOT NULL,
  body text NOT NULL,
  n integer,
  PRIMARY KEY (_sync_scope_id, id),
  FOREIGN KEY (_sync_scope_id, parent_id) REFERENCES app.parents (_sync_scope_id, id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
);
-- The server rewrites a value: a body that starts with 'shout:' is stored upper-cased.
CREATE FUNCTION app.children_shout() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.body LIKE 'shout:%' THEN NEW.body := upper(NEW.body); END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER children_shout BEFORE INSERT OR UPDATE ON app.children FOR EACH ROW EXECUTE FUNCTION app.children_shout();`;

const LOCAL_SQL = `
CREATE TABLE IF NOT EXISTS parents (id TEXT PRIMARY KEY, title TEXT NOT NULL, at TEXT);
CREATE TABLE IF NOT EXISTS children (id TEXT PRIMARY KEY, parent_id TEXT NOT NULL REFERENCES parents(id) ON DELETE CASCADE, body TEXT NOT NULL, n INTEGER);`;
const TABLES = [{ schema: 'app', table: 'parents' }, { schema: 'app', table: 'children' }];

const P = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

describe('replay of an own bundle from its pushed rows', () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA_SQL, tables: parseTables('app.parents:id,app.children:id') });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  /** A device whose committed-bundle reads (the replay's read back) are counted. */
  const device = async (user: string, predictReplay?: boolean) => {
    const reads = { count: 0 };
    const d = await openDevice(s, user, {
      schemaSql: LOCAL_SQL,
      tables: TABLES,
      config: {
        ...(predictReplay === undefined ? {} : { predictReplay }),
        fetch: (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          if (url.pathname.startsWith('/sync/committed-bundles/')) reads.count++;
          return fetch(input, init);
        },
      },
    });
    devices.push(d);
    await d.client.attach(user);
    return { d, reads };
  };

  /** Both tables as the server holds them, timestamps in the wire's rendering. */
  const serverRows = async (user: string) => ({
    parents: await s.t.db.query<Record<string, unknown>>(sql`SELECT id::text AS id, title, sync.rfc3339(at) AS at FROM app.parents WHERE _sync_scope_id = ${user} ORDER BY id`),
    children: await s.t.db.query<Record<string, unknown>>(sql`SELECT id, parent_id::text AS parent_id, body, n FROM app.children WHERE _sync_scope_id = ${user} ORDER BY id`),
  });
  const localRows = async (d: Device) => ({
    parents: await d.db.query<Record<string, SqlValue>>('SELECT id, title, at FROM parents ORDER BY id'),
    children: await d.db.query<Record<string, SqlValue>>('SELECT id, parent_id, body, n FROM children ORDER BY id'),
  });

  it('a bundle of inserts, updates and deletes over two tables, timestamps in any zone, is not read back, and the device holds what the server committed', async () => {
    const user = 'u-predicted';
    const { d, reads } = await device(user);
    const zones = ['2026-11-28T09:00:00.123Z', '2023-03-01T00:30:00+01:00', '1999-12-31T23:59:59.5-05:00', null];
    for (const [i, at] of zones.entries()) await d.db.run('INSERT INTO parents (id, title, at) VALUES (?, ?, ?)', [P(i + 1), `parent ${i}`, at]);
    for (let i = 0; i < 6; i++) await d.db.run('INSERT INTO children (id, parent_id, body, n) VALUES (?, ?, ?, ?)', [`c${i}`, P((i % 3) + 1), `child ${i}`, i]);
    expect((await d.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 10 });
    expect(reads.count).toBe(0);
    // The device now holds the server's renderings (UTC, microseconds), as a read back would have left it.
    expect((await localRows(d)).parents.map((r) => r['at'])).toEqual(['2026-11-28T09:00:00.123000Z', '2023-02-28T23:30:00.000000Z', '2000-01-01T04:59:59.500000Z', null]);
    expect(await localRows(d)).toEqual(await serverRows(user));

    // Updates and inserts interleaved, deletes in both tables (a parent's children go with it).
    await d.db.run("UPDATE parents SET title = 'renamed', at = '2026-11-28T10:00:00+00:00' WHERE id = ?", [P(1)]);
    await d.db.run('INSERT INTO parents (id, title) VALUES (?, ?)', [P(9), 'new parent']);
    await d.db.run("UPDATE children SET body = 'edited', n = NULL WHERE id = 'c0'");
    await d.db.run("INSERT INTO children (id, parent_id, body) VALUES ('c9', ?, 'new child')", [P(9)]);
    await d.db.run("DELETE FROM children WHERE id = 'c4'");
    await d.db.run('DELETE FROM parents WHERE id = ?', [P(3)]);
    expect((await d.client.sync()).push).toMatchObject({ status: 'committed' });
    expect(reads.count).toBe(0);
    expect(await localRows(d)).toEqual(await serverRows(user));

    // Another device gets the same rows from the server.
    const { d: other } = await device(user);
    expect(await localRows(other)).toEqual(await localRows(d));
  });

  it('a value the server rewrites makes the guess wrong: the bundle is read back and the device holds the server value', async () => {
    const user = 'u-rewritten';
    const { d, reads } = await device(user);
    await d.db.run('INSERT INTO parents (id, title) VALUES (?, ?)', [P(1), 'parent']);
    await d.db.run("INSERT INTO children (id, parent_id, body) VALUES ('a', ?, 'shout: hello'), ('b', ?, 'quiet')", [P(1), P(1)]);
    expect((await d.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 3 });
    expect(reads.count).toBe(1);
    expect((await localRows(d)).children.map((r) => r['body'])).toEqual(['SHOUT: HELLO', 'quiet']);
    expect(await localRows(d)).toEqual(await serverRows(user));
    // The next bundle, nothing rewritten, is not read back.
    await d.db.run("UPDATE children SET body = 'still quiet' WHERE id = 'b'");
    await d.client.sync();
    expect(reads.count).toBe(1);
  });

  it('with predictReplay false every bundle is read back', async () => {
    const user = 'u-read-back';
    const { d, reads } = await device(user, false);
    await d.db.run('INSERT INTO parents (id, title) VALUES (?, ?)', [P(1), 'parent']);
    await d.client.sync();
    await d.db.run("UPDATE parents SET title = 'renamed' WHERE id = ?", [P(1)]);
    await d.client.sync();
    expect(reads.count).toBe(2);
    expect(await localRows(d)).toEqual(await serverRows(user));
  });

  it("the guessed rendering of a timestamptz is PostgreSQL's own, or the text is left as it was", async () => {
    const inputs = [
      '2026-11-28T09:00:00Z', '2026-11-28t09:00:00.1z', '2026-11-28 09:00:00.123456+00', '2026-11-28T09:00:00-0330',
      '2024-02-29T23:30:00-01:00', '2023-03-01T00:30:00+01:00', '0099-06-01T12:00:00Z', '0001-01-01T00:30:00+01:00',
      '9999-12-31T23:30:00-01:00', '2026-11-28T24:00:00Z', '2026-11-28T09:00:00.1234567Z', '2026-11-28T09:00:00',
      '2026-11-28', 'infinity',
    ];
    const declined: string[] = [];
    for (const input of inputs) {
      const guess = serverTimestamptz(input);
      const [row] = await s.t.db.query<{ rendered: string }>(sql`SELECT sync.rfc3339(${input}::timestamptz) AS rendered`);
      if (guess === input) declined.push(input);
      else expect(guess, input).toBe(row?.rendered);
    }
    // Left as they were: no zone, a year outside 1–9999 once in UTC, more than six digits, not a time.
    expect(declined).toEqual(['0001-01-01T00:30:00+01:00', '9999-12-31T23:30:00-01:00', '2026-11-28T09:00:00.1234567Z', '2026-11-28T09:00:00', '2026-11-28', 'infinity']);
  });
});
