/**
 * Hydration: a fresh device of the real web client attaches to a user with 100,000 rows. The
 * server answers `remote_authoritative` and the client rebuilds from a snapshot session (create,
 * pages of the server's largest page size, staged into wa-sqlite, applied set-based), against
 * inserting the same rows into wa-sqlite directly in one transaction. Also reports the
 * server-side snapshot create (the POST that materialises 100k rows) and the pages' HTTP time.
 * The user's rows are written set-based through serverWrite, as one captured bundle.
 *
 * The floor (issue 18) is a PostgreSQL read of the same rows plus one wa-sqlite insert
 * transaction of them; the design's floor (design-floor.ts) adds what the protocol's design
 * itself asks: the frozen copy at create, the rows sent over HTTP in the protocol's shape (the
 * floor sends nothing) and the rows' versions kept by the client. Hydrations ask for the codings
 * chromium asks for (the edge answers brotli), and a few again as Node's fetch asks (gzip) and
 * with `identity`, to report the bytes and the time each costs or saves.
 *
 * Every measured hydration meets a new ceiling (a one-row server write before it, which leaves
 * the rows' fingerprint as it was), so the server renders the snapshot each time, as for the
 * first device after any change; a second device at the same ceiling, which shares the rendered
 * snapshot (layout 17), is reported apart.
 */
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/index.js';
import { type Benchmark } from './lib/context.js';
import { startGatewayProcess } from './lib/gateway-process.js';
import { type BenchServer } from './lib/server.js';
import { makeNotes, type Note } from './lib/rows.js';
import { SqlTimings } from './lib/sql-timing.js';
import { rowsPerSecond, spread, timed } from './lib/stats.js';
import { BROWSER_ACCEPT_ENCODING, clientFingerprint, directInsert, LINK_RTT_MS, localWrite, NODE_ACCEPT_ENCODING, notesFingerprint, openBaselineDb, openBenchDevice } from './lib/web-client.js';
import { startBodyServer } from './lib/body-server.js';
import { designFloorSnapshot, designFloorTransferAndApplyArrays, keptVersions, openDesignFloorDb, specRowArrays } from './lib/design-floor.js';

const ROWS = 100_000;
export const HYDRATION_TARGET_ROWS_PER_S = 50_000;
export const HYDRATION_TARGET_RATIO = 0.5;
const USER = 'hydrate-user';
/** The small user whose attach is measured over a link, and how many attaches a side. */
const SMALL_ROWS = 50;
const SMALL_ATTACHES = 8;
const SNAPSHOT_CREATE = 'POST /sync/snapshot-sessions';
const SNAPSHOT_PAGE = 'GET /sync/snapshot-sessions/{snapshot_id}';

