/**
 * Commits never depend on the user's own history (issue 18, the defect): the commit and the pull
 * of a fixed bundle — 500 inserts of new keys, 500 updates of the previous bundle's inserts, 100
 * deletes of keys from two bundles back — for a user who owns 0, 10,000 and 200,000 rows, first on
 * a database that was never analyzed, then after ANALYZE (what autovacuum does within a minute of
 * real use, and what flipped the plans to scans of the user's rows). Target: every level within
 * 1.5× of the same phase's 0-row user, and the analyzed phase within 1.5× of the never-analyzed.
 *
 * It runs in a database of its own on the bench's server, with autovacuum off for its tables so
 * that the first phase really has no statistics; its own runtime and gateway serve it.
 */
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/index.js';
import { type Benchmark, type BenchContext } from './lib/context.js';
import { HttpClient } from './lib/http-client.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { type Recorder } from './lib/report.js';
import { insertRows, makeNotes, type Note, type PushRow } from './lib/rows.js';
import { BENCH_JWT_SECRET, startSideDatabase } from './lib/server.js';
import { BENCH_SCHEMA_SQL, SYNC_TABLES_SPEC } from './lib/schema.js';
import { spread, timed, type Spread } from './lib/stats.js';

const LEVELS = [0, 10_000, 200_000] as const;
const INSERTS = 500;
const UPDATES = 500;
const DELETES = 100;
export const OWN_HISTORY_TARGET_RATIO = 1.5;
const DATABASE = 'own_history';

/** One user's rolling state: the keys of its last two bundles' inserts and their versions. */
interface Stream {
  readonly client: HttpClient;
  readonly user: string;
  next: number;
  previous: { notes: Note[]; seq: number } | null;
  older: { notes: Note[]; seq: number } | null;
}

/** The fixed bundle: inserts of new keys, updates of the previous bundle's inserts, deletes from two back. */
function nextBundle(s: Stream): { rows: PushRow[]; inserted: Note[] } {
  const inserted = makeNotes(INSERTS, s.next);
  const rows: PushRow[] = insertRows(inserted);
  for (const n of (s.previous?.notes ?? []).slice(0, UPDATES)) {
    rows.push({ schema: 'bench', table: 'notes', key: { id: n.id }, op: 'UPDATE', base_row_version: s.previous?.seq ?? 0, payload: { ...n, title: `${n.title} (edited)` } });
  }
  // Rows of two bundles back that the previous bundle did not update (it updated all of them),
  // so their version is the previous bundle's.
  for (const n of (s.older?.notes ?? []).slice(0, DELETES)) {
    rows.push({ schema: 'bench', table: 'notes', key: { id: n.id }, op: 'DELETE', base_row_version: s.previous?.seq ?? 0, payload: null });
  }
  return { rows, inserted };
}

async function commitOnce(s: Stream): Promise<{ commitMs: number; seq: number; rows: number }> {
  const { rows, inserted } = nextBundle(s);
  const t = await pushBundle(s.client, rows, s.next++);
  s.older = s.previous;
  s.previous = { notes: inserted, seq: t.bundleSeq };
  return { commitMs: t.commitMs, seq: t.bundleSeq, rows: rows.length };
}

interface Level {
  readonly commitMs: Spread;
  readonly pullMs: Spread;
}

/**
 * One phase: every user's warm-up round, then the measured runs interleaved across users (run i
 * of every level before run i + 1 of any), so a change in the shared machine's load falls on all
 * levels alike instead of on whichever level it happened to coincide with.
 */
async function measurePhase(ctx: BenchContext, rec: Recorder, streams: readonly Stream[], phase: string): Promise<Level[]> {
  const commits: number[][] = streams.map(() => []);
  const pulls: number[][] = streams.map(() => []);
  for (const s of streams) {
    const warm = await commitOnce(s);
    await s.client.get(`/sync/pull?after_bundle_seq=${warm.seq - 1}&max_bundles=1`);
  }
  for (let i = 0; i < ctx.runs(7); i++) {
    for (const [j, s] of streams.entries()) {
      const label = `${phase}, ${LEVELS[j]} own rows`;
      const c = await commitOnce(s);
      rec.check(`${label}: run ${i} is the full fixed bundle`, c.rows === INSERTS + UPDATES + DELETES, `${c.rows} rows`);
      commits[j]?.push(c.commitMs);
      const pulled = await timed(() => s.client.get<{ bundles: { row_count: number }[] }>(`/sync/pull?after_bundle_seq=${c.seq - 1}&max_bundles=1`));
      rec.expectEqual(`${label}: run ${i} pulled rows`, pulled.result.body.bundles[0]?.row_count ?? -1, INSERTS + UPDATES + DELETES);
      pulls[j]?.push(pulled.ms);
    }
  }
  return streams.map((_, j) => ({ commitMs: spread(commits[j] ?? []), pullMs: spread(pulls[j] ?? []) }));
}

