/**
 * The crash suites' bench (test/client-crash*.pg.test.ts, issue 10): one user's world per crash
 * point, device A killed at that point of a phase (in-process or by a real SIGKILL in a child),
 * then reopened and checked: integrity, a state the client could have committed, convergence,
 * exactly-once. Two files share it so that neither holds a project's forks alone for minutes.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openClient } from '../../client-web/client.js';
import { type SyncClient } from '../../client-web/api.js';
import { openNodeSqlite } from '../../client-web/sqlite/node.js';
import { type SqliteDb } from '../../client-web/sqlite/port.js';
import { expectConverged, LOCAL_APP_SQL, LOCAL_APP_TABLES, localState, openDevice, serverState, TEST_RETRY, write, type AppState, type Device } from './client-harness.js';
import { crashingDb, crashingFetch, killSwitch, type CrashJob } from './model-crash.js';
import { signToken, startTestServer, type TestServer } from './server.js';

export type Phase = 'push' | 'pull' | 'rebuild' | 'attach';
const uuid = () => randomUUID();
const CHILD = join(import.meta.dirname, 'model-crash-child.ts');
/** Small chunks and pages, so each phase has several requests and transactions to die in. */
const SIZES = { pushChunkRows: 10, pageRows: 10, pullBundles: 1 } as const;

