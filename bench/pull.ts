/**
 * Pull: 10,000 rows in 100 bundles of 100, pulled by the real web client (`pullToStable()` on an
 * attached device whose checkpoint is before the bundles) and applied into wa-sqlite under Node,
 * against its floor (issue 27): a PostgreSQL read of the same rows, their transfer as one HTTP
 * body (JSON, read and parsed), and one wa-sqlite insert transaction of them. The earlier
 * baseline, the insert alone, is printed too.
 *
 * The same pull runs again with the gateway in a process of its own (npm start over this
 * database), as a browser's client and a Lambda function never share a thread; and in pages of 10
 * bundles over a link with a round trip added to every request, against what the same pages cost
 * one after the other (the client asks for the next page while it applies the current one).
 *
 * Beside the floor, the design's floor (design-floor.ts): the same read, but the rows sent in the
 * protocol's committed-row shape (docs/protocol.md §4.1) and inserted with their row versions,
 * which any client of the protocol keeps; the figures say what share of the gap to the floor is
 * the design's.
 *
 * The client asks for the codings chromium asks for, so the edge answers brotli, as it does a
 * browser; the same pull asking as Node's fetch does (gzip) runs beside it, alternated.
 *
 * A device's checkpoint only moves forward, so every run needs its own: all of them attach
 * (to the empty scope) before the writer commits the bundles, and each run pulls on a fresh one.
 */
import { startBodyServer } from './lib/body-server.js';
import { designFloorTransferAndApply, keptVersions, openDesignFloorDb, specRows } from './lib/design-floor.js';
import { startGatewayProcess } from './lib/gateway-process.js';
import { type Benchmark } from './lib/context.js';
import { type Note } from './lib/rows.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { SqlTimings } from './lib/sql-timing.js';
import { rowsPerSecond, spread, timed } from './lib/stats.js';
import { clientFingerprint, directInsert, LINK_RTT_MS, NODE_ACCEPT_ENCODING, notesFingerprint, openBaselineDb, openBenchDevice, type BenchDevice } from './lib/web-client.js';

