/**
 * Issue 23, "Done when": every value arrives exactly as written, device A → server → device B →
 * fresh device C (hydration), on every SQLite adapter under Node (in memory, on a file); chromium's
 * OPFS runs the same scenario in test/value-fidelity.web.test.ts. The values: jsonb integers
 * beyond 2^53, long decimals, 1e400, -0, JSON null and SQL NULL, nested arrays with nulls, emoji,
 * 1 MB of text, a 40-digit numeric, NaN and ±Infinity, BC and five-digit years, bytea, '' and NULL,
 * bigint ±2^63; NUL, lone surrogates, a PostgreSQL array literal, text in an INTEGER column and an
 * upper-case uuid key are refused at the write, naming table, key and column. jsonb arrives as
 * PostgreSQL holds it (its rendering: 1e400 in full digits, -0 as 0), json as written, byte for
 * byte. Before the fix jsonb numbers were rounded to doubles, JSON null became SQL NULL, NUL cut
 * the text, a lone surrogate ate the next character, and the refused writes were stored.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTables } from '../core/config.js';
import { openDevice, type Device, type DeviceOptions } from './support/client-harness.js';
import { startTestServer, type TestServer } from './support/server.js';
import {
  encodeRows, FIDELITY_LOCAL_SQL, FIDELITY_READS, FIDELITY_SERVER_SQL, FIDELITY_TABLES, FIDELITY_TABLES_DECL, refusedWrites, UKEY, writeFidelityRows,
} from './support/value-fidelity.js';
import { expectedRows, expectServerHolds } from './support/value-fidelity-server.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('every value arrives exactly as written: device A → server → device B → fresh device C', { timeout: 180_000 }, () => {
  let s: TestServer;
  const devices: Device[] = [];
  beforeAll(async () => {
    s = await startTestServer({ schemaSql: FIDELITY_SERVER_SQL, tables: parseTables(FIDELITY_TABLES_DECL) });
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
  });

  for (const adapter of ['memory', 'file'] as const) {
    it(`on wa-sqlite under Node, ${adapter === 'memory' ? 'in memory' : 'on a file'}`, async () => {
      const user = `fidelity-${adapter}`;
      const dir = adapter === 'file' ? mkdtempSync(join(tmpdir(), 'lockstep-fidelity-')) : undefined;
      if (dir) dirs.push(dir);
      const device = async (name: string, config: DeviceOptions['config'] = {}) => {
        const d = await openDevice(s, user, { schemaSql: FIDELITY_LOCAL_SQL, tables: FIDELITY_TABLES, config, ...(dir ? { path: join(dir, `${name}.sqlite3`) } : {}) });
        devices.push(d);
        expect(await d.client.attach(user), name).toMatchObject({ status: 'attached' });
        return d;
      };
      const read = async (d: Device) => ({ vals: encodeRows(await d.db.query(FIDELITY_READS.vals)), ukeys: encodeRows(await d.db.query(FIDELITY_READS.ukeys)) });

      const a = await device('a');
      const b = await device('b');
      await writeFidelityRows((sql, params) => a.client.db.run(sql, params));
      for (const refused of refusedWrites()) {
        await expect(a.client.db.run(refused.sql, refused.params), `${refused.params[0]}`).rejects.toMatchObject({
          code: 'invalid_local_row', details: { table: refused.table, column: refused.column },
        });
      }
      expect((await a.client.sync()).push).toMatchObject({ status: 'committed' });
      await expectServerHolds(s, user);

      const expected = { vals: await expectedRows(s, user), ukeys: [{ id: { text: UKEY }, note: { text: 'lower-case' } }] };
      await b.client.sync();
      // Hydrated twice: rows as arrays (the default where the server offers them), and as objects.
      const c = await device('c');
      const o = await device('o', { snapshotRowArrays: false });
      // Each form was rendered (a data set of arrays keeps its header; one of objects has none).
      const forms = (await s.t.exec(`SELECT DISTINCT (row_tables IS NOT NULL) AS arrays FROM sync.snapshot_data WHERE user_id = $1 ORDER BY 1`, [user])).rows;
      expect(forms.map((r: { arrays: boolean }) => r.arrays)).toEqual([false, true]);
      for (const [name, d] of [['b (pulled)', b], ['c (hydrated, arrays)', c], ['o (hydrated, objects)', o], ['a (replayed)', a]] as const) {
        const got = await read(d);
        for (const [i, row] of expected.vals.entries()) expect(got.vals[i], `${name}: ${JSON.stringify(row.id)}`).toEqual(row);
        expect(got.vals.length, name).toBe(expected.vals.length);
        expect(got.ukeys, name).toEqual(expected.ukeys);
      }
      // The file-backed device reads the same after a restart.
      if (dir) {
        await c.reopen();
        expect((await read(c)).vals).toEqual(expected.vals);
      }
    });
  }
});
