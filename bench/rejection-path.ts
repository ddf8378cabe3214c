/**
 * The rejection path's cost (issue 23 items 5–7): a 10,000-row bundle with one bad row at ordinal
 * 6,180, of each kind the server must name — a data exception, a not-null, a check, a unique clash
 * with an earlier row of the bundle, a foreign key to a missing row, an app trigger's refusal
 * (P0001, and a SQLSTATE of its own) — committed over HTTP: the time of the commit request that
 * answers `push_rejected` naming the row, against the commit of a good 10,000-row bundle in the
 * same run (both: the commit request alone; the chunks are uploaded before). Unique and foreign
 * key violations name the row from PostgreSQL's detail and one lookup; the others run
 * sync.first_failing_row (halves applied on top of the rows that passed, each try rolled back).
 *
 * The table it pushes to is registered by a bootstrap at its start (an additive schema change), so
 * the benchmarks before it run on the usual schema; it runs last.
 */
import { randomUUID } from 'node:crypto';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { parseTables } from '../core/config.js';
import { type Benchmark } from './lib/context.js';
import { initEmpty } from './lib/push.js';
import { requestHash } from './lib/rows.js';
import { BENCH_TABLES } from './lib/schema.js';
import { nowMs, spread } from './lib/stats.js';

const ROWS = 10_000;
const BAD_AT = 6_180;

const FAULTS_SQL = `
CREATE TABLE IF NOT EXISTS bench.faults (
  id uuid NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  label text,
  position integer CHECK (position >= 0),
  parent uuid,
  note text,
  PRIMARY KEY (_sync_scope_id, id),
  UNIQUE (_sync_scope_id, label),
  FOREIGN KEY (_sync_scope_id, parent) REFERENCES bench.faults (_sync_scope_id, id) DEFERRABLE INITIALLY DEFERRED
);
CREATE OR REPLACE FUNCTION bench.faults_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.note = 'forbidden' THEN RAISE EXCEPTION 'the note of % is forbidden', NEW.id; END IF;
  IF NEW.note = 'vetoed' THEN RAISE EXCEPTION 'the app vetoes %', NEW.id USING ERRCODE = 'AB123'; END IF;
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS faults_guard ON bench.faults;
CREATE TRIGGER faults_guard BEFORE INSERT OR UPDATE ON bench.faults FOR EACH ROW EXECUTE FUNCTION bench.faults_guard();`;

type Payload = Record<string, unknown>;

const KINDS: readonly { readonly kind: string; readonly bad: (rows: Payload[]) => Payload; readonly sqlstate: string; readonly path: 'lookup' | 'search' }[] = [
  { kind: 'data exception', bad: () => ({ position: 'abc' }), sqlstate: '22P02', path: 'search' },
  { kind: 'not null', bad: () => ({ title: null }), sqlstate: '23502', path: 'search' },
  { kind: 'check', bad: () => ({ position: -1 }), sqlstate: '23514', path: 'search' },
  { kind: 'app trigger (P0001)', bad: () => ({ note: 'forbidden' }), sqlstate: 'P0001', path: 'search' },
  { kind: 'app trigger (own SQLSTATE)', bad: () => ({ note: 'vetoed' }), sqlstate: 'AB123', path: 'search' },
  { kind: 'unique', bad: (rows) => ({ label: rows[17]?.['label'] }), sqlstate: '23505', path: 'lookup' },
  { kind: 'foreign key', bad: () => ({ parent: randomUUID() }), sqlstate: '23503', path: 'lookup' },
];

interface Row {
  readonly schema: 'bench';
  readonly table: 'faults';
  readonly key: { readonly id: string };
  readonly op: 'INSERT';
  readonly base_row_version: 0;
  readonly payload: Payload;
}