interface HydrationRun {
  readonly ms: number;
  readonly wireBytes: number;
  readonly bodyBytes: number;
  readonly httpMs: number;
  readonly createMs: number;
  readonly pagesMs: number;
  readonly pages: number;
}

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
    // Measured on an analyzed database, as production's is within a minute of a bulk load
    // (autovacuum), and as the push figures are. Without it, a full run hydrates against the
    // statistics the push benchmark's ANALYZE left at ~1,000 rows per table: the planner then
    // takes this user for one row and renders the snapshot serially (create ~550 against ~370 ms).
    await server.admin.query('ANALYZE');
    rec.note('hydration: measured after ANALYZE (statistics as autovacuum leaves them)');
    const raw = await server.admin.query<{ id: string; title: string; body: string; position: number; done: boolean; updated_at: string }>(
      `SELECT id::text, title, body, position, done, to_json(updated_at)#>>'{}' AS updated_at FROM bench.notes WHERE _sync_scope_id = $1 ORDER BY id`,
      [USER],
    );
    const notes: Note[] = raw.rows;
    rec.expectEqual('hydration: seeded rows', notes.length, ROWS);
    let snapshotSeq = seeded.result.bundle?.bundle_seq ?? NaN;
    const expected = notesFingerprint(notes);
    // A new ceiling: one row written again as it is (a bundle of one row; the fingerprint stays).
    const newCeiling = async (): Promise<void> => {
      const { bundle } = await serverWrite(server.db, { userId: USER, sourceId: 'server:bench-seed', retainedBundlesPerUser: server.runtime.config.limits.retainedBundlesPerUser }, (tx, scope) =>
        tx.query(sql`UPDATE bench.notes SET done = done WHERE _sync_scope_id = ${scope} AND position = ${1 + (Number.isFinite(snapshotSeq) ? snapshotSeq : 0) % ROWS}`));
      snapshotSeq = bundle?.bundle_seq ?? NaN;
    };

    const sqlTimings = new SqlTimings();
    const hydrateOnce = async (i: number | string, acceptEncoding = BROWSER_ACCEPT_ENCODING, through: BenchServer = server, timings: SqlTimings = sqlTimings,
      link: { latencyMs?: number; config?: { pagesAhead: number } } = {}): Promise<HydrationRun> => {
      const device = await openBenchDevice(through, USER, timings, { acceptEncoding, ...link });
      try {
        const { ms, result } = await timed(() => device.client.attach(USER));
        const http = device.http;
        const run = { ms, wireBytes: http.wireBytes, bodyBytes: http.bodyBytes, httpMs: http.ms, createMs: http.msOf(SNAPSHOT_CREATE), pagesMs: http.msOf(SNAPSHOT_PAGE), pages: http.byRoute.get(SNAPSHOT_PAGE)?.requests ?? 0 };
        rec.check(`hydration run ${i}: attach rebuilt from a snapshot`, result.status === 'attached' && result.resolution === 'remote_authoritative', JSON.stringify(result));
        rec.expectEqual(`hydration run ${i}: rows applied`, result.status === 'attached' ? result.hydratedRows : -1, ROWS);
        const status = await device.client.pendingStatus();
        rec.expectEqual(`hydration run ${i}: client checkpoint`, status.checkpoint, snapshotSeq);
        rec.expectEqual(`hydration run ${i}: hydrated rows captured as local changes`, status.dirtyRows, 0);
        const fingerprint = await clientFingerprint(device.db);
        rec.check(`hydration run ${i}: client rows equal the source rows`, fingerprint === expected, `${fingerprint} (expected ${expected})`);
        return run;
      } finally {
        await device.close();
      }
    };
    // The floor (issue 18): reading the rows from PostgreSQL plus one wa-sqlite insert transaction
    // of the same rows; what any hydration must at least do.
    const readRows = () => server.admin.query(
      `SELECT id::text, title, body, position, done, to_json(updated_at)#>>'{}' AS updated_at FROM bench.notes WHERE _sync_scope_id = $1 ORDER BY id`, [USER]);
    const readMs: number[] = [];
    const directOnce = async (i: number): Promise<number> => {
      const db = await openBaselineDb();
      try {
        const { ms } = await timed(async () => {
          const read = await timed(readRows);
          readMs.push(read.ms);
          await directInsert(db, read.result.rows);
        });
        const fingerprint = await clientFingerprint(db);
        rec.check(`hydration baseline run ${i}: rows equal the source rows`, fingerprint === expected, `${fingerprint} (expected ${expected})`);
        return ms;
      } finally {
        await db.close();
      }
    };
    // The design's floor: the frozen copy, its read, the rows in the protocol's lightest shape
    // (arrays) as one HTTP body, the rows and their versions into wa-sqlite.
    const copyMs: number[] = [];
    const bodyServer = await startBodyServer();
    const designOnce = async (i: number): Promise<number> => {
      const db = await openDesignFloorDb();
      try {
        const { ms } = await timed(async () => {
          const snapshot = await designFloorSnapshot(server.admin, USER, i + 10);
          copyMs.push(snapshot.copyMs);
          await designFloorTransferAndApplyArrays(bodyServer, db, specRowArrays(snapshot.rows, () => snapshotSeq));
        });
        const fingerprint = await clientFingerprint(db);
        rec.check(`hydration design floor run ${i}: rows equal the source rows`, fingerprint === expected, `${fingerprint} (expected ${expected})`);
        rec.expectEqual(`hydration design floor run ${i}: row versions kept`, await keptVersions(db), ROWS);
        return ms;
      } finally {
        await db.close();
        await server.admin.query('DELETE FROM bench.floor_snapshot WHERE snapshot_id = $1', [i + 10]);
      }
    };

    const runs = ctx.runs(5);
    const hydrated: HydrationRun[] = [];
    const shared: HydrationRun[] = [];
    const direct: number[] = [];
    const design: number[] = [];
    const fresh = async (i: number) => {
      await newCeiling();
      hydrated.push(await hydrateOnce(i));
    };
    try {
      await hydrateOnce('warm-up');
      await designOnce(-1);
      copyMs.length = 0;
      sqlTimings.reset();
      for (let i = 0; i < runs; i++) {
        if (i % 2 === 0) {
          await fresh(i);
          direct.push(await directOnce(i));
          design.push(await designOnce(i));
        } else {
          design.push(await designOnce(i));
          direct.push(await directOnce(i));
          await fresh(i);
        }
        // Another device right after, at the same ceiling: the rendered snapshot is shared.
        shared.push(await hydrateOnce(`${i} shared`));
        const h = hydrated.at(-1) as HydrationRun;
        ctx.log(`hydration run ${i}: ${h.ms.toFixed(0)} ms (HTTP ${h.httpMs.toFixed(0)}: create ${h.createMs.toFixed(0)}, ${h.pages} pages ${h.pagesMs.toFixed(0)}; client ${(h.ms - h.httpMs).toFixed(0)}; ${(h.wireBytes / 1e6).toFixed(1)} MB on the wire), ` +
          `second device ${(shared.at(-1) as HydrationRun).ms.toFixed(0)} ms (create ${(shared.at(-1) as HydrationRun).createMs.toFixed(0)}), floor ${direct.at(-1)?.toFixed(0)} ms (read ${readMs.at(-1)?.toFixed(0)}), ` +
          `design floor ${design.at(-1)?.toFixed(0)} ms (copy ${copyMs.at(-1)?.toFixed(0)})`);
      }
    } finally {
      await bodyServer.close();
    }
    // The same hydration asking as Node's fetch does (gzip), and for uncompressed answers (identity).
    const gzip: HydrationRun[] = [];
    const identity: HydrationRun[] = [];
    for (let i = 0; i < Math.min(runs, 3); i++) {
      for (const [kind, encoding, into] of [['gzip', NODE_ACCEPT_ENCODING, gzip], ['identity', 'identity', identity]] as const) {
        await newCeiling();
        into.push(await hydrateOnce(`${kind} ${i}`, encoding));
        const h = into.at(-1) as HydrationRun;
        ctx.log(`hydration run ${kind} ${i}: ${h.ms.toFixed(0)} ms (HTTP ${h.httpMs.toFixed(0)}; ${(h.wireBytes / 1e6).toFixed(1)} MB on the wire)`);
      }
    }
    // Over a link adding a round trip to every request, as a phone's would: three pages asked for
    // ahead (the client's default) against one at a time (what the client did before),
    // alternated, at the same ceiling (the rendered snapshot shared), so only the paging differs.
    const linked = { ahead: [] as HydrationRun[], one: [] as HydrationRun[] };
    const linkTimings = new SqlTimings(); // not reported: the statements are the same as above
    for (let i = 0; i < Math.min(runs, 3); i++) {
      const order = i % 2 === 0 ? (['ahead', 'one'] as const) : (['one', 'ahead'] as const);
      for (const key of order) {
        const config = { pagesAhead: key === 'ahead' ? 3 : 1 };
        linked[key].push(await hydrateOnce(`link ${key} ${i}`, BROWSER_ACCEPT_ENCODING, server, linkTimings, { latencyMs: LINK_RTT_MS, config }));
      }
      ctx.log(`hydration run link ${i}: three pages ahead ${(linked.ahead.at(-1) as HydrationRun).ms.toFixed(0)} ms, one ${(linked.one.at(-1) as HydrationRun).ms.toFixed(0)} ms`);
    }
    // The same fresh hydrations with the gateway in a process of its own (npm start over this
    // database), as a browser and a Lambda function never share a thread: the page apply no
    // longer holds back the server's next page.
    const apart: HydrationRun[] = [];
    const apartTimings = new SqlTimings(); // not reported: the statements are the same as above
    const gateway = await startGatewayProcess(server);
    try {
      await hydrateOnce('own-process warm-up', BROWSER_ACCEPT_ENCODING, gateway.server, apartTimings);
      for (let i = 0; i < runs; i++) {
        await newCeiling();
        apart.push(await hydrateOnce(`own-process ${i}`, BROWSER_ACCEPT_ENCODING, gateway.server, apartTimings));
        ctx.log(`hydration run own-process ${i}: ${(apart.at(-1) as HydrationRun).ms.toFixed(0)} ms`);
      }
    } finally {
      await gateway.close();
    }
    const rate = spread(hydrated.map((h) => rowsPerSecond(ROWS, h.ms)));
    const base = spread(direct.map((ms) => rowsPerSecond(ROWS, ms)));
    const floor = { label: 'floor: the same rows read from PostgreSQL and inserted into wa-sqlite in one transaction', value: base };
    const ratio = rate.median / base.median;
    rec.figure({
      id: 'hydration.rows_per_s',
      label: 'hydrate 100k rows, real client: attach (connect + snapshot create + pages + stage + apply)',
      unit: 'rows/s',
      value: rate,
      baseline: floor,
      ratio,
      target: { text: `≥ ${HYDRATION_TARGET_ROWS_PER_S.toLocaleString('en-US')} rows/s and ≥ ${HYDRATION_TARGET_RATIO}× baseline`, met: rate.median >= HYDRATION_TARGET_ROWS_PER_S && ratio >= HYDRATION_TARGET_RATIO },
    });
    const designRate = spread(design.map((ms) => rowsPerSecond(ROWS, ms)));
    rec.figure({
      id: 'hydration.design_floor_rows_per_s',
      label: 'hydration design floor: the rows copied as a frozen snapshot (one statement), read back, sent as one HTTP body in the protocol\'s lightest row shape (arrays), inserted with their row versions',
      unit: 'rows/s',
      value: designRate,
      baseline: floor,
      ratio: designRate.median / base.median,
    });
    rec.figure({
      id: 'hydration.vs_design_floor',
      label: 'hydrate 100k rows against the design floor; ratio = hydration rows/s / design floor rows/s',
      unit: 'rows/s',
      value: rate,
      baseline: { label: 'the design floor above', value: designRate },
      ratio: rate.median / designRate.median,
    });
    rec.figure({ id: 'hydration.design_floor_copy_ms', label: 'hydration design floor: the frozen copy of the 100k rows', unit: 'ms', value: spread(copyMs) });
    const apartRate = spread(apart.map((h) => rowsPerSecond(ROWS, h.ms)));
    rec.figure({
      id: 'hydration.own_process_rows_per_s',
      label: 'hydrate 100k rows, the same with the gateway in a process of its own (npm start over this database), as browser and server never share a thread',
      unit: 'rows/s',
      value: apartRate,
      baseline: floor,
      ratio: apartRate.median / base.median,
    });
    const linkRate = spread(linked.ahead.map((h) => rowsPerSecond(ROWS, h.ms)));
    const linkOneRate = spread(linked.one.map((h) => rowsPerSecond(ROWS, h.ms)));
    rec.figure({
      id: 'hydration.link_rows_per_s',
      label: `hydrate 100k rows over a link adding ${LINK_RTT_MS} ms to each request (the rendered snapshot shared): three pages asked for ahead (the default); ratio = this / one page ahead`,
      unit: 'rows/s',
      value: linkRate,
      baseline: { label: 'one page asked for ahead', value: linkOneRate },
      ratio: linkRate.median / linkOneRate.median,
      ratioOf: 'three ahead rows/s / one ahead rows/s',
    });
    const sharedRate = spread(shared.map((h) => rowsPerSecond(ROWS, h.ms)));
    rec.figure({
      id: 'hydration.shared_rows_per_s',
      label: 'hydrate 100k rows, a second device at the same ceiling (the rendered snapshot shared); ratio = this / fresh',
      unit: 'rows/s',
      value: sharedRate,
      ratio: sharedRate.median / rate.median,
      ratioOf: 'shared rows/s / fresh rows/s',
    });
    rec.figure({ id: 'hydration.shared_create_ms', label: 'hydration, second device: snapshot create (shared)', unit: 'ms', value: spread(shared.map((h) => h.createMs)) });
    const plainBytes = spread(identity.map((h) => h.wireBytes / 1e6));
    for (const [id, coding, asks, runsOf] of [['wire_mb', 'brotli', 'chromium', hydrated], ['gzip_wire_mb', 'gzip', "Node's fetch", gzip]] as const) {
      const bytes = spread(runsOf.map((h) => h.wireBytes / 1e6));
      rec.figure({
        id: `hydration.${id}`,
        label: `hydration: response bytes on the wire, as ${asks} asks (${coding}) vs accept-encoding: identity`,
        unit: 'MB',
        value: bytes,
        baseline: { label: 'identity', value: plainBytes },
        ratio: bytes.median / plainBytes.median,
        ratioOf: `${coding} MB / identity MB`,
      });
    }
    const gzipRate = spread(gzip.map((h) => rowsPerSecond(ROWS, h.ms)));
    rec.figure({
      id: 'hydration.gzip_rows_per_s',
      label: "hydration as Node's fetch asks (gzip); ratio = the headline's rate (brotli, as chromium asks) / this",
      unit: 'rows/s',
      value: gzipRate,
      ratio: rate.median / gzipRate.median,
      ratioOf: 'brotli rows/s / gzip rows/s',
    });
    const plainRate = spread(identity.map((h) => rowsPerSecond(ROWS, h.ms)));
    rec.figure({
      id: 'hydration.identity_rows_per_s',
      label: "hydration without compression (accept-encoding: identity); ratio = the headline's rate (brotli) / this",
      unit: 'rows/s',
      value: plainRate,
      ratio: rate.median / plainRate.median,
      ratioOf: 'brotli rows/s / identity rows/s',
    });
    rec.figure({ id: 'hydration.read_ms', label: 'hydration floor: PostgreSQL read of the 100k rows (part of the floor)', unit: 'ms', value: spread(readMs) });
    rec.figure({ id: 'hydration.create_ms', label: 'hydration: snapshot create of 100k rows, its answer carrying the first page (server, POST)', unit: 'ms', value: spread(hydrated.map((h) => h.createMs)) });
    rec.figure({ id: 'hydration.pages_ms', label: `hydration: ${hydrated[0]?.pages} snapshot pages over HTTP (the sum of their requests, which overlap the apply of the page before)`, unit: 'ms', value: spread(hydrated.map((h) => h.pagesMs)) });
    const local = spread(hydrated.map((h) => h.ms - h.httpMs));
    rec.figure({
      id: 'hydration.local_ms',
      label: 'hydration: in the client while no request was out (parse, validate, stage, apply); ratio = floor time / this',
      unit: 'ms',
      value: local,
      baseline: { label: 'floor (read + insert) of the same rows, ms', value: spread(direct) },
      ratio: spread(direct).median / local.median,
      ratioOf: 'floor ms / client ms',
    });
    rec.note(`hydration, costliest local statements over ${runs} hydrations: ${sqlTimings.top(3, 90).join(' ‖ ')}`);

    // A small user's attach over the link: the connect and the create whose answer carries the rows,
    // sent together (the session's delete is left going, and waited for by the next run or close),
    // against the same attach asking for its page with a request of its own, one round trip more.
    const smallUser = 'hydrate-small-user';
    const writer = await openBenchDevice(server, smallUser);
    try {
      await writer.client.attach(smallUser);
      await localWrite(writer.db, makeNotes(SMALL_ROWS, 11));
      await writer.client.sync();
    } finally {
      await writer.close();
    }
    const smallAttach = async (snapshotFirstPage: boolean, i: number) => {
      const device = await openBenchDevice(server, smallUser, undefined, { latencyMs: LINK_RTT_MS, config: { snapshotFirstPage } });
      try {
        device.http.reset();
        const { ms, result } = await timed(() => device.client.attach(smallUser));
        rec.check(`small attach over the link (first page with the create: ${snapshotFirstPage}), run ${i}: hydrated every row`,
          result.status === 'attached' && result.hydratedRows === SMALL_ROWS, JSON.stringify(result));
        return { ms, requests: device.http.requests };
      } finally {
        await device.close();
      }
    };
    const smallWith: { ms: number; requests: number }[] = [];
    const smallWithout: { ms: number; requests: number }[] = [];
    for (let i = 0; i < SMALL_ATTACHES + 2; i++) {
      const withPage = await smallAttach(true, i);
      const without = await smallAttach(false, i);
      if (i < 2) continue;
      smallWith.push(withPage);
      smallWithout.push(without);
    }
    const requestsOf = (runs: readonly { requests: number }[]) => spread(runs.map((r) => r.requests)).median;
    rec.figure({
      id: 'hydration.small_link_ms',
      label: `attach of a user with ${SMALL_ROWS} rows over a link adding ${LINK_RTT_MS} ms to each request, the first page in the create's answer ` +
        `(${requestsOf(smallWith)} requests: connect and snapshot create, sent together); ratio = the page asked for on its own (${requestsOf(smallWithout)} requests) / this`,
      unit: 'ms',
      value: spread(smallWith.map((r) => r.ms)),
      baseline: { label: 'the same attach asking for its page with a request of its own', value: spread(smallWithout.map((r) => r.ms)) },
      ratio: spread(smallWithout.map((r) => r.ms)).median / spread(smallWith.map((r) => r.ms)).median,
    });
  },
};
