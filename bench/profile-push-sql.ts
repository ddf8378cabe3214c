/**
 * Where a one-row push in one request goes on the server (the commit phase of write → other
 * browser): every PostgreSQL query of the gateway's pool, timed, for `n` single-request pushes.
 *
 *   npx tsx bench/profile-push-sql.ts [pushes=30]
 */
import http from 'node:http';
import pg from 'pg';
import { startBenchServer } from './lib/server.js';
import { initEmpty } from './lib/push.js';
import { insertRows, makeNotes, requestHash } from './lib/rows.js';

const n = Number(process.argv[2] ?? 30);
const spans: { text: string; start: number; end: number }[] = [];
let recording = false;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const config = args[0] as string | { text?: string; name?: string };
  const text = (typeof config === 'string' ? config : config?.text ?? config?.name ?? '?').replace(/\s+/g, ' ').slice(0, 110);
  const start = performance.now();
  const result = (query as (...a: unknown[]) => unknown).apply(this, args);
  if (recording && result && typeof (result as Promise<unknown>).then === 'function') {
    (result as Promise<unknown>).then(() => spans.push({ text, start, end: performance.now() }), () => spans.push({ text: 'FAILED ' + text, start, end: performance.now() }));
  }
  return result;
} as typeof query;

// When each request reached Node's HTTP server (headers parsed) and its body was read.
const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (this: http.Server, event: string, ...args: unknown[]) {
  if (event === 'request' && recording) {
    const [req] = args as [http.IncomingMessage];
    const start = performance.now();
    spans.push({ text: `(request at Node) ${req.method} ${req.url}`, start, end: start });
    req.once('end', () => spans.push({ text: '(body read)', start: performance.now(), end: performance.now() }));
  }
  return (emit as (this: http.Server, event: string, ...rest: unknown[]) => boolean).call(this, event, ...args);
} as typeof emit;
for (const name of ['importKey', 'verify'] as const) {
  const subtle = globalThis.crypto.subtle as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const original = subtle[name] as (...a: unknown[]) => Promise<unknown>;
  subtle[name] = function (this: unknown, ...a: unknown[]) {
    const start = performance.now();
    const result = original.apply(this, a);
    if (recording) void result.then(() => spans.push({ text: `(subtle.${name})`, start, end: performance.now() }), () => undefined);
    return result;
  };
}
const server = await startBenchServer();
try {
  // Every managed function's own time (pg_stat_user_functions), for the measured pushes only.
  await server.admin.query("ALTER SYSTEM SET track_functions = 'all'");
  await server.admin.query('SELECT pg_reload_conf()');
  const client = server.client('push-sql-user');
  await initEmpty(client);
  const totals: number[] = [];
  const per = new Map<string, number[]>();
  for (let i = -3; i < n; i++) {
    const rows = insertRows(makeNotes(1, i + 10));
    spans.length = 0;
    recording = true;
    const t0 = performance.now();
    const answer = await client.post<{ status: string }>('/sync/push-sessions', { source_bundle_id: i + 4, planned_row_count: 1, request_hash: requestHash(rows), rows });
    const t1 = performance.now();
    await new Promise((r) => setTimeout(r, 30));
    recording = false;
    if (answer.body.status !== 'committed') throw new Error(JSON.stringify(answer.body));
    if (i < 0) {
      if (i === -1) await server.admin.query('SELECT pg_stat_reset()');
      continue;
    }
    totals.push(t1 - t0);
    const seen = new Map<string, number>();
    for (const s of spans) {
      const k = `${s.text}#${seen.get(s.text) ?? 0}`;
      seen.set(s.text, (seen.get(s.text) ?? 0) + 1);
      per.set(k, [...(per.get(k) ?? []), s.end - s.start]);
    }
    if (i === n - 1) {
      console.log(`last push: ${(t1 - t0).toFixed(1)} ms`);
      for (const s of spans.sort((a, b) => a.start - b.start)) console.log(`${(s.start - t0).toFixed(1).padStart(6)} +${(s.end - s.start).toFixed(1).padStart(5)}  ${s.text}`);
    }
  }
  await new Promise((r) => setTimeout(r, 600));
  const { rows: fns } = await server.admin.query<{ name: string; calls: string; total: number; self: number }>(
    `SELECT schemaname || '.' || funcname AS name, calls, total_time AS total, self_time AS self FROM pg_stat_user_functions ORDER BY self_time DESC LIMIT 25`);
  console.log('\nmanaged functions (ms per push: total, self; calls per push)');
  for (const f of fns) console.log(`${(f.total / n).toFixed(3).padStart(8)} ${(f.self / n).toFixed(3).padStart(8)} ${(Number(f.calls) / n).toFixed(1).padStart(6)}  ${f.name}`);
  if (process.env['EXPLAIN_HASH'] === '1') {
    // finalize_bundle's hash query (dynamic SQL: planned at every commit), for the last bundle.
    const { rows: [last] } = await server.admin.query<{ user_id: string; seq: string }>('SELECT user_id, max(bundle_seq) AS seq FROM sync.bundle_log GROUP BY user_id ORDER BY 2 DESC LIMIT 1');
    const { rows: [cat] } = await server.admin.query<{ q: string }>('SELECT hash_rows_sql AS q FROM sync.table_catalog WHERE hash_rows_sql IS NOT NULL LIMIT 1');
    const q = `SELECT string_agg(t, ',' ORDER BY o), sum(octet_length(t)), string_agg(coalesce(t2, t), ',' ORDER BY o), coalesce(bool_or(t2 <> t), false) FROM (${cat?.q}) x`;
    for (let k = 0; k < 3; k++) {
      const { rows } = await server.admin.query(`EXPLAIN (ANALYZE, SUMMARY) ${q.replace(/\$1/g, `'${String(last?.user_id)}'`).replace(/\$2/g, String(last?.seq))}`);
      console.log(rows.map((r: Record<string, string>) => r['QUERY PLAN']).filter((l) => /Planning|Execution/.test(l ?? '')).join('; '));
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] as number;
  console.log(`\nmedian push round trip ${med(totals).toFixed(1)} ms over ${totals.length}`);
  for (const [k, v] of per) console.log(`${med(v).toFixed(2).padStart(7)} ×${v.length}  ${k}`);
} finally {
  await server.close();
}
