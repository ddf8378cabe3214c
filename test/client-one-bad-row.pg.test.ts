/**
 * Issue 23, "no single row can ever stall a device", through the public client API: one bad row of
 * every kind among the good rows of one table — a value the client cannot encode (it slipped past
 * the checks at the write: set aside at freeze), a data exception, a unique clash, a check, a
 * foreign key, a not-null, a row too large for any request, an app trigger's refusal (P0001 and a
 * SQLSTATE of its own) — and every pair of two different kinds. The good rows commit; each bad row
 * is quarantined alone with its table, key, column (where there is one) and reason; the app fixes
 * and re-queues it, or drops it. One bad row under both `onRejected` settings. Real wa-sqlite,
 * HTTP through the local gateway, PostgreSQL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SyncClient } from '../client-web/api.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type SqlValue } from '../client-web/sqlite/port.js';
import { parseTables } from '../core/config.js';
import { openDevice, type Device } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';

const SCHEMA_SQL = `
CREATE SCHEMA app;
CREATE TABLE app.things (
  code text NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  label text,
  amount numeric(8, 2),
  n integer CHECK (n <> -1),
  parent text,
  note text,
  PRIMARY KEY (_sync_scope_id, code),
  UNIQUE (_sync_scope_id, label),
  FOREIGN KEY (_sync_scope_id, parent) REFERENCES app.things (_sync_scope_id, code) DEFERRABLE INITIALLY DEFERRED
);
CREATE FUNCTION app.things_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.note = 'forbidden' THEN RAISE EXCEPTION 'the note of % is forbidden', NEW.code; END IF;
  IF NEW.note = 'vetoed' THEN RAISE EXCEPTION 'the app vetoes %', NEW.code USING ERRCODE = 'AB123'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER things_guard BEFORE INSERT OR UPDATE ON app.things FOR EACH ROW EXECUTE FUNCTION app.things_guard();`;

/** The device's table: title nullable and no foreign key locally, so the server is the one to refuse. */
const LOCAL_SQL = 'CREATE TABLE IF NOT EXISTS things (code TEXT PRIMARY KEY, title TEXT, label TEXT, amount TEXT, n INTEGER, parent TEXT, note TEXT)';
const TABLES = [{ schema: 'app', table: 'things' }];
/** A request limit one oversized row exceeds by itself. */
const MAX_REQUEST_BYTES = 256 * 1024;
const ROWS = 100;

interface Fault {
  readonly kind: string;
  /** The bad row's values over a good row's. */
  readonly values: Readonly<Record<string, SqlValue>>;
  /** Written behind the checks at the write (as a row written before they existed). */
  readonly behindChecks?: true;
  readonly code: string;
  readonly sqlstate: string;
  readonly column: string | null;
  /** What the app changes before re-queueing it. */
  readonly fix: Readonly<Record<string, SqlValue>>;
}

const FAULTS: readonly Fault[] = [
  { kind: 'unencodable', values: { n: 'abc' }, behindChecks: true, code: 'invalid_local_row', sqlstate: '22000', column: 'n', fix: { n: 5 } },
  { kind: 'data exception', values: { amount: '123456789' }, code: 'push_rejected', sqlstate: '22003', column: 'amount', fix: { amount: '2.5' } },
  { kind: 'unique', values: { label: 'dup' }, code: 'push_rejected', sqlstate: '23505', column: null, fix: { label: 'unique again' } },
  { kind: 'check', values: { n: -1 }, code: 'push_rejected', sqlstate: '23514', column: null, fix: { n: 1 } },
  { kind: 'foreign key', values: { parent: 'missing' }, code: 'push_rejected', sqlstate: '23503', column: null, fix: { parent: null } },
  { kind: 'not null', values: { title: null }, code: 'push_rejected', sqlstate: '23502', column: 'title', fix: { title: 'titled' } },
  { kind: 'oversized', values: { note: 'x'.repeat(MAX_REQUEST_BYTES + 40_000) }, code: 'payload_too_large', sqlstate: 'LS413', column: null, fix: { note: 'short now' } },
  { kind: 'app trigger', values: { note: 'forbidden' }, code: 'push_rejected', sqlstate: 'P0001', column: null, fix: { note: 'allowed' } },
  { kind: 'app trigger with its own SQLSTATE', values: { note: 'vetoed' }, code: 'push_rejected', sqlstate: 'AB123', column: null, fix: { note: 'allowed' } },
];

const code = (i: number) => `k-${String(i).padStart(3, '0')}`;
/** Row 10 holds the label the unique fault repeats. */
const goodRow = (i: number): Record<string, SqlValue> => ({ code: code(i), title: `title ${i}`, label: i === 10 ? 'dup' : `label ${i}`, amount: String(i), n: i, parent: null, note: `note ${i}` });

