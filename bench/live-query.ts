/**
 * Live queries (issue 24 item 1), with the real client over wa-sqlite under Node:
 *
 * - Another device's write to this device's listener: device A inserts one row through
 *   `client.db`; device B, whose live query reads the table, hears of the commit by push
 *   notification (WebSocket, the commit feed of a long-running server), pulls, applies, re-runs
 *   the query and calls its listener. The clock stops in B's listener. Both loops run with their
 *   defaults (A's 25 ms debounce included). Median and p90.
 * - The cost of keeping a query over 10,000 rows live when one row changes: from the commit of a
 *   one-row UPDATE to the listener holding the new rows (the re-run through SQLite plus the diff
 *   that keeps the other 9,999 rows' objects), against the same query run plainly, interleaved.
 *   Target: at most 2× the plain query.
 */
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { type WebSocketFactory } from '../client-web/watch-socket.js';
import { type LiveQueryResult } from '../client-web/api.js';
import { type SqlRow } from '../client-web/sqlite/port.js';
import { type Benchmark } from './lib/context.js';
import { makeNotes } from './lib/rows.js';
import { BENCH_SCHEMA_SQL, SYNC_TABLES_SPEC } from './lib/schema.js';
import { startSideDatabase, type BenchServer } from './lib/server.js';
import { nowMs, percentile, spread } from './lib/stats.js';
import { localWrite, openBenchDevice } from './lib/web-client.js';

const NOTES_SQL = 'SELECT id, title, body, position, done, updated_at FROM notes ORDER BY position';
export const LIVE_QUERY_RATIO_TARGET = 2;
const ROWS = 10_000;
/** Node 20 has no WebSocket of its own: the `ws` package's, as an app under Node would pass. */
const connect: WebSocketFactory = (url) => new WebSocket(url) as unknown as ReturnType<WebSocketFactory>;

/** Resolves with the first result that `accept` takes. */
function nextResult(live: { subscribe(l: (r: LiveQueryResult<SqlRow>) => void): () => void }, accept: (r: LiveQueryResult<SqlRow>) => boolean): Promise<number> {
  return new Promise((resolve) => {
    const off = live.subscribe((r) => {
      if (!accept(r)) return;
      off();
      resolve(nowMs());
    });
  });
}

export const liveQueryBenchmark: Benchmark = {
  name: 'live-query',
  async run(ctx, rec) {
    // Push notifications need the commit feed: a database of its own, served as `npm start` serves it.
    const side = await startSideDatabase(ctx.server, 'live_query', { schemaSql: BENCH_SCHEMA_SQL, tables: SYNC_TABLES_SPEC, feed: true });
    const server: BenchServer = { ...ctx.server, url: side.url };
    const user = 'live-query-user';
    const a = await openBenchDevice(server, user);
    const b = await openBenchDevice(server, user, undefined, { config: { watch: 'websocket', webSocket: connect } });
    try {
      for (const d of [a, b]) await d.client.attach(user);
      a.client.start({ userId: user, periodicMs: 0 });
      b.client.start({ userId: user, periodicMs: 0 });

      // ── Another device's write → this device's listener ──────────────────────────────────────
      const live = b.client.liveQuery(NOTES_SQL);
      await new Promise((r) => setTimeout(r, 1500)); // B's socket opens and its first sync settles
      const writes: number[] = [];
      for (let i = 0; i < ctx.runs(30) + 1; i++) {
        const id = randomUUID();
        const arrived = nextResult(live, (r) => r.rows.some((row) => row['id'] === id));
        const started = nowMs();
        await a.client.db.run('INSERT INTO notes (id, title, body, position, done, updated_at) VALUES (?, ?, ?, ?, 0, ?)', [id, `live ${i}`, 'one row', -1 - i, new Date().toISOString()]);
        const ms = (await arrived) - started;
        if (i > 0) writes.push(ms); // the first one warms both devices up
        await new Promise((r) => setTimeout(r, 100));
      }
      live.close();
      const p90 = percentile(writes, 90);
      rec.figure({
        id: 'live_query.other_device_ms',
        label: `live query: one-row write on device A → B's listener (WebSocket notification, default debounce; p90 ${p90.toFixed(0)} ms)`,
        unit: 'ms',
        value: spread(writes),
      });
      ctx.log(`write on A → listener on B: median ${spread(writes).median.toFixed(1)} ms, p90 ${p90.toFixed(1)} ms`);

      // ── One row of 10,000 changes: re-run + diff vs the plain query ──────────────────────────
      await b.client.stop();
      await a.client.stop();
      const notes = makeNotes(ROWS, 24);
      await localWrite(b.client.db, notes);
      const all = b.client.liveQuery(NOTES_SQL);
      await new Promise<void>((resolve) => {
        const off = all.subscribe((r) => {
          if (r.rows.length < ROWS) return;
          off();
          resolve();
        });
      });
      const plain: number[] = [];
      const rerun: number[] = [];
      let reused = 0;
      let kept = 0;
      for (let i = 0; i < ctx.runs(20) + 1; i++) {
        const p0 = nowMs();
        const rows = await b.client.db.query(NOTES_SQL);
        const plainMs = nowMs() - p0;
        rec.check(`plain query ${i} answers every row`, rows.length >= ROWS, String(rows.length));
        const target = notes[(i * 997) % ROWS]?.id as string;
        const before = all.result.rows;
        let committed = 0;
        const offCommit = b.client.onTablesChanged((tables) => {
          if (tables.has('notes')) committed = nowMs();
        });
        const delivered = nextResult(all, (r) => r.rows !== before);
        await b.client.db.run('UPDATE notes SET title = ? WHERE id = ?', [`changed ${i}`, target]);
        const done = await delivered;
        offCommit();
        const after = all.result.rows;
        reused = after.filter((row, k) => row === before[k]).length;
        kept = before.length - 1;
        if (i === 0) continue; // warm-up
        plain.push(plainMs);
        rerun.push(done - committed);
      }
      all.close();
      rec.expectEqual('after one row changed, every other row is the same object', reused, kept);
      const value = spread(rerun);
      const baseline = spread(plain);
      const ratio = value.median / baseline.median;
      rec.figure({
        id: 'live_query.rerun_ms',
        label: `live query over ${ROWS.toLocaleString('en-US')} rows, one row changed: commit → listener (re-run + diff) vs the plain query`,
        unit: 'ms',
        value,
        baseline: { label: 'the same query, run plainly', value: baseline },
        ratio,
        target: { text: `≤ ${LIVE_QUERY_RATIO_TARGET}× the plain query`, met: ratio <= LIVE_QUERY_RATIO_TARGET },
      });
    } finally {
      await a.close().catch(() => undefined);
      await b.close().catch(() => undefined);
      await side.close();
    }
  },
};
