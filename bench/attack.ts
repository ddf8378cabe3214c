/**
 * One user attacks, another pulls (issue 15's goal, moved here from test/attack-perf.pg.test.ts,
 * which now asserts only that the victim is never blocked): the victim's pull latency, p50 and
 * p99, while the attacker opens push sessions and stages bytes into them, copies all its rows into
 * snapshot sessions, or commits from many devices while its state row is locked; against the same
 * victim pulling with no attack, in the same run. Target: p99 under 500 ms under attack.
 */
import pg from 'pg';
import { sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/index.js';
import { type Benchmark } from './lib/context.js';
import { type HttpClient } from './lib/http-client.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { nowMs, percentile, spread } from './lib/stats.js';

export const ATTACK_P99_TARGET_MS = 500;
const ATTACK_MS = 4000;
const ATTACKERS = 8;

type Attack = (mallory: (device: string) => HttpClient) => Promise<void>;

export const attackBenchmark: Benchmark = {
  name: 'attack',
  async run(ctx, rec) {
    const { server } = ctx;
    const victim = server.client('attack-victim');
    await initEmpty(victim);
    const notes = makeNotes(200, 11);
    for (let b = 0; b < 20; b++) await pushBundle(victim, insertRows(notes.slice(b * 10, (b + 1) * 10)), b + 1);
    const mallory = (device: string) => server.client('attack-mallory', device);
    await initEmpty(mallory('mallory-0'));
    // Enough rows that each snapshot is real work.
    await serverWrite(server.db, { userId: 'attack-mallory', sourceId: 'server:seed', retainedBundlesPerUser: server.runtime.config.limits.retainedBundlesPerUser }, (tx, scope) =>
      tx.query(sql`INSERT INTO bench.notes (id, _sync_scope_id, title, body, position, done, updated_at)
        SELECT gen_random_uuid(), ${scope}, 'm' || g, repeat('m', 200), g, false, now() FROM generate_series(1, 5000) g`));

    /** The victim's pull latencies while `attack` runs in ATTACKERS loops (none: alone). */
    const pullsDuring = async (attack: Attack | null): Promise<number[]> => {
      const deadline = nowMs() + ATTACK_MS;
      const stop = () => nowMs() >= deadline;
      let failures = 0;
      const attackers = attack ? Array.from({ length: ATTACKERS }, async () => {
        while (!stop()) await attack(mallory).catch(() => undefined);
      }) : [];
      const latencies: number[] = [];
      while (!stop() || latencies.length < 20) {
        const started = nowMs();
        const answer = await victim.get<{ bundles: unknown[] }>('/sync/pull?after_bundle_seq=0').catch(() => null);
        latencies.push(nowMs() - started);
        if (answer?.body.bundles.length !== 20) failures++;
        await new Promise((r) => setTimeout(r, 20));
      }
      await Promise.all(attackers);
      rec.expectEqual(`attack: the victim's pulls that failed (${attack ? 'under attack' : 'alone'})`, failures, 0);
      return latencies;
    };

    let pushes = 0;
    const attacks: Array<[string, Attack]> = [
      ['push sessions (open and stage until the caps answer 429)', async (m) => {
        const c = m(`mallory-p${pushes++ % 4}`);
        const created = await c.post<{ push_id: string }>('/sync/push-sessions', { source_bundle_id: 1, planned_row_count: 500 });
        await c.post(`/sync/push-sessions/${created.body.push_id}/chunks`, { start_row_ordinal: 0, rows: insertRows(makeNotes(500, pushes)) });
      }],
      ['snapshot sessions (a copy of 5,000 rows each, until the cap answers 429)', async (m) => {
        await m('mallory-0').post('/sync/snapshot-sessions', {});
      }],
    ];
    const alone = await pullsDuring(null);
    const report = (label: string, latencies: number[], id: string) => {
      const p99 = percentile(latencies, 99);
      rec.figure({
        id,
        label: `victim's pull p99 ${label}; ratio = this p99 / p99 alone`,
        unit: 'ms',
        value: { ...spread(latencies), median: p99 },
        baseline: { label: 'the same pulls with no attack (p99)', value: { ...spread(alone), median: percentile(alone, 99) } },
        ratio: p99 / percentile(alone, 99),
        ratioOf: 'p99 under attack / p99 alone',
        target: { text: `p99 < ${ATTACK_P99_TARGET_MS} ms`, met: p99 < ATTACK_P99_TARGET_MS },
        note: `p50 ${percentile(latencies, 50).toFixed(0)} ms, ${latencies.length} pulls`,
      });
    };
    for (const [i, [label, attack]] of attacks.entries()) report(`while the attacker opens ${label}`, await pullsDuring(attack), `attack.p99_${i}`);
    // Locks: the attacker's state row held while it commits from many devices.
    const admin = new pg.Client({ connectionString: (server.admin as unknown as { options: { connectionString: string } }).options.connectionString });
    await admin.connect();
    try {
      await admin.query('BEGIN');
      await admin.query(`SELECT 1 FROM sync.user_state WHERE user_id = 'attack-mallory' FOR UPDATE`);
      let device = 0;
      report('while the attacker commits from many devices under a locked state row', await pullsDuring(async (m) => {
        const c = m(`mallory-lock-${device++}`);
        const rows = insertRows(makeNotes(1, device));
        await pushBundle(c, rows, 1);
      }), 'attack.p99_locks');
    } finally {
      await admin.query('ROLLBACK');
      await admin.end();
    }
    rec.note(`attack: the victim alone, p50 ${percentile(alone, 50).toFixed(0)} ms, p99 ${percentile(alone, 99).toFixed(0)} ms over ${alone.length} pulls; ${ATTACKERS} attacking loops, ${ATTACK_MS / 1000} s each`);
  },
};