describe('one bad row never stalls a device (issue 23)', () => {
  let s: TestServer;
  let dir: string;
  let devices = 0;
  /** While set, the server answers rejections without the row's key, as one that cannot find it. */
  let anonymous = false;
  let rejectionsAnswered = 0;
  beforeAll(async () => {
    s = await startTestServer({
      schemaSql: SCHEMA_SQL,
      tables: parseTables('app.things:code'),
      env: { SYNC_LIMIT_MAX_REQUEST_BYTES: String(MAX_REQUEST_BYTES) },
      intercept: async (_event, next) => {
        const answer = (await next()) as { statusCode: number; body?: string; isBase64Encoded?: boolean };
        if (!anonymous || answer.statusCode !== 422 || answer.isBase64Encoded || !answer.body) return answer;
        rejectionsAnswered++;
        const body = JSON.parse(answer.body) as { violation?: Record<string, unknown> };
        return { ...answer, body: JSON.stringify({ ...body, violation: body.violation && { ...body.violation, key: null } }) };
      },
    });
    dir = mkdtempSync(join(tmpdir(), 'lockstep-bad-row-'));
  });
  afterAll(async () => {
    await s?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const serverCodes = async (user: string) => (await s.t.exec('SELECT code FROM app.things WHERE _sync_scope_id = $1 ORDER BY code', [user])).rows.map((r) => r.code as string);
  const allBut = (...bad: number[]) => Array.from({ length: ROWS }, (_, i) => i).filter((i) => !bad.includes(i)).map(code);

  /** An attached device (file-backed: a fault written behind the checks needs a restart) with 100 rows, `faults` at their positions. */
  async function deviceWith(user: string, onRejected: 'hold' | 'quarantine', faults: readonly (readonly [number, Fault])[]): Promise<Device> {
    const path = join(dir, `device-${devices++}.db`);
    const d = await openDevice(s, user, { path, schemaSql: LOCAL_SQL, tables: TABLES, config: { onRejected } });
    await d.client.attach(user);
    const at = new Map(faults);
    await d.client.db.transaction(async (tx) => {
      for (let i = 0; i < ROWS; i++) {
        const fault = at.get(i);
        const row = { ...goodRow(i), ...(fault && !fault.behindChecks ? fault.values : {}) };
        const cols = Object.keys(row);
        await tx.run(`INSERT INTO things (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, cols.map((c) => row[c] ?? null));
      }
    });
    const behind = faults.filter(([, f]) => f.behindChecks);
    if (behind.length > 0) {
      // As a row an older app version wrote before the checks existed: its change is pending,
      // its value cannot be encoded. The triggers are back after the restart.
      await d.client.close();
      const raw = await openNodeSqlite({ path });
      for (const { name } of await raw.query<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\\_sync\\_trg\\_%' ESCAPE '\\'")) {
        await raw.exec(`DROP TRIGGER "${name}"`);
      }
      for (const [i, f] of behind) {
        const cols = Object.keys(f.values);
        await raw.run(`UPDATE things SET ${cols.map((c) => `${c} = ?`).join(', ')} WHERE code = ?`, [...cols.map((c) => f.values[c] ?? null), code(i)]);
      }
      await raw.close();
      await d.reopen();
    }
    return d;
  }

  function expectQuarantined(q: Awaited<ReturnType<SyncClient['quarantined']>>[number] | undefined, at: number, f: Fault): void {
    expect(q, f.kind).toMatchObject({
      schema: 'app', table: 'things', localTable: 'things', key: code(at), op: 'INSERT', code: f.code, dependsOn: null,
      row: expect.objectContaining({ code: code(at), ...(f.kind === 'oversized' ? {} : f.values) }),
      violation: expect.objectContaining({ sqlstate: f.sqlstate, schema: 'app', table: 'things', key: { code: code(at) }, ...(f.column ? { column: f.column } : {}) }),
    });
  }

  for (const f of FAULTS) {
    it(`${f.kind}, quarantine mode: 99 commit, the one is quarantined with its reason, fixed and re-queued`, async () => {
      const user = `one-q-${f.kind.replaceAll(' ', '-')}`;
      const d = await deviceWith(user, 'quarantine', [[42, f]]);
      try {
        expect((await d.client.sync()).push).toMatchObject({ status: 'committed', rowCount: ROWS - 1, quarantinedRows: 1 });
        expect(await serverCodes(user)).toEqual(allBut(42));
        const [q, ...more] = await d.client.quarantined();
        expect(more).toEqual([]);
        expectQuarantined(q, 42, f);
        expect(await d.client.pendingStatus()).toMatchObject({ dirtyRows: 0, frozenRows: 0, rejected: null, quarantinedRows: 1 });
        await d.client.requeueQuarantined(q?.id as number, f.fix);
        expect((await d.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
        expect(await serverCodes(user)).toEqual(allBut());
        const [fixed] = (await s.t.exec('SELECT title, label, trim_scale(amount)::text AS amount, n, parent, note FROM app.things WHERE _sync_scope_id = $1 AND code = $2', [user, code(42)])).rows;
        const expected = { ...goodRow(42), ...f.values, ...f.fix };
        expect(fixed).toEqual({ title: expected['title'], label: expected['label'], amount: expected['amount'], n: expected['n'], parent: expected['parent'], note: expected['note'] });
        expect(await d.client.quarantined()).toEqual([]);
      } finally {
        await d.close();
      }
    });

    it(`${f.kind}, hold mode: ${f.behindChecks ? 'set aside at freeze all the same' : 'held with its row named, quarantineRejected() moves it'}; dropped`, async () => {
      const user = `one-h-${f.kind.replaceAll(' ', '-')}`;
      const d = await deviceWith(user, 'hold', [[42, f]]);
      try {
        const first = (await d.client.sync()).push;
        if (f.behindChecks) {
          // It can never be pushed as it is: holding it would hold the device.
          expect(first).toMatchObject({ status: 'committed', rowCount: ROWS - 1, quarantinedRows: 1 });
        } else {
          expect(first).toMatchObject({ status: 'rejected', code: f.code, violation: expect.objectContaining({ sqlstate: f.sqlstate, table: 'things', key: { code: code(42) } }) });
          expect(await d.client.quarantineRejected()).toEqual({ quarantinedRows: 1 });
          expect((await d.client.sync()).push).toMatchObject({ status: 'committed', rowCount: ROWS - 1 });
        }
        expect(await serverCodes(user)).toEqual(allBut(42));
        const [q, ...more] = await d.client.quarantined();
        expect(more).toEqual([]);
        expectQuarantined(q, 42, f);
        await d.client.dropQuarantined(q?.id as number);
        expect(await d.client.quarantined()).toEqual([]);
        // The local table holds what the server holds: the refused new row is gone.
        expect(await d.db.query('SELECT code FROM things WHERE code = ?', [code(42)])).toEqual([]);
        expect(await d.client.pendingStatus()).toMatchObject({ dirtyRows: 0, frozenRows: 0, rejected: null, quarantinedRows: 0 });
      } finally {
        await d.close();
      }
    });
  }

  it('a server that cannot name the row: the client splits the bundle until the row is alone, never dropping a row that would commit', async () => {
    const fault = FAULTS.find((f) => f.kind === 'app trigger') as Fault;
    anonymous = true;
    try {
      const q = await deviceWith('split-q', 'quarantine', [[42, fault]]);
      expect((await q.client.sync()).push).toMatchObject({ status: 'committed', quarantinedRows: 1 });
      expect(await serverCodes('split-q')).toEqual(allBut(42));
      // Halves, not rows: about log2(100) rejections to isolate one row among 100.
      expect(rejectionsAnswered).toBeGreaterThan(1);
      expect(rejectionsAnswered).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(ROWS)));
      expect((await q.client.quarantined()).map((r) => [r.key, r.code, r.violation?.sqlstate])).toEqual([[code(42), 'push_rejected', 'P0001']]);
      await q.close();

      // Held: the row ends alone in the held bundle, named by being the only one, so
      // quarantineRejected() can move it; the rows after it wait for the app's decision, as
      // everything does behind a held bundle, and commit with the next sync.
      const h = await deviceWith('split-h', 'hold', [[42, fault]]);
      expect((await h.client.sync()).push).toMatchObject({ status: 'rejected', code: 'push_rejected' });
      expect(await serverCodes('split-h')).toEqual(allBut(...Array.from({ length: ROWS - 42 }, (_, i) => 42 + i)));
      expect(await h.client.pendingStatus()).toMatchObject({ frozenRows: 1, dirtyRows: ROWS - 43 });
      expect(await h.client.quarantineRejected()).toEqual({ quarantinedRows: 1 });
      expect((await h.client.quarantined()).map((r) => r.key)).toEqual([code(42)]);
      expect((await h.client.sync()).push).toMatchObject({ status: 'committed', rowCount: ROWS - 43 });
      expect(await serverCodes('split-h')).toEqual(allBut(42));
      await h.close();
    } finally {
      anonymous = false;
    }
  });

  const pairs = FAULTS.flatMap((a, i) => FAULTS.slice(i + 1).map((b) => [a, b] as const));
  for (const [a, b] of pairs) {
    it(`two faults in one table: ${a.kind} and ${b.kind}`, async () => {
      const user = `two-${a.kind}-${b.kind}`.replaceAll(' ', '-');
      const d = await deviceWith(user, 'quarantine', [[31, a], [67, b]]);
      try {
        expect((await d.client.sync()).push).toMatchObject({ status: 'committed', quarantinedRows: 2 });
        expect(await serverCodes(user)).toEqual(allBut(31, 67));
        const quarantined = [...(await d.client.quarantined())].sort((x, y) => (x.key < y.key ? -1 : 1));
        expect(quarantined).toHaveLength(2);
        expectQuarantined(quarantined[0], 31, a);
        expectQuarantined(quarantined[1], 67, b);
        await d.client.requeueQuarantined(quarantined[0]?.id as number, a.fix);
        await d.client.requeueQuarantined(quarantined[1]?.id as number, b.fix);
        expect((await d.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 2 });
        expect(await serverCodes(user)).toEqual(allBut());
      } finally {
        await d.close();
      }
    });
  }
});
