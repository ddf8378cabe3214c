/**
 * A small driver for profiling the real web client, outside `npm run bench`: one scenario, a few
 * repetitions; prints the time of each client call, its HTTP share (server, transfer) and the
 * costliest SQLite statements the client ran. With a third argument it also writes a V8 CPU
 * profile of the measured calls only (setup excluded; the gateway and the core run in the same
 * process, so filter the profile by file):
 *
 *   npx tsx bench/profile-client.ts pull|hydration|push [reps] [/tmp/client.cpuprofile]
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { serverWrite } from '../core/sync/index.js';
import { sql } from '../core/db/index.js';
import { initEmpty, pushBundle } from './lib/push.js';
import { insertRows, makeNotes } from './lib/rows.js';
import { startBenchServer } from './lib/server.js';
import { SqlTimings } from './lib/sql-timing.js';
import { nowMs } from './lib/stats.js';
import { clientFingerprint, directInsert, localWrite, openBaselineDb, openBenchDevice } from './lib/web-client.js';

const scenario = process.argv[2] ?? 'pull';
const reps = Number(process.argv[3] ?? 3);
const profilePath = process.argv[4];
const timings = new SqlTimings();
const inspector = new Session();

async function startProfile(): Promise<void> {
  if (!profilePath) return;
  inspector.connect();
  await inspector.post('Profiler.enable');
  await inspector.post('Profiler.setSamplingInterval', { interval: 200 });
  await inspector.post('Profiler.start');
}

async function stopProfile(): Promise<void> {
  if (!profilePath) return;
  const { profile } = await inspector.post('Profiler.stop');
  writeFileSync(profilePath, JSON.stringify(profile));
  console.log(`wrote ${profilePath}`);
}

function report(): void {
  for (const line of timings.top(12)) console.log(`  ${line}`);
  timings.reset();
}

async function main(): Promise<void> {
  const server = await startBenchServer();
  try {
    if (scenario === 'pull') {
      const writer = server.client('prof-pull', 'writer');
      await initEmpty(writer);
      const devices = [];
      for (let i = 0; i < reps; i++) {
        const d = await openBenchDevice(server, 'prof-pull', timings);
        await d.client.attach('prof-pull');
        devices.push(d);
      }
      const notes = makeNotes(10_000, 3);
      for (let b = 0; b < 100; b++) await pushBundle(writer, insertRows(notes.slice(b * 100, (b + 1) * 100)), b + 1);
      timings.reset();
      await startProfile();
      for (const d of devices) {
        d.http.reset();
        const t0 = nowMs();
        const r = await d.client.pullToStable();
        const ms = nowMs() - t0;
        console.log(`pull: ${ms.toFixed(0)} ms (http ${d.http.ms.toFixed(0)} ms, ${d.http.requests} requests), ${r.rowsApplied} rows, ${await clientFingerprint(d.db)}`);
        report();
        await d.close();
      }
      await stopProfile();
    } else if (scenario === 'hydration') {
      await serverWrite(server.db, { userId: 'prof-hydrate', sourceId: 'server:prof', retainedBundlesPerUser: 10_000 }, (tx, scope) =>
        tx.query(sql`
          INSERT INTO bench.notes (id, _sync_scope_id, title, body, position, done, updated_at)
          SELECT gen_random_uuid(), ${scope}, 'Note ' || g, 'body #' || g, g, g % 3 = 0, now() FROM generate_series(1, 100000) g`));
      await startProfile();
      for (let i = 0; i < reps; i++) {
        const d = await openBenchDevice(server, 'prof-hydrate', timings);
        timings.reset();
        const t0 = nowMs();
        const r = await d.client.attach('prof-hydrate');
        const ms = nowMs() - t0;
        console.log(`hydration: ${ms.toFixed(0)} ms (http ${d.http.ms.toFixed(0)} ms, ${d.http.requests} requests), ${JSON.stringify(r)}`);
        report();
        await d.close();
      }
      await stopProfile();
    } else if (scenario === 'push') {
      await startProfile();
      for (let i = 0; i < reps; i++) {
        const user = `prof-push-${i}`;
        const d = await openBenchDevice(server, user, timings);
        await d.client.attach(user);
        const notes = makeNotes(10_000, i);
        timings.reset();
        const w0 = nowMs();
        await localWrite(d.db, notes);
        const w1 = nowMs();
        d.http.reset();
        // This process's CPU (the client, the gateway and the edge; PostgreSQL is a process of its own).
        const cpu0 = process.cpuUsage();
        const r = await d.client.sync();
        const ms = nowMs() - w1;
        const cpu = process.cpuUsage(cpu0);
        console.log(`push: local write ${(w1 - w0).toFixed(0)} ms, sync ${ms.toFixed(0)} ms (http ${d.http.ms.toFixed(0)} ms, ${d.http.requests} requests; ` +
          `this process's CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms), ${JSON.stringify(r.push)}`);
        console.log(`  by route: ${[...d.http.byRoute].map(([route, t]) => `${route} ${t.ms.toFixed(0)} ms / ${t.requests}`).join(', ')}`);
        report();
        await d.close();
      }
      await stopProfile();
    }
    for (let i = 0; i < reps; i++) {
      const db = await openBaselineDb();
      const notes = makeNotes(10_000, i);
      const t0 = nowMs();
      await directInsert(db, notes);
      console.log(`baseline 10k direct insert: ${(nowMs() - t0).toFixed(0)} ms`);
      await db.close();
    }
  } finally {
    await server.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
