/**
 * Pull: 10,000 rows in 100 bundles of 100, pulled by the real web client (`pullToStable()` on an
 * attached device whose checkpoint is before the bundles) and applied into wa-sqlite under Node,
 * against inserting the same rows into wa-sqlite directly in one transaction.
 *
 * A device's checkpoint only moves forward, so every run needs its own: all of them attach
 * (to the empty scope) before the writer commits the bundles, and each run pulls on a fresh one.
 */
import { type Benchmark } from './lib/context.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { SqlTimings } from './lib/sql-timing.js';
import { rowsPerSecond, spread, timed } from './lib/stats.js';
import { clientFingerprint, directInsert, notesFingerprint, openBaselineDb, openBenchDevice, type BenchDevice } from './lib/web-client.js';

const BUNDLES = 100;
const ROWS_PER_BUNDLE = 100;
const ROWS = BUNDLES * ROWS_PER_BUNDLE;
const USER = 'pull-user';
export const PULL_TARGET_RATIO = 0.5;

interface PullRun {
  readonly ms: number;
  readonly httpMs: number;
  readonly requests: number;
}

export const pullBenchmark: Benchmark = {
  name: 'pull',
  async run(ctx, rec) {
    const { server } = ctx;
    const writer = server.client(USER, 'pull-writer');
    await initEmpty(writer);
    const runs = ctx.runs(5);
    // One device per run plus a warm-up, attached while the scope is still empty.
    const devices: BenchDevice[] = [];
    const sqlTimings = new SqlTimings();
    for (let i = 0; i <= runs; i++) {
      const device = await openBenchDevice(server, USER, sqlTimings);
      const attached = await device.client.attach(USER);
      rec.check(`pull device ${i}: attached to the empty scope`, attached.status === 'attached' && attached.hydratedRows === 0, JSON.stringify(attached));
      devices.push(device);
    }
    const notes = makeNotes(ROWS, 7);
    let lastSeq = 0;
    for (let b = 0; b < BUNDLES; b++) {
      lastSeq = (await pushBundle(writer, insertRows(notes.slice(b * ROWS_PER_BUNDLE, (b + 1) * ROWS_PER_BUNDLE)), b + 1)).bundleSeq;
    }
    const expected = notesFingerprint(notes);

    const pullOnce = async (device: BenchDevice, i: number | 'warm-up'): Promise<PullRun> => {
      try {
        const before = await device.client.pendingStatus();
        rec.expectEqual(`pull run ${i}: checkpoint before the bundles`, before.checkpoint, lastSeq - BUNDLES);
        device.http.reset();
        const { ms, result } = await timed(() => device.client.pullToStable());
        const httpMs = device.http.ms;
        const requests = device.http.requests;
        const after = await device.client.pendingStatus();
        rec.expectEqual(`pull run ${i}: bundles applied`, result.bundlesApplied, BUNDLES);
        rec.expectEqual(`pull run ${i}: rows applied`, result.rowsApplied, ROWS);
        rec.expectEqual(`pull run ${i}: client checkpoint`, after.checkpoint, lastSeq);
        rec.expectEqual(`pull run ${i}: pulled rows captured as local changes`, after.dirtyRows, 0);
        const fingerprint = await clientFingerprint(device.db);
        rec.check(`pull run ${i}: client rows equal the source rows`, fingerprint === expected, `${fingerprint} (expected ${expected})`);
        return { ms, httpMs, requests };
      } finally {
        await device.close();
      }
    };
    const directOnce = async (i: number): Promise<number> => {
      const db = await openBaselineDb();
      try {
        const { ms } = await timed(() => directInsert(db, notes));
        const fingerprint = await clientFingerprint(db);
        rec.check(`pull baseline run ${i}: rows equal the source rows`, fingerprint === expected, `${fingerprint} (expected ${expected})`);
        return ms;
      } finally {
        await db.close();
      }
    };
    await pullOnce(devices[0] as BenchDevice, 'warm-up');
    await directOnce(-1);
    sqlTimings.reset();

    const pulled: PullRun[] = [];
    const direct: number[] = [];
    for (let i = 0; i < runs; i++) {
      const device = devices[i + 1] as BenchDevice;
      if (i % 2 === 0) {
        pulled.push(await pullOnce(device, i));
        direct.push(await directOnce(i));
      } else {
        direct.push(await directOnce(i));
        pulled.push(await pullOnce(device, i));
      }
      const p = pulled.at(-1) as PullRun;
      ctx.log(`pull run ${i}: ${p.ms.toFixed(0)} ms (HTTP ${p.httpMs.toFixed(0)} ms in ${p.requests} requests), direct ${direct.at(-1)?.toFixed(0)} ms`);
    }
    const rate = spread(pulled.map((p) => rowsPerSecond(ROWS, p.ms)));
    const base = spread(direct.map((ms) => rowsPerSecond(ROWS, ms)));
    const ratio = rate.median / base.median;
    rec.figure({
      id: 'pull.rows_per_s',
      label: 'pull 10k rows (100 bundles of 100) over HTTP + apply into wa-sqlite, real client (pullToStable)',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'same rows inserted into wa-sqlite directly, one transaction', value: base },
      ratio,
      target: { text: `≥ ${PULL_TARGET_RATIO}× baseline`, met: ratio >= PULL_TARGET_RATIO },
    });
    rec.figure({ id: 'pull.http_ms', label: 'pull: HTTP (server + transfer)', unit: 'ms', value: spread(pulled.map((p) => p.httpMs)) });
    const local = spread(pulled.map((p) => p.ms - p.httpMs));
    rec.figure({
      id: 'pull.local_ms',
      label: 'pull: in the client (parse, validate, apply); ratio = direct insert time / this',
      unit: 'ms',
      value: local,
      baseline: { label: 'direct insert of the same rows, ms', value: spread(direct) },
      ratio: spread(direct).median / local.median,
      ratioOf: 'direct insert ms / client ms (1× = as fast as a bare insert)',
    });
    rec.note(`pull: ${pulled[0]?.requests} HTTP request(s) per pull of ${BUNDLES} bundles (the client's default page: server default_bundles_per_pull)`);
    rec.note(`pull, costliest local statements over ${runs} pulls: ${sqlTimings.top(3, 90).join(' ‖ ')}`);
  },
};
