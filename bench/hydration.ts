/**
 * Hydration: a fresh client takes a 100,000-row snapshot (create + pages of 5,000 + apply into
 * wa-sqlite), against inserting the same rows into wa-sqlite directly in one transaction. Also
 * reports the server-side snapshot create time (the POST that materialises 100k rows).
 * The user's rows are written set-based through serverWrite, as one captured bundle.
 */
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/index.js';
import { type Benchmark } from './lib/context.js';
import { MinimalApplier } from './lib/minimal-applier.js';
import { hydrate, type HydrationOutcome } from './lib/pull-client.js';
import { type Note } from './lib/rows.js';
import { ClientDb, CLIENT_NOTES_SQL, clientFingerprint, directInsert, notesFingerprint } from './lib/wa-sqlite.js';
import { rowsPerSecond, spread, timed } from './lib/stats.js';

const ROWS = 100_000;
const PAGE_ROWS = 5_000;
export const HYDRATION_TARGET_ROWS_PER_S = 50_000;
export const HYDRATION_TARGET_RATIO = 0.5;
const USER = 'hydrate-user';

export const hydrationBenchmark: Benchmark = {
  name: 'hydration',
  async run(ctx, rec) {
    const { server } = ctx;
    const seeded = await timed(() =>
      serverWrite(server.db, { userId: USER, sourceId: 'server:bench-seed', retainedBundlesPerUser: server.runtime.config.limits.retainedBundlesPerUser }, (tx, scope) =>
        tx.query(sql`
          INSERT INTO bench.notes (id, _sync_scope_id, title, body, position, done, updated_at)
          SELECT gen_random_uuid(), ${scope}, 'Note ' || g || ': harbor quartz meadow',
                 'sync offline bundle ledger harbor quartz meadow signal copper lantern orbit pepper #' || g,
                 g, g % 3 = 0, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second'
            FROM generate_series(1, ${ROWS}::integer) g`),
      ),
    );
    ctx.log(`seeded ${ROWS} rows for ${USER} in one server-written bundle: ${seeded.ms.toFixed(0)} ms`);
    const raw = await server.admin.query<{ id: string; title: string; body: string; position: number; done: boolean; updated_at: string }>(
      `SELECT id::text, title, body, position, done, to_json(updated_at)#>>'{}' AS updated_at FROM bench.notes WHERE _sync_scope_id = $1 ORDER BY id`,
      [USER],
    );
    const notes: Note[] = raw.rows;
    rec.expectEqual('hydration: seeded rows', notes.length, ROWS);
    const expected = notesFingerprint(notes);
    const client = server.client(USER, 'fresh-device');

    const hydrateOnce = async (): Promise<{ outcome: HydrationOutcome; count: number; fingerprint: string }> => {
      const db = await ClientDb.open();
      try {
        const applier = await MinimalApplier.install(db);
        const outcome = await hydrate(client, applier, PAGE_ROWS);
        return { outcome, count: Number(await db.scalar('SELECT count(*) FROM notes')), fingerprint: await clientFingerprint(db) };
      } finally {
        await db.close();
      }
    };
    const directOnce = async (): Promise<{ ms: number; count: number; fingerprint: string }> => {
      const db = await ClientDb.open();
      try {
        await db.exec(CLIENT_NOTES_SQL);
        const { ms } = await timed(() => directInsert(db, notes));
        return { ms, count: Number(await db.scalar('SELECT count(*) FROM notes')), fingerprint: await clientFingerprint(db) };
      } finally {
        await db.close();
      }
    };
    await hydrateOnce();

    const runs = ctx.runs(5);
    const hydrated: HydrationOutcome[] = [];
    const direct: number[] = [];
    for (let i = 0; i < runs; i++) {
      const order = i % 2 === 0 ? ['hydrate', 'direct'] : ['direct', 'hydrate'];
      for (const side of order) {
        if (side === 'hydrate') {
          const r = await hydrateOnce();
          rec.expectEqual(`hydration run ${i}: rows in the client`, r.count, ROWS);
          rec.check(`hydration run ${i}: client rows equal the source rows`, r.fingerprint === expected, `${r.fingerprint} (expected ${expected})`);
          rec.expectEqual(`hydration run ${i}: rows delivered`, r.outcome.rows, ROWS);
          hydrated.push(r.outcome);
        } else {
          const r = await directOnce();
          rec.expectEqual(`hydration baseline run ${i}: rows inserted`, r.count, ROWS);
          rec.check(`hydration baseline run ${i}: rows equal the source rows`, r.fingerprint === expected, `${r.fingerprint} (expected ${expected})`);
          direct.push(r.ms);
        }
      }
      const h = hydrated.at(-1);
      ctx.log(`hydration run ${i}: ${h?.totalMs.toFixed(0)} ms (create ${h?.createMs.toFixed(0)}, pages ${h?.pagesMs.toFixed(0)}, apply ${h?.applyMs.toFixed(0)}), direct ${direct.at(-1)?.toFixed(0)} ms`);
    }
    const rate = spread(hydrated.map((h) => rowsPerSecond(ROWS, h.totalMs)));
    const base = spread(direct.map((ms) => rowsPerSecond(ROWS, ms)));
    const ratio = rate.median / base.median;
    rec.figure({
      id: 'hydration.rows_per_s',
      label: 'hydrate 100k rows (snapshot create + 20 pages + apply)',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'same rows inserted into wa-sqlite directly, one transaction', value: base },
      ratio,
      target: { text: `≥ ${HYDRATION_TARGET_ROWS_PER_S.toLocaleString('en-US')} rows/s and ≥ ${HYDRATION_TARGET_RATIO}× baseline`, met: rate.median >= HYDRATION_TARGET_ROWS_PER_S && ratio >= HYDRATION_TARGET_RATIO },
      note: 'apply: bench/lib/minimal-applier.ts (client-web apply not available yet)',
    });
    rec.figure({ id: 'hydration.create_ms', label: 'hydration: snapshot create of 100k rows (server, POST)', unit: 'ms', value: spread(hydrated.map((h) => h.createMs)) });
    rec.figure({ id: 'hydration.pages_ms', label: 'hydration: 20 snapshot pages over HTTP', unit: 'ms', value: spread(hydrated.map((h) => h.pagesMs)) });
    rec.figure({ id: 'hydration.apply_ms', label: 'hydration: apply into wa-sqlite (minimal applier)', unit: 'ms', value: spread(hydrated.map((h) => h.applyMs)) });
  },
};
