/**
 * Push: a 10,000-row bundle through the local gateway (session create, chunks of 1,000,
 * commit), against the same rows written straight to PostgreSQL in one multi-row upsert.
 * Each run pushes fresh keys for a fresh user, and each baseline run writes fresh keys, so both
 * sides take the insert path into a table that grows the same way. Runs alternate which side
 * goes first.
 */
import { type Benchmark } from './lib/context.js';
import { countScope, directUpsert } from './lib/direct-pg.js';
import { initEmpty, pushBundle, type PushTiming } from './lib/push.js';
import { insertRows, makeNotes, meanPayloadBytes } from './lib/rows.js';
import { rowsPerSecond, spread, timed } from './lib/stats.js';

const ROWS = 10_000;
const CHUNK_ROWS = 1_000;
export const PUSH_TARGET_RATIO = 0.33;

export const pushBenchmark: Benchmark = {
  name: 'push',
  async run(ctx, rec) {
    const { server } = ctx;
    const warm = server.client('push-warmup');
    await initEmpty(warm);
    await pushBundle(warm, insertRows(makeNotes(1000)), 1, CHUNK_ROWS);
    await directUpsert(server.admin, 'direct-warmup', makeNotes(1000));

    const runs = ctx.runs(5);
    const timings: PushTiming[] = [];
    const baselineMs: number[] = [];
    for (let i = 0; i < runs; i++) {
      const notes = makeNotes(ROWS, i);
      if (i === 0) rec.note(`push rows: mean payload ${meanPayloadBytes(notes).toFixed(0)} bytes of JSON`);
      const user = `push-run-${i}`;
      const client = server.client(user);
      await initEmpty(client);
      const viaSync = async () => timings.push(await pushBundle(client, insertRows(notes), 1, CHUNK_ROWS));
      const direct = async () => baselineMs.push((await timed(() => directUpsert(server.admin, `direct-run-${i}`, notes))).ms);
      if (i % 2 === 0) {
        await viaSync();
        await direct();
      } else {
        await direct();
        await viaSync();
      }
      rec.expectEqual(`push run ${i}: rows of ${user} in bench.notes`, await countScope(server.admin, 'notes', user), ROWS);
      rec.expectEqual(`push run ${i}: rows of direct-run-${i} in bench.notes_direct`, await countScope(server.admin, 'notes_direct', `direct-run-${i}`), ROWS);
      ctx.log(`push run ${i}: ${timings.at(-1)?.totalMs.toFixed(0)} ms via sync, ${baselineMs.at(-1)?.toFixed(0)} ms direct`);
    }
    const rate = spread(timings.map((t) => rowsPerSecond(ROWS, t.totalMs)));
    const base = spread(baselineMs.map((ms) => rowsPerSecond(ROWS, ms)));
    const ratio = rate.median / base.median;
    rec.figure({
      id: 'push.rows_per_s',
      label: 'push 10k rows over HTTP (create + 10 chunks + commit)',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'one multi-row INSERT … ON CONFLICT DO UPDATE, one transaction', value: base },
      ratio,
      target: { text: `≥ ${PUSH_TARGET_RATIO}× baseline`, met: ratio >= PUSH_TARGET_RATIO },
    });
    rec.figure({ id: 'push.create_ms', label: 'push: session create', unit: 'ms', value: spread(timings.map((t) => t.createMs)) });
    rec.figure({ id: 'push.chunks_ms', label: 'push: upload of 10 chunks of 1,000 rows', unit: 'ms', value: spread(timings.map((t) => t.chunksMs)) });
    rec.figure({ id: 'push.commit_ms', label: 'push: commit of 10k rows', unit: 'ms', value: spread(timings.map((t) => t.commitMs)) });
    const chunkShare = spread(timings.map((t) => t.chunksMs / t.totalMs));
    rec.note(`push split (median): chunk upload ${(chunkShare.median * 100).toFixed(0)}% of the push, commit ${(spread(timings.map((t) => t.commitMs / t.totalMs)).median * 100).toFixed(0)}%`);
  },
};