const BUNDLES = 100;
const ROWS_PER_BUNDLE = 100;
const ROWS = BUNDLES * ROWS_PER_BUNDLE;
const USER = 'pull-user';
export const PULL_TARGET_RATIO = 0.5;
/** Bundles per page of the runs over a link (LINK_RTT_MS). */
const LINK_PAGE_BUNDLES = 10;

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
    const gateway = await startGatewayProcess(server);
    // Devices for every run (and the warm-ups), attached while the scope is still empty.
    const sqlTimings = new SqlTimings();
    const apartTimings = new SqlTimings(); // not reported: the statements are those of the runs above
    const attachDevices = async (kind: string, n: number, open: () => Promise<BenchDevice>): Promise<BenchDevice[]> => {
      const opened: BenchDevice[] = [];
      for (let i = 0; i < n; i++) {
        const device = await open();
        const attached = await device.client.attach(USER);
        rec.check(`pull ${kind} device ${i}: attached to the empty scope`, attached.status === 'attached' && attached.hydratedRows === 0, JSON.stringify(attached));
        opened.push(device);
      }
      return opened;
    };
    const paged = { config: { pullBundles: LINK_PAGE_BUNDLES } };
    const devices = await attachDevices('in-process', runs + 1, () => openBenchDevice(server, USER, sqlTimings));
    const gzipDevices = await attachDevices('gzip', runs, () => openBenchDevice(server, USER, apartTimings, { acceptEncoding: NODE_ACCEPT_ENCODING }));
    const apartDevices = await attachDevices('own-process', runs + 1, () => openBenchDevice(gateway.server, USER, apartTimings));
    const pagedDevices = await attachDevices('paged', runs, () => openBenchDevice(server, USER, apartTimings, paged));
    const linkDevices = await attachDevices('paged over a link', runs, () => openBenchDevice(server, USER, apartTimings, { ...paged, latencyMs: LINK_RTT_MS }));
    const notes = makeNotes(ROWS, 7);
    let lastSeq = 0;
    for (let b = 0; b < BUNDLES; b++) {
      lastSeq = (await pushBundle(writer, insertRows(notes.slice(b * ROWS_PER_BUNDLE, (b + 1) * ROWS_PER_BUNDLE)), b + 1)).bundleSeq;
    }
    const expected = notesFingerprint(notes);

    const pullOnce = async (device: BenchDevice, i: number | string): Promise<PullRun> => {
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
    // The floor: read, one HTTP body, parse, one insert.
    const bodyServer = await startBodyServer();
    const floorParts = { readMs: [] as number[], transferMs: [] as number[] };
    // `design`: the design floor, the rows in the protocol's shape, inserted with their versions.
    const floorOnce = async (i: number, design = false): Promise<number> => {
      const db = await (design ? openDesignFloorDb() : openBaselineDb());
      try {
        const { ms } = await timed(async () => {
          const read = await timed(() => server.admin.query<Note>(
            `SELECT id::text, title, body, position, done, to_json(updated_at)#>>'{}' AS updated_at FROM bench.notes WHERE _sync_scope_id = $1`, [USER]));
          if (design) {
            await designFloorTransferAndApply(bodyServer, db, specRows(read.result.rows, (r) => lastSeq - BUNDLES + 1 + Math.floor(r / ROWS_PER_BUNDLE)));
            return;
          }
          floorParts.readMs.push(read.ms);
          bodyServer.set(JSON.stringify(read.result.rows));
          const transfer = await timed(async () => (await (await fetch(bodyServer.url)).json()) as Note[]);
          floorParts.transferMs.push(transfer.ms);
          await directInsert(db, transfer.result);
        });
        const fingerprint = await clientFingerprint(db);
        rec.check(`pull ${design ? 'design ' : ''}floor run ${i}: rows equal the source rows`, fingerprint === expected, `${fingerprint} (expected ${expected})`);
        if (design) rec.expectEqual(`pull design floor run ${i}: row versions kept`, await keptVersions(db), ROWS);
        return ms;
      } finally {
        await db.close();
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
    await pullOnce(apartDevices[0] as BenchDevice, 'own-process warm-up');
    await directOnce(-1);
    await floorOnce(-1);
    await floorOnce(-1, true);
    floorParts.readMs.length = 0;
    floorParts.transferMs.length = 0;
    sqlTimings.reset();

    const pulled: PullRun[] = [];
    const gzipped: PullRun[] = [];
    const direct: number[] = [];
    const floor: number[] = [];
    const designFloor: number[] = [];
    const apart: PullRun[] = [];
    const pagedRuns: PullRun[] = [];
    const linkRuns: PullRun[] = [];
    try {
      for (let i = 0; i < runs; i++) {
        const device = devices[i + 1] as BenchDevice;
        const gzipDevice = gzipDevices[i] as BenchDevice;
        if (i % 2 === 0) {
          pulled.push(await pullOnce(device, i));
          gzipped.push(await pullOnce(gzipDevice, `gzip ${i}`));
          floor.push(await floorOnce(i));
          designFloor.push(await floorOnce(i, true));
          direct.push(await directOnce(i));
        } else {
          direct.push(await directOnce(i));
          designFloor.push(await floorOnce(i, true));
          floor.push(await floorOnce(i));
          gzipped.push(await pullOnce(gzipDevice, `gzip ${i}`));
          pulled.push(await pullOnce(device, i));
        }
        const p = pulled.at(-1) as PullRun;
        ctx.log(`pull run ${i}: ${p.ms.toFixed(0)} ms (HTTP ${p.httpMs.toFixed(0)} ms in ${p.requests} requests), floor ${floor.at(-1)?.toFixed(0)} ms ` +
          `(read ${floorParts.readMs.at(-1)?.toFixed(0)}, one HTTP body ${floorParts.transferMs.at(-1)?.toFixed(0)}), design floor ${designFloor.at(-1)?.toFixed(0)} ms, ` +
          `direct insert ${direct.at(-1)?.toFixed(0)} ms; as Node's fetch asks (gzip) ${gzipped.at(-1)?.ms.toFixed(0)} ms`);
      }
      for (let i = 0; i < runs; i++) {
        apart.push(await pullOnce(apartDevices[i + 1] as BenchDevice, `own-process ${i}`));
        pagedRuns.push(await pullOnce(pagedDevices[i] as BenchDevice, `paged ${i}`));
        linkRuns.push(await pullOnce(linkDevices[i] as BenchDevice, `paged over a link ${i}`));
        ctx.log(`pull run ${i}: own-process gateway ${apart.at(-1)?.ms.toFixed(0)} ms; pages of ${LINK_PAGE_BUNDLES} bundles ${pagedRuns.at(-1)?.ms.toFixed(0)} ms ` +
          `in ${pagedRuns.at(-1)?.requests} requests, over a ${LINK_RTT_MS} ms round trip ${linkRuns.at(-1)?.ms.toFixed(0)} ms`);
      }
    } finally {
      await bodyServer.close();
      await gateway.close();
    }
    const rate = spread(pulled.map((p) => rowsPerSecond(ROWS, p.ms)));
    const floorRate = spread(floor.map((ms) => rowsPerSecond(ROWS, ms)));
    const base = spread(direct.map((ms) => rowsPerSecond(ROWS, ms)));
    const ratio = rate.median / floorRate.median;
    rec.figure({
      id: 'pull.rows_per_s',
      label: 'pull 10k rows (100 bundles of 100) over HTTP + apply into wa-sqlite, real client (pullToStable)',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'floor: the same rows read from PostgreSQL, sent as one HTTP body and inserted into wa-sqlite in one transaction', value: floorRate },
      ratio,
      target: { text: `≥ ${PULL_TARGET_RATIO}× floor`, met: ratio >= PULL_TARGET_RATIO },
    });
    const gzipRate = spread(gzipped.map((p) => rowsPerSecond(ROWS, p.ms)));
    rec.figure({
      id: 'pull.gzip_rows_per_s',
      label: "pull 10k rows, the same asking as Node's fetch does (gzip; the runs above ask as chromium does, and get brotli); ratio = those rows/s / these",
      unit: 'rows/s',
      value: gzipRate,
      ratio: rate.median / gzipRate.median,
      ratioOf: 'brotli rows/s / gzip rows/s',
    });
    const designRate = spread(designFloor.map((ms) => rowsPerSecond(ROWS, ms)));
    rec.figure({
      id: 'pull.design_floor_rows_per_s',
      label: 'pull design floor: the same read, the rows sent in the protocol\'s committed-row shape (docs/protocol.md §4.1) and inserted with their row versions',
      unit: 'rows/s',
      value: designRate,
      baseline: { label: 'the floor above', value: floorRate },
      ratio: designRate.median / floorRate.median,
    });
    rec.figure({
      id: 'pull.vs_design_floor',
      label: 'pull 10k rows against the design floor; ratio = pull rows/s / design floor rows/s',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'the design floor above', value: designRate },
      ratio: rate.median / designRate.median,
    });
    rec.figure({
      id: 'pull.vs_insert',
      label: 'pull against the insert alone (the earlier baseline: no read, no transfer); ratio = pull rows/s / insert rows/s',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'same rows inserted into wa-sqlite directly, one transaction', value: base },
      ratio: rate.median / base.median,
    });
    const apartRate = spread(apart.map((p) => rowsPerSecond(ROWS, p.ms)));
    rec.figure({
      id: 'pull.own_process_rows_per_s',
      label: 'pull 10k rows, the same with the gateway in a process of its own (npm start over this database), as browser and server never share a thread',
      unit: 'rows/s',
      value: apartRate,
      baseline: { label: 'the floor above', value: floorRate },
      ratio: apartRate.median / floorRate.median,
    });
    // Pages one after the other would cost the same pull without the link plus one round trip each.
    const pages = linkRuns[0]?.requests ?? 0;
    const sequential = spread(pagedRuns.map((p) => p.ms + p.requests * LINK_RTT_MS));
    const overLink = spread(linkRuns.map((p) => p.ms));
    rec.figure({
      id: 'pull.link_ms',
      label: `pull 10k rows in pages of ${LINK_PAGE_BUNDLES} bundles (${pages} requests) over a link adding ${LINK_RTT_MS} ms to each request; ratio = pages one after the other / this`,
      unit: 'ms',
      value: overLink,
      baseline: { label: `the same pages without the link, plus ${LINK_RTT_MS} ms per request`, value: sequential },
      ratio: sequential.median / overLink.median,
      ratioOf: 'sequential ms / measured ms (above 1: the round trip of the next page overlaps the apply of the current one)',
    });
    rec.figure({ id: 'pull.floor_read_ms', label: 'pull floor: PostgreSQL read of the 10k rows', unit: 'ms', value: spread(floorParts.readMs) });
    rec.figure({ id: 'pull.floor_transfer_ms', label: 'pull floor: the rows as one HTTP body (fetch, read, JSON.parse)', unit: 'ms', value: spread(floorParts.transferMs) });
    rec.figure({ id: 'pull.http_ms', label: 'pull: HTTP, the time with a request out (server + transfer)', unit: 'ms', value: spread(pulled.map((p) => p.httpMs)) });
    const local = spread(pulled.map((p) => p.ms - p.httpMs));
    rec.figure({
      id: 'pull.local_ms',
      label: 'pull: in the client while no request was out (parse, validate, apply); ratio = direct insert time / this',
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
