/**
 * A client in its own process, killed for real: `node --import tsx model-crash-child.ts` with a
 * JSON job in LOCKSTEP_CRASH_JOB. It opens the client on the job's file, arms the crash points
 * (model-crash.ts), runs one phase (push, pull or rebuild) and SIGKILLs itself at point
 * `killAt` — refusing (exit 3) if that point is not the expected one, so a drifting trace cannot
 * silently kill somewhere else. With killAt 0 it prints the trace as JSON and exits 0.
 */
import { openClient } from '../../client-web/client.js';
import { openNodeSqlite } from '../../client-web/sqlite/node.js';
import { crashingDb, crashingFetch, killSwitch, type CrashJob } from './model-crash.js';

const job = JSON.parse(process.env['LOCKSTEP_CRASH_JOB'] ?? '{}') as CrashJob;
const sw = killSwitch((label) => {
  if (job.expectLabel !== undefined && label !== job.expectLabel) {
    process.stderr.write(`crash point ${job.killAt} is "${label}", expected "${job.expectLabel}"\n`);
    process.exit(3);
  }
  process.kill(process.pid, 'SIGKILL');
});
sw.killAt = job.killAt;
if (job.occurrence !== undefined && job.expectLabel !== undefined) {
  sw.killLabel = job.expectLabel;
  sw.killOccurrence = job.occurrence;
}
// A SIGKILL, not a power cut: the flush at each commit is not what this child tests.
const db = await openNodeSqlite({ path: job.path, durable: false });
if (job.phase === 'journal') {
  await db.exec('PRAGMA cache_size = 2');
  await db.transaction(async (tx) => {
    for (let i = 0; i < 300; i++) await tx.run('INSERT INTO t (v) VALUES (?)', [new Uint8Array(1000).fill(i % 256)]);
    process.kill(process.pid, 'SIGKILL');
  });
}
await db.exec(job.schemaSql);
const client = await openClient({
  baseUrl: job.baseUrl,
  getToken: () => job.token,
  db: crashingDb(db, sw),
  tables: job.tables,
  fetch: crashingFetch(sw),
  retry: { maxAttempts: 5, baseDelayMs: 5, maxDelayMs: 50 },
  ...(job.pushChunkRows ? { pushChunkRows: job.pushChunkRows } : {}),
  ...(job.pageRows ? { pageRows: job.pageRows } : {}),
  ...(job.pullBundles ? { pullBundles: job.pullBundles } : {}),
});
sw.armed = true;
if (job.phase === 'push') await client.pushPending();
else if (job.phase === 'pull') await client.pullToStable();
else await client.rebuild();
sw.armed = false;
process.stdout.write(JSON.stringify({ points: sw.points }));
await client.close();