export const ownHistoryBenchmark: Benchmark = {
  name: 'own-history',
  async run(ctx, rec) {
    const { server } = ctx;
    const side = await startSideDatabase(server, DATABASE, {
      schemaSql: BENCH_SCHEMA_SQL,
      tables: SYNC_TABLES_SPEC,
    });
    // No statistics until the second phase: autovacuum would analyze these tables within a minute.
    const { admin, db } = side;
    const config = side.runtime.config;
    const tables = await admin.query<{ name: string }>(`
      SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname IN ('bench', 'sync')`);
    for (const t of tables.rows) await admin.query(`ALTER TABLE ${t.name} SET (autovacuum_enabled = false)`);
    try {
      const streams: Stream[] = [];
      for (const own of LEVELS) {
        const user = `own-${own}`;
        const client = new HttpClient(side.url, user, `src-${user}`, BENCH_JWT_SECRET, server.roundTrips);
        await initEmpty(client);
        if (own > 0) {
          const seeded = await timed(() => serverWrite(db, { userId: user, sourceId: 'server:seed', retainedBundlesPerUser: config.limits.retainedBundlesPerUser }, (tx, scope) =>
            tx.query(sql`
              INSERT INTO bench.notes (id, _sync_scope_id, title, body, position, done, updated_at)
              SELECT gen_random_uuid(), ${scope}, 'Own ' || g, 'history row #' || g, g, false, timestamptz '2026-01-01 00:00:00+00'
                FROM generate_series(1, ${own}::integer) g`)));
          ctx.log(`${user}: ${own} own rows in ${seeded.ms.toFixed(0)} ms`);
        }
        const s: Stream = { client, user, next: 1, previous: null, older: null };
        await commitOnce(s);
        await commitOnce(s); // now every bundle has its updates and deletes
        streams.push(s);
      }
      const stats = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM pg_stats WHERE schemaname IN ('bench', 'sync')`);
      rec.expectEqual('own history: no statistics in the never-analyzed phase', Number(stats.rows[0]?.n), 0);
      const phases: { name: string; levels: Level[] }[] = [];
      for (const phase of ['never analyzed', 'analyzed'] as const) {
        if (phase === 'analyzed') await admin.query('ANALYZE');
        const levels = await measurePhase(ctx, rec, streams, phase);
        for (const [i, level] of levels.entries()) {
          ctx.log(`${phase}, ${LEVELS[i]} own rows: commit ${level.commitMs.median.toFixed(1)} ms, pull ${level.pullMs.median.toFixed(1)} ms`);
        }
        phases.push({ name: phase, levels });
      }
      for (const kind of ['commit', 'pull'] as const) {
        const of = (l: Level): Spread => (kind === 'commit' ? l.commitMs : l.pullMs);
        const what = kind === 'commit' ? `commit of a fixed ${INSERTS + UPDATES + DELETES}-row bundle` : `pull of that bundle`;
        for (const { name, levels } of phases) {
          for (const [i, own] of LEVELS.entries()) {
            if (own === 0) continue;
            const value = of(levels[i] as Level);
            const baseline = of(levels[0] as Level);
            const ratio = value.median / baseline.median;
            rec.figure({
              id: `own_history.${kind}.${name.replace(' ', '_')}.${own}`,
              label: `${what}, user with ${own.toLocaleString('en-US')} own rows, ${name}`,
              unit: 'ms',
              value,
              baseline: { label: `the same user with 0 own rows, ${name}`, value: baseline },
              ratio,
              target: { text: `≤ ${OWN_HISTORY_TARGET_RATIO}× (flat)`, met: ratio <= OWN_HISTORY_TARGET_RATIO },
            });
          }
        }
        const top = LEVELS.length - 1;
        const analyzed = of(phases[1]?.levels[top] as Level);
        const never = of(phases[0]?.levels[top] as Level);
        const ratio = analyzed.median / never.median;
        rec.figure({
          id: `own_history.${kind}.analyzed_vs_never`,
          label: `${what}, ${LEVELS[top]?.toLocaleString('en-US')} own rows: analyzed vs never analyzed`,
          unit: 'ms',
          value: analyzed,
          baseline: { label: 'never analyzed', value: never },
          ratio,
          target: { text: `≤ ${OWN_HISTORY_TARGET_RATIO}× (flat)`, met: ratio <= OWN_HISTORY_TARGET_RATIO },
        });
      }
    } finally {
      await side.close();
    }
  },
};
