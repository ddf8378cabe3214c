/**
 * Issue 10, crash safety of the client, continued from test/client-crash.pg.test.ts: a rebuild
 * from a snapshot and a fresh device's attach, killed at each of their await points. On reopen the
 * database passes `PRAGMA integrity_check`, holds all of the snapshot or none of it (never half a
 * page, never a checkpoint ahead of its rows), and converges with the server.
 */
import { describeCrashes } from './support/crash-world.js';

describeCrashes('client crash safety: rebuild and attach', (bench) => {
  bench.killedAtEveryPoint('rebuild');
  bench.killedAtEveryPoint('attach');
});