export function runChild(job: CrashJob): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      env: { ...process.env, LOCKSTEP_CRASH_JOB: JSON.stringify(job) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

export async function integrity(db: SqliteDb): Promise<string[]> {
  return (await db.query('PRAGMA integrity_check')).map((r) => String(Object.values(r)[0]));
}

export const until = async (done: () => boolean): Promise<void> => {
  while (!done()) await new Promise((r) => setTimeout(r, 2));
};

async function bundlesOf(s: TestServer, user: string): Promise<{ seq: number; source_id: string; sbid: number; row_count: number }[]> {
  const r = await s.t.exec(
    `SELECT b.bundle_seq::int AS seq, b.source_id, b.source_bundle_id::int AS sbid, b.row_count FROM sync.bundle_log b JOIN sync.user_state u USING (user_id) WHERE u.user_id = $1 ORDER BY 1`,
    [user]);
  return r.rows;
}

/** What a crash suite's tests use. */
export interface CrashBench {
  /** The device folder (set once the suite's beforeAll has run). */
  readonly dir: string;
  /** Each phase killed at every await point of its trace, one world per point. */
  killedAtEveryPoint(phase: Phase): void;
  /** Real SIGKILLs of a child at the commit of each transaction kind of `phases`. */
  sigkilledAtCommits(phases: readonly Exclude<Phase, 'attach'>[]): void;
}

/** A describe block with its own test server and device folder, and the crash bench over them. */
export function describeCrashes(title: string, tests: (bench: CrashBench) => void): void {
  describe(title, () => {
    let s: TestServer;
    let dir: string;
    beforeAll(async () => {
      s = await startTestServer();
      dir = mkdtempSync(join(tmpdir(), 'lockstep-crash-'));
    });
    afterAll(async () => {
      await s?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    /** One user's world for a phase: device A on a file (closed, ready to be reopened) and device B. */
    interface World {
      readonly user: string;
      readonly path: string;
      readonly b: Device;
      /** Checks on the reopened A before it syncs: what it holds is a state the client could commit. */
      readonly checkReopened: (a: Device) => Promise<void>;
      /** Rows A pushes exactly once in the end (bundles of A's source and their row counts). */
      readonly expectedFromA: number[];
    }

    async function world(phase: Phase, tag: string): Promise<World> {
      const user = `crash-${phase}-${tag}`;
      const path = join(dir, `${user}.db`);
      const a = await openDevice(s, user, { path, config: SIZES });
      // B sets the scene and syncs in the end: small requests are what A dies in, and B's would only
      // slow every world down (about a quarter of this suite's time).
      const b = await openDevice(s, user);
      if (phase !== 'attach') await a.client.attach(user);
      await b.client.attach(user);
      if (phase === 'attach') {
        // A fresh device hydrates B's lists and then their items, page by page, straight into the
        // tables (the server sends parents first).
        for (let n = 0; n < 3; n++) {
          const listId = uuid();
          await write.list(b.db, listId, `B list ${n}`);
          for (let i = 0; i < 12; i++) await write.item(b.db, uuid(), listId, `B ${n}.${i}`);
        }
        for (let n = 0; n < 25; n++) await write.list(b.db, uuid(), `B empty list ${n}`);
        await b.client.sync();
        const server = await serverState(s, user);
        await a.close();
        return {
          user, path, b, expectedFromA: [],
          // Server rows only, exactly as the server has them, every item under its list.
          checkReopened: async (reopened) => {
            const local = await localState(reopened.db);
            for (const [id, list] of Object.entries(local.lists)) expect(list, `list ${id}`).toEqual(server.lists[id]);
            for (const [id, item] of Object.entries(local.items)) {
              expect(item, `item ${id}`).toEqual(server.items[id]);
              expect(local.lists[item.list_id], `the list of item ${id}`).toBeDefined();
            }
            expect((await reopened.client.pendingStatus()).dirtyRows).toBe(0);
          },
        };
      }
      if (phase === 'push') {
        const listId = uuid();
        await write.list(a.db, listId, 'to push');
        for (let i = 0; i < 30; i++) await write.item(a.db, uuid(), listId, `item ${i}`);
        await a.close();
        return { user, path, b, expectedFromA: [31], checkReopened: async () => undefined };
      }
      if (phase === 'pull') {
        await write.list(a.db, uuid(), 'pending on A');
        const seqOf = new Map<string, number>();
        for (let n = 0; n < 3; n++) {
          const listId = uuid();
          await write.list(b.db, listId, `from B ${n}`);
          for (let i = 0; i < 4; i++) await write.item(b.db, uuid(), listId, `B ${n}.${i}`);
          const pushed = (await b.client.sync()).push;
          if (pushed.status !== 'committed') throw new Error('setup push failed');
          seqOf.set(listId, pushed.bundleSeq);
        }
        await a.close();
        return {
          user, path, b, expectedFromA: [1],
          // The checkpoint and the rows move together: B's lists up to the checkpoint, complete, and none after it.
          checkReopened: async (reopened) => {
            const { checkpoint } = await reopened.client.pendingStatus();
            const local = await localState(reopened.db);
            for (const [listId, seq] of seqOf) {
              expect(local.lists[listId] !== undefined, `list of bundle ${seq} present iff ≤ checkpoint ${checkpoint}`).toBe(seq <= checkpoint);
              expect(Object.values(local.items).filter((i) => i.list_id === listId)).toHaveLength(seq <= checkpoint ? 4 : 0);
            }
            expect(Object.values(local.lists).filter((l) => l.title === 'pending on A')).toHaveLength(1);
          },
        };
      }
      // rebuild: A holds bundle 1 of B; B then commits bundle 2 and renames bundle 1's list.
      const first = uuid();
      await write.list(b.db, first, 'B first');
      for (let i = 0; i < 20; i++) await write.item(b.db, uuid(), first, `first ${i}`);
      await b.client.sync();
      await a.client.sync();
      await write.list(b.db, first, 'B first, renamed');
      const second = uuid();
      await write.list(b.db, second, 'B second');
      for (let i = 0; i < 20; i++) await write.item(b.db, uuid(), second, `second ${i}`);
      await b.client.sync();
      const pending = uuid();
      await write.list(a.db, pending, 'pending on A');
      const before = await localState(a.db);
      const after: AppState = await serverState(s, user);
      after.lists[pending] = before.lists[pending] as AppState['lists'][string];
      await a.close();
      return {
        user, path, b, expectedFromA: [1],
        // All of the snapshot or none of it; the pending row either way.
        checkReopened: async (reopened) => {
          const local = await localState(reopened.db);
          expect([before, after].some((x) => JSON.stringify(sorted(x)) === JSON.stringify(sorted(local))), 'the old state or the rebuilt one').toBe(true);
          // A download interrupted after its session was recorded resumes where it stopped.
          const [state] = await reopened.db.query<{ snapshot_id: string | null }>('SELECT snapshot_id FROM _sync_rebuild_state WHERE id = 1');
          if (state?.snapshot_id) expect((await reopened.client.rebuild()).resumed).toBe(true);
        },
      };
    }

    const sorted = (x: AppState) => ({
      lists: Object.fromEntries(Object.entries(x.lists).sort(([k1], [k2]) => k1.localeCompare(k2))),
      items: Object.fromEntries(Object.entries(x.items).sort(([k1], [k2]) => k1.localeCompare(k2))),
    });

    const act = (client: SyncClient, phase: Phase, user: string): Promise<unknown> =>
      phase === 'push' ? client.pushPending() : phase === 'pull' ? client.pullToStable() : phase === 'attach' ? client.attach(user) : client.rebuild();

    /** Runs the phase on A killed at `killAt` (0: not at all; answers the trace). */
    async function killInProcess(w: World, phase: Phase, killAt: number): Promise<string[]> {
      const sw = killSwitch();
      sw.killAt = killAt;
      const db = await openNodeSqlite({ path: w.path, durable: false });
      await db.exec(LOCAL_APP_SQL);
      const client = await openClient({
        baseUrl: s.url, getToken: () => signToken(w.user), db: crashingDb(db, sw), tables: LOCAL_APP_TABLES,
        fetch: crashingFetch(sw), retry: TEST_RETRY, ...SIZES,
      });
      sw.armed = true;
      let finished = false;
      let failure: unknown = null;
      act(client, phase, w.user).then(() => (finished = true), (e: unknown) => ((failure = e), (finished = true)));
      await until(() => finished || sw.killed);
      if (failure) throw failure;
      if (killAt === 0) {
        sw.armed = false;
        await client.close();
      } else {
        expect(sw.killed, `the phase passed point ${killAt}`).toBe(true);
      }
      // A killed client is abandoned as it is: no close, no rollback.
      return sw.points;
    }

    async function killInChild(w: World, phase: Exclude<Phase, 'attach'>, killAt: number, trace: readonly string[]): Promise<void> {
      // By label and occurrence, not index: the trace may interleave differently in the child.
      const label = trace[killAt - 1] as string;
      const occurrence = trace.slice(0, killAt).filter((p) => p === label).length;
      const child = await runChild({ baseUrl: s.url, token: await signToken(w.user), path: w.path, schemaSql: LOCAL_APP_SQL, tables: LOCAL_APP_TABLES, phase, killAt, expectLabel: label, occurrence, ...SIZES });
      expect({ signal: child.signal, stderr: child.stderr }).toEqual({ signal: 'SIGKILL', stderr: '' });
    }

    /** Reopens A after the kill and checks integrity, the reopened state, convergence and exactly-once. */
    async function recover(w: World): Promise<{ hotJournal: boolean }> {
      const hotJournal = existsSync(`${w.path}-journal`);
      const a = await openDevice(s, w.user, { path: w.path, config: SIZES });
      try {
        expect(await integrity(a.db)).toEqual(['ok']);
        expect(existsSync(`${w.path}-journal`)).toBe(false);
        await w.checkReopened(a);
        // Killed before its attach was recorded, a device attaches again.
        if ((await a.client.pendingStatus()).attachedUserId === null) await a.client.attach(w.user);
        await a.client.sync();
        await w.b.client.sync();
        await a.client.sync();
        await expectConverged(s, w.user, a, w.b);
        const status = await a.client.pendingStatus();
        expect(status).toMatchObject({ dirtyRows: 0, frozenRows: 0, rebuildRequired: false, rejected: null, sourceRecovery: null });
        const bundles = await bundlesOf(s, w.user);
        expect(status.checkpoint).toBe(bundles.length);
        expect(bundles.filter((b) => b.source_id === status.sourceId).map((b) => b.row_count), 'A pushed its rows exactly once').toEqual(w.expectedFromA);
        expect(await integrity(a.db)).toEqual(['ok']);
      } finally {
        await a.close();
        await w.b.close();
      }
      return { hotJournal };
    }

    const traces = new Map<Phase, string[]>();

    tests({
      get dir() {
        return dir;
      },
      killedAtEveryPoint(phase) {
        it(`${phase}: killed at every await point, the database reopens intact and converges exactly once`, async () => {
          const trace = await killInProcess(await world(phase, 'trace'), phase, 0);
          traces.set(phase, trace);
          expect(trace.filter((p) => p === 'tx COMMIT').length).toBeGreaterThanOrEqual(phase === 'push' ? 2 : 3);
          let hot = 0;
          for (let n = 1; n <= trace.length; n++) {
            const w = await world(phase, `p${n}`);
            await killInProcess(w, phase, n);
            try {
              if ((await recover(w)).hotJournal) hot++;
            } catch (error) {
              throw new Error(`${phase} killed at point ${n} (${trace[n - 1]}): ${String(error)}\ntrace:\n${trace.map((p, i) => `${i + 1} ${p}`).join('\n')}`, { cause: error });
            }
          }
          console.log(`${phase}: ${trace.length} crash points, ${hot} left a hot journal`);
          // Kills inside transactions happened (the journal was there to roll back).
          expect(hot).toBeGreaterThan(0);
        });
      },
      sigkilledAtCommits(phases) {
        it(`a real SIGKILL at the commit of each transaction kind and after the commit answer: ${phases.join(', ')}`, async () => {
          let cases = 0;
          for (const phase of phases) {
            // The trace of a phase this file killed in-process already, or a fresh one.
            const trace = traces.get(phase) ?? (await killInProcess(await world(phase, 'trace-child'), phase, 0));
            const commits = trace.flatMap((p, i) => (p === 'tx COMMIT' ? [i + 1] : []));
            const chosen = new Set([commits[0] as number, commits.at(-1) as number, (commits.at(-1) as number) - 1]);
            const answer = trace.findIndex((p) => /^fetch< POST .*\/commit 200$/.test(p));
            if (answer >= 0) chosen.add(answer + 1);
            for (const n of chosen) {
              const w = await world(phase, `c${n}`);
              await killInChild(w, phase, n, trace);
              await recover(w);
              cases++;
            }
          }
          expect(cases).toBeGreaterThanOrEqual(3 * phases.length);
        });
      },
    });
  });
}
