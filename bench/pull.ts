/**
 * Pull: 10,000 rows in 100 bundles of 100, pulled over HTTP by a fresh device and applied into
 * wa-sqlite under Node, against inserting the same rows into wa-sqlite directly in one
 * transaction. Apply uses the bench's minimal applier until client-web's lands.
 */
import { type Benchmark } from './lib/context.js';
import { MinimalApplier } from './lib/minimal-applier.js';
import { pullAll, type PullOutcome } from './lib/pull-client.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { ClientDb, CLIENT_NOTES_SQL, clientFingerprint, directInsert, notesFingerprint } from './lib/wa-sqlite.js';
import { rowsPerSecond, spread, timed } from './lib/stats.js';

const BUNDLES = 100;
const ROWS_PER_BUNDLE = 100;
const ROWS = BUNDLES * ROWS_PER_BUNDLE;
export const PULL_TARGET_RATIO = 0.5;

export const pullBenchmark: Benchmark = {
  name: 'pull',
  async run(ctx, rec) {
    const { server } = ctx;
    const writer = server.client('pull-user', 'device-a');
    await initEmpty(writer);
    const notes = makeNotes(ROWS, 7);
    for (let b = 0; b < BUNDLES; b++) {
      await pushBundle(writer, insertRows(notes.slice(b * ROWS_PER_BUNDLE, (b + 1) * ROWS_PER_BUNDLE)), b + 1);
    }
    const reader = server.client('pull-user', 'device-b');
    const expected = notesFingerprint(notes);

    const pullOnce = async (): Promise<{ ms: number; outcome: PullOutcome; count: number; fingerprint: string; checkpoint: number }> => {
      const db = await ClientDb.open();
      try {
        const applier = await MinimalApplier.install(db);
        const { ms, result } = await timed(() => pullAll(reader, applier, 0));
        return { ms, outcome: result, count: Number(await db.scalar('SELECT count(*) FROM notes')), fingerprint: await clientFingerprint(db), checkpoint: Number(await db.scalar('SELECT bundle_seq FROM _sync_checkpoint')) };
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
    await pullOnce();
    await directOnce();

    const runs = ctx.runs(5);
    const pulled: { ms: number; outcome: PullOutcome }[] = [];
    const direct: number[] = [];
    for (let i = 0; i < runs; i++) {
      const order = i % 2 === 0 ? ['pull', 'direct'] : ['direct', 'pull'];
      for (const side of order) {
        if (side === 'pull') {
          const r = await pullOnce();
          rec.expectEqual(`pull run ${i}: rows in the client`, r.count, ROWS);
          rec.check(`pull run ${i}: client rows equal the source rows`, r.fingerprint === expected, `${r.fingerprint} (expected ${expected})`);
          rec.expectEqual(`pull run ${i}: client checkpoint`, r.checkpoint, BUNDLES);
          rec.expectEqual(`pull run ${i}: bundles applied`, r.outcome.bundles, BUNDLES);
          pulled.push(r);
        } else {
          const r = await directOnce();
          rec.expectEqual(`pull baseline run ${i}: rows inserted`, r.count, ROWS);
          rec.check(`pull baseline run ${i}: rows equal the source rows`, r.fingerprint === expected, `${r.fingerprint} (expected ${expected})`);
          direct.push(r.ms);
        }
      }
      ctx.log(`pull run ${i}: ${pulled.at(-1)?.ms.toFixed(0)} ms (${pulled.at(-1)?.outcome.pages} pages), direct ${direct.at(-1)?.toFixed(0)} ms`);
    }
    const rate = spread(pulled.map((p) => rowsPerSecond(ROWS, p.ms)));
    const base = spread(direct.map((ms) => rowsPerSecond(ROWS, ms)));
    const ratio = rate.median / base.median;
    rec.figure({
      id: 'pull.rows_per_s',
      label: 'pull 10k rows (100 bundles of 100) over HTTP + apply into wa-sqlite',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'same rows inserted into wa-sqlite directly, one transaction', value: base },
      ratio,
      target: { text: `≥ ${PULL_TARGET_RATIO}× baseline`, met: ratio >= PULL_TARGET_RATIO },
      note: 'apply: bench/lib/minimal-applier.ts (client-web apply not available yet)',
    });
    rec.figure({ id: 'pull.http_ms', label: 'pull: HTTP (server + transfer + parse)', unit: 'ms', value: spread(pulled.map((p) => p.outcome.httpMs)) });
    rec.figure({ id: 'pull.apply_ms', label: 'pull: apply into wa-sqlite (minimal applier)', unit: 'ms', value: spread(pulled.map((p) => p.outcome.applyMs)) });
    rec.note(`pull: ${pulled[0]?.outcome.pages} pull page(s) for ${BUNDLES} bundles; apply by bench/lib/minimal-applier.ts (client-web's apply is not there yet)`);
  },
};
