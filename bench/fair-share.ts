/**
 * Two attackers, one victim (issue 26 item 3): two users each keep 8 commits in flight from 8
 * devices while their state rows are locked (an operator's transaction holds them), so every
 * attacking request holds a connection until the lock bound answers it 503, and the attackers
 * would hold the whole pool if they could; a third user pulls its own small history in a loop.
 * The victim's pull p50 and p99 under attack, against the victim pulling alone in the same round
 * (the baseline); goal: p99 under 500 ms on a quiet machine. The attackers' answers (503 at the
 * lock bound, 429 when their part of the pool is full) are counted, not timed. Each phase is
 * bounded in time and in requests, and stops by itself.
 */
import { type Benchmark } from './lib/context.js';
import { BenchHttpError, type HttpClient } from './lib/http-client.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes, requestHash } from './lib/rows.js';
import { nowMs, percentile, spread } from './lib/stats.js';

const PHASE_MS = 5000;
const ATTACK_LOOPS_PER_USER = 8;
const VICTIM_BUNDLES = 20;
const VICTIM_ROWS_PER_BUNDLE = 10;
/** No phase sends more than this many requests per loop, whatever the machine's speed. */
const MAX_REQUESTS_PER_LOOP = 2000;

/** The victim's pull latencies (failed pulls too: a pull answered 503 or 429 waited as long). */
async function victimLoop(victim: HttpClient, until: number, failures: { count: number }): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < MAX_REQUESTS_PER_LOOP && nowMs() < until; i++) {
    const t0 = nowMs();
    try {
      await victim.get('/sync/pull?after_bundle_seq=0');
    } catch (error) {
      if (!(error instanceof BenchHttpError)) throw error;
      failures.count++;
    }
    latencies.push(nowMs() - t0);
  }
  return latencies;
}

/** One attacking device: a one-row bundle, committed again and again against the locked state row. */
async function attackLoop(attacker: HttpClient, until: number, statuses: Map<number, number>): Promise<void> {
  const rows = insertRows(makeNotes(1));
  for (let i = 0; i < MAX_REQUESTS_PER_LOOP && nowMs() < until; i++) {
    let status = 200;
    try {
      const created = await attacker.post<{ push_id: string }>('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 1, request_hash: requestHash(rows) });
      await attacker.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows });
      await attacker.post(`/sync/push-sessions/${created.body.push_id}/commit`);
    } catch (error) {
      if (!(error instanceof BenchHttpError)) throw error;
      status = error.status;
    }
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
  }
}

export const fairShareBenchmark: Benchmark = {
  name: 'fair-share',
  async run(ctx, rec) {
    const { server } = ctx;
    const runs = ctx.runs(3);
    const aloneP50: number[] = [];
    const aloneP99: number[] = [];
    const attackedP50: number[] = [];
    const attackedP99: number[] = [];
    const victimOps: number[] = [];
    const statuses = new Map<number, number>();
    const aloneFailures = { count: 0 };
    const victimFailures = { count: 0 };
    const attackerIds = ['fair-attacker-1', 'fair-attacker-2'];
    for (const id of attackerIds) await initEmpty(server.client(id));
    for (let round = 0; round < runs; round++) {
      const victim = server.client(`fair-victim-r${round}`);
      await initEmpty(victim);
      for (let b = 1; b <= VICTIM_BUNDLES; b++) await pushBundle(victim, insertRows(makeNotes(VICTIM_ROWS_PER_BUNDLE, b)), b);
      const alone = await victimLoop(victim, nowMs() + PHASE_MS, aloneFailures);
      // New devices each round: a device's bundle 1 commits once the lock is gone.
      const devices = attackerIds.flatMap((id) => Array.from({ length: ATTACK_LOOPS_PER_USER }, (_, d) => server.client(id, `${id}-r${round}-device-${d}`)));
      // An operator's transaction holds both attackers' state rows for the whole phase.
      const lock = await server.admin.connect();
      let attacked: number[];
      try {
        await lock.query('BEGIN');
        await lock.query('SELECT 1 FROM sync.user_state WHERE user_id = ANY ($1) FOR UPDATE', [attackerIds]);
        const until = nowMs() + PHASE_MS;
        const attacks = devices.map((d) => attackLoop(d, until, statuses));
        attacked = await victimLoop(victim, until, victimFailures);
        await lock.query('ROLLBACK');
        await Promise.all(attacks);
      } finally {
        lock.release();
      }
      aloneP50.push(percentile(alone, 50));
      aloneP99.push(percentile(alone, 99));
      attackedP50.push(percentile(attacked, 50));
      attackedP99.push(percentile(attacked, 99));
      victimOps.push(attacked.length);
      rec.check(`fair-share round ${round}: the victim was served under attack`, attacked.length > 0, `${attacked.length} pulls`);
      ctx.log(`fair-share round ${round}: victim pull p50 ${attackedP50.at(-1)?.toFixed(0)} ms, p99 ${attackedP99.at(-1)?.toFixed(0)} ms under attack ` +
        `(alone p50 ${aloneP50.at(-1)?.toFixed(0)}, p99 ${aloneP99.at(-1)?.toFixed(0)}), ${attacked.length} pulls in ${PHASE_MS / 1000} s`);
    }
    const answered = [...statuses.entries()].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`).join(', ');
    rec.check('fair-share: the attackers got only 503 (lock bound), 429 (their part of the pool), or 200 once the lock was gone',
      [...statuses.keys()].every((s) => s === 200 || s === 429 || s === 503), answered);
    ctx.log(`fair-share: attackers' answers ${answered}`);
    const p50 = spread(attackedP50);
    const p99 = spread(attackedP99);
    const baseP50 = spread(aloneP50);
    const baseP99 = spread(aloneP99);
    rec.figure({
      id: 'fair_share.victim_pull_p50_ms',
      label: `victim's pull p50 while 2 users each keep ${ATTACK_LOOPS_PER_USER} commits waiting on a lock`,
      unit: 'ms',
      value: p50,
      baseline: { label: 'the victim alone', value: baseP50 },
      ratio: p50.median / baseP50.median,
    });
    rec.figure({
      id: 'fair_share.victim_pull_p99_ms',
      label: 'victim\'s pull p99 beside two attackers',
      unit: 'ms',
      value: p99,
      baseline: { label: 'the victim alone', value: baseP99 },
      ratio: p99.median / baseP99.median,
      target: { text: '< 500 ms (quiet machine)', met: p99.median < 500 },
    });
    rec.figure({ id: 'fair_share.victim_failures', label: 'victim\'s pulls refused (503, 429) beside two attackers', unit: 'pulls',
      value: spread([victimFailures.count]), target: { text: '0', met: victimFailures.count === 0 } });
    rec.check('fair-share: the victim alone was never refused', aloneFailures.count === 0, `${aloneFailures.count} refused`);
    rec.figure({ id: 'fair_share.victim_pulls', label: `victim's pulls in ${PHASE_MS / 1000} s beside two attackers`, unit: 'pulls', value: spread(victimOps) });
  },
};
