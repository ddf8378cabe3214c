/**
 * Issue 10, crash safety of the client: the client is killed at each await point of push and
 * pull (every statement, every commit, before every request and after every answer; rebuild and
 * attach in client-crash-rebuild.pg.test.ts);
 * on reopen the database passes `PRAGMA integrity_check`, what it holds is a state the client
 * could have committed (never half a page, never a checkpoint ahead of its rows), and a sync
 * converges with the server without duplicating a bundle or losing a pending write.
 *
 * Every point is killed in-process (the client freezes for good at that point; see
 * test/support/model-crash.ts for why that leaves the file exactly as a killed process would),
 * and chosen points — the commit of each transaction kind, the lost commit answer — are killed
 * for real: a child process that SIGKILLs itself there. A first test shows that the node file
 * VFS rolls back a hot journal both ways, with pages already spilled into the database file.
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { describeCrashes, integrity, runChild, until } from './support/crash-world.js';

// Two files, not one: the files of a project share its forks (vitest.config.ts), and one file of
// all four phases took 167 s of pg17's ~200 s, so the project ended no sooner (later, begun late).
describeCrashes('client crash safety: the file, push and pull', (bench) => {
  it('the node file VFS rolls back a hot journal with spilled pages: abandoned in-process and SIGKILLed', async () => {
    for (const how of ['in-process', 'sigkill'] as const) {
      const path = join(bench.dir, `journal-${how}.db`);
      const db = await openNodeSqlite({ path });
      await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)');
      await db.run('INSERT INTO t (v) VALUES (?)', [new Uint8Array(10)]);
      const sizeBefore = statSync(path).size;
      if (how === 'in-process') {
        await db.exec('PRAGMA cache_size = 2');
        let filled = false;
        void db.transaction(async (tx) => {
          for (let i = 0; i < 300; i++) await tx.run('INSERT INTO t (v) VALUES (?)', [new Uint8Array(1000).fill(i % 256)]);
          filled = true;
          await new Promise<never>(() => undefined);
        });
        await until(() => filled);
      } else {
        await db.close();
        const child = await runChild({ baseUrl: '', token: '', path, schemaSql: '', tables: [], phase: 'journal', killAt: 0 });
        expect(child.signal).toBe('SIGKILL');
      }
      // The kill left pages of the open transaction in the file, and the journal to undo them.
      expect(statSync(path).size).toBeGreaterThan(sizeBefore);
      expect(existsSync(`${path}-journal`)).toBe(true);
      const reopened = await openNodeSqlite({ path });
      expect(await reopened.query('SELECT count(*) AS n FROM t')).toEqual([{ n: 1 }]);
      expect(await integrity(reopened)).toEqual(['ok']);
      expect(existsSync(`${path}-journal`)).toBe(false);
      await reopened.close();
    }
  });

  bench.killedAtEveryPoint('push');
  bench.killedAtEveryPoint('pull');
  bench.sigkilledAtCommits(['push', 'pull', 'rebuild']);
});
