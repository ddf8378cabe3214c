/**
 * Diagnostic: where a 10,000-row commit spends its time inside PostgreSQL. A session is staged
 * over HTTP as usual; its commit then runs on a direct connection with `track_functions = all`,
 * and pg_stat_xact_user_functions gives each managed function's self time within that commit.
 * The commit is the same single statement the push endpoint sends (same arguments as
 * core/sync/push.ts), so the total matches the endpoint's commit less HTTP.
 */
import { type Benchmark } from './lib/context.js';
import { initEmpty } from './lib/push.js';
import { insertRows, makeNotes, requestHash } from './lib/rows.js';
import { spread, timed } from './lib/stats.js';

const ROWS = 10_000;

export const commitBreakdownBenchmark: Benchmark = {
  name: 'commit-breakdown',
  async run(ctx, rec) {
    const { server } = ctx;
    const user = 'breakdown-user';
    const c = server.client(user);
    await initEmpty(c);
    const limits = server.runtime.config.limits;
    const totals: number[] = [];
    const selfMs = new Map<string, number[]>();
    const runs = ctx.runs(3);
    for (let i = 0; i < runs; i++) {
      const rows = insertRows(makeNotes(ROWS, i));
      const create = await c.post<{ push_id: string }>('/sync/push-sessions', { source_bundle_id: i + 1, planned_row_count: ROWS, request_hash: requestHash(rows) });
      const pushId = create.body.push_id;
      for (let start = 0; start < ROWS; start += 1000) await c.post(`/sync/push-sessions/${pushId}/chunks`, { start_row_ordinal: start, rows: rows.slice(start, start + 1000) });
      const conn = await server.admin.connect();
      try {
        await conn.query("SET track_functions = 'all'");
        await conn.query('BEGIN');
        const commit = await timed(() =>
          conn.query<{ answer: { status?: string; row_count?: number } }>('SELECT sync.push_commit($1, $2, $3::uuid, $4, $5) AS answer', [user, c.sourceId, pushId, limits.maxConflictsPerAnswer, limits.retainedBundlesPerUser]),
        );
        const stats = await conn.query<{ f: string; self_ms: number }>(
          "SELECT schemaname || '.' || funcname AS f, self_time AS self_ms FROM pg_stat_xact_user_functions WHERE schemaname = 'sync'",
        );
        await conn.query('COMMIT');
        await conn.query('RESET track_functions');
        const answer = commit.result.rows[0]?.answer;
        rec.expectEqual(`commit breakdown run ${i}: committed rows`, answer?.status === 'committed' ? Number(answer.row_count) : -1, ROWS);
        totals.push(commit.ms);
        for (const s of stats.rows) selfMs.set(s.f, [...(selfMs.get(s.f) ?? []), Number(s.self_ms)]);
      } finally {
        conn.release();
      }
    }
    rec.figure({ id: 'commit_breakdown.total_ms', label: 'commit 10k rows, SQL statement alone (direct connection)', unit: 'ms', value: spread(totals) });
    const ranked = [...selfMs.entries()].map(([f, ms]) => [f, spread(ms)] as const).sort((a, b) => b[1].median - a[1].median);
    for (const [f, s] of ranked.filter(([, s]) => s.median >= 1)) {
      rec.figure({ id: `commit_breakdown.${f}`, label: `commit 10k rows: self time in ${f}`, unit: 'ms', value: s });
    }
  },
};