function rowsWith(bad?: (rows: Payload[]) => Payload): Row[] {
  const payloads: Payload[] = Array.from({ length: ROWS }, (_, i) => {
    const id = randomUUID();
    return { id, title: `title ${i}`, label: `label ${id}`, position: i, parent: null, note: `note ${i}` };
  });
  if (bad) payloads[BAD_AT] = { ...payloads[BAD_AT], ...bad(payloads) };
  return payloads.map((p) => ({ schema: 'bench', table: 'faults', key: { id: p['id'] as string }, op: 'INSERT', base_row_version: 0, payload: p }));
}

export const rejectionPathBenchmark: Benchmark = {
  name: 'rejection-path',
  async run(ctx, rec) {
    const { server } = ctx;
    await server.admin.query(FAULTS_SQL);
    await bootstrap(server.db, { tables: [...BENCH_TABLES, ...parseTables('bench.faults:id')] });
    server.runtime.invalidateCatalog();
    const c = server.client('rejection-user');
    await initEmpty(c);
    let sourceBundleId = 1;
    /** A staged session of these rows (create + chunks), ready to commit. */
    const stage = async (rows: readonly Row[]): Promise<string> => {
      const create = await c.post<{ push_id: string }>('/sync/push-sessions', { source_bundle_id: sourceBundleId, planned_row_count: rows.length, request_hash: requestHash(rows as never) });
      for (let start = 0; start < rows.length; start += 1000) {
        await c.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: start, rows: rows.slice(start, start + 1000) });
      }
      return create.body.push_id;
    };
    const commit = async (pushId: string, expect: 200 | 422) => {
      const t0 = nowMs();
      const answer = await c.post<{ status?: string; row_count?: number; error?: string; violation?: { sqlstate: string; key: { id: string } | null } }>(`/sync/push-sessions/${pushId}/commit`, {}, expect);
      return { ms: nowMs() - t0, answer: answer.body };
    };

    const runs = ctx.runs(3);
    // The baseline: good bundles committed, alternating with the rejected ones below.
    const good: number[] = [];
    const goodRun = async () => {
      const answer = await commit(await stage(rowsWith()), 200);
      rec.expectEqual(`rejection path: good bundle ${good.length + 1} committed rows`, answer.answer.status === 'committed' ? Number(answer.answer.row_count) : -1, ROWS);
      good.push(answer.ms);
      sourceBundleId++;
    };
    await goodRun();
    const byKind = new Map<string, number[]>();
    for (const k of KINDS) {
      const rows = rowsWith(k.bad);
      // A rejected session remembers its answer (a repeated commit answers it at once), so each run
      // stages the bundle in a new session: every figure is a first commit and its search.
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const pushId = await stage(rows);
        const { ms, answer } = await commit(pushId, 422);
        times.push(ms);
        rec.check(`rejection path: ${k.kind} run ${i + 1} names the bad row`, answer.error === 'push_rejected' && answer.violation?.sqlstate === k.sqlstate && answer.violation.key?.id === rows[BAD_AT]?.key.id,
          `${answer.error} ${answer.violation?.sqlstate} ${JSON.stringify(answer.violation?.key)}`);
        await c.del(`/sync/push-sessions/${pushId}`);
      }
      byKind.set(k.kind, times);
      if (good.length < runs) await goodRun();
    }
    while (good.length < runs) await goodRun();
    const base = spread(good);
    rec.figure({ id: 'rejection_path.good_commit_ms', label: 'commit of a good 10k-row bundle (the commit request)', unit: 'ms', value: base });
    for (const k of KINDS) {
      const value = spread(byKind.get(k.kind) ?? []);
      rec.figure({
        id: `rejection_path.${k.kind.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}_ms`,
        label: `name the one bad row of a 10k-row bundle: ${k.kind} (${k.path === 'lookup' ? 'from PostgreSQL\u2019s detail + one lookup' : 'sync.first_failing_row'})`,
        unit: 'ms',
        value,
        baseline: { label: 'commit of a good 10k-row bundle', value: base },
        ratio: value.median / base.median,
      });
    }
    rec.note(`rejection path: the bad row at ordinal ${BAD_AT} of ${ROWS}; each rejected commit is the whole request (failed commit, the search, the operator's note), ${runs} runs per kind, each on a newly staged session`);
  },
};
