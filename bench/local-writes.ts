/**
 * Local writes: 10,000 rows inserted by the application in one transaction, into a managed table
 * of the notes' columns plus a jsonb column, with the client's triggers as `openClient` installs
 * them: capture triggers that first check each row's local form (issue 23, client-web/codec.ts). Baseline, in the same run and alternating: the same insert
 * with the capture triggers only, as the client had them before the checks; and, for scale, into
 * a table without triggers. Apply, pull and hydration never run the checks (server data skips
 * them), so this is the only path they cost.
 */
import { randomUUID } from 'node:crypto';
import { type TableSpec } from '../core/protocol/meta.js';
import { installState, installTriggers } from '../client-web/install.js';
import { buildLocalModel } from '../client-web/local-schema.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type SqlValue, type SqliteDb } from '../client-web/sqlite/port.js';
import { type Benchmark } from './lib/context.js';
import { makeNotes } from './lib/rows.js';
import { rowsPerSecond, spread, timed } from './lib/stats.js';

const ROWS = 10_000;

const LOCAL_SQL = `CREATE TABLE notes (
  id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL,
  position INTEGER NOT NULL, done INTEGER NOT NULL, updated_at TEXT NOT NULL, meta TEXT)`;

const SPEC: TableSpec = {
  schema: 'bench', table: 'notes', sync_key: { column: 'id', kind: 'uuid' },
  columns: [
    { name: 'id', type: 'uuid', nullable: false }, { name: 'title', type: 'text', nullable: false }, { name: 'body', type: 'text', nullable: false },
    { name: 'position', type: 'integer', nullable: false }, { name: 'done', type: 'boolean', nullable: false },
    { name: 'updated_at', type: 'timestamp with time zone', nullable: false }, { name: 'meta', type: 'jsonb', nullable: true },
  ],
};

type Triggers = 'capture and check' | 'capture only' | 'none';

/** A fresh database with the notes table and the given triggers. */
async function openDb(triggers: Triggers): Promise<SqliteDb> {
  const db = await openNodeSqlite();
  await db.exec(LOCAL_SQL);
  if (triggers === 'none') return db;
  await installState(db, () => `src-${randomUUID()}`);
  const model = await buildLocalModel(db, [{ schema: 'bench', table: 'notes' }], [SPEC], 2);
  await installTriggers(db, model, { checks: triggers === 'capture and check' });
  return db;
}

const INSERT = 'INSERT INTO notes (id, title, body, position, done, updated_at, meta) VALUES (?, ?, ?, ?, ?, ?, ?)';

export const localWritesBenchmark: Benchmark = {
  name: 'local-writes',
  standalone: true,
  async run(ctx, rec) {
    const rows: SqlValue[][] = makeNotes(ROWS, 23).map((n, i) => [
      n.id, n.title, n.body, n.position, n.done ? 1 : 0, n.updated_at, `{"tags": ["${n.title.slice(0, 8)}", "x"], "n": ${i}, "big": 12345678901234567890123}`,
    ]);
    const once = async (triggers: Triggers, i: number | 'warm-up'): Promise<number> => {
      const db = await openDb(triggers);
      try {
        const { ms } = await timed(() => db.transaction((tx) => tx.runMany(INSERT, rows)));
        const [count] = await db.query('SELECT count(*) AS n FROM notes');
        rec.expectEqual(`local writes (${triggers}) run ${i}: rows written`, Number(count?.['n']), ROWS);
        if (triggers !== 'none') {
          const [dirty] = await db.query('SELECT count(*) AS n FROM _sync_dirty');
          rec.expectEqual(`local writes (${triggers}) run ${i}: rows captured`, Number(dirty?.['n']), ROWS);
        }
        return ms;
      } finally {
        await db.close();
      }
    };
    for (const t of ['capture and check', 'capture only', 'none'] as const) await once(t, 'warm-up');
    const runs = ctx.runs(7);
    const checked: number[] = [];
    const captured: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < runs; i++) {
      // Alternating order, so drift on a busy machine falls on both sides.
      const order: Triggers[] = i % 2 === 0 ? ['capture and check', 'capture only', 'none'] : ['none', 'capture only', 'capture and check'];
      for (const t of order) (t === 'capture and check' ? checked : t === 'capture only' ? captured : bare).push(await once(t, i));
      ctx.log(`local writes run ${i}: checked ${checked.at(-1)?.toFixed(0)} ms, capture only ${captured.at(-1)?.toFixed(0)} ms, no triggers ${bare.at(-1)?.toFixed(0)} ms`);
    }
    const rate = spread(checked.map((ms) => rowsPerSecond(ROWS, ms)));
    const before = spread(captured.map((ms) => rowsPerSecond(ROWS, ms)));
    const plain = spread(bare.map((ms) => rowsPerSecond(ROWS, ms)));
    rec.figure({
      id: 'local_writes.rows_per_s',
      label: '10k-row local insert, one transaction, with the capture and local-form check triggers (7 columns, one jsonb)',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'the same insert with the capture triggers only (the client before issue 23)', value: before },
      ratio: rate.median / before.median,
    });
    rec.figure({
      id: 'local_writes.bare_rows_per_s',
      label: 'local insert: the same rows into the table without any trigger, for scale; ratio = with both triggers / this',
      unit: 'rows/s',
      value: plain,
      ratio: rate.median / plain.median,
      ratioOf: 'checked and captured rows/s / rows/s without triggers',
    });
  },
};
