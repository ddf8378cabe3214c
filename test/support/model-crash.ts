/**
 * Crash points for client crash tests (issue 10): a SqliteDb wrapper and a fetch wrapper that
 * number every await point of the client — each statement (inside a transaction or not), the
 * moment before a transaction commits, the moment before a request leaves and the moment after
 * its answer arrived — and at point N "kill" the client.
 *
 * Two kills: in-process, the client freezes at point N for good (every later operation hangs, so
 * an open transaction is never rolled back or committed: the node file VFS writes through with
 * synchronous node:fs calls, so the file and its journal are exactly what a killed process would
 * leave); in a child process (model-crash-child.ts), the process SIGKILLs itself at point N.
 *
 * No vitest import: the child process loads this module too.
 */
import { type TableConfig } from '../../client-web/api.js';
import { type SqlValue, type SqliteDb, type SqliteStatements } from '../../client-web/sqlite/port.js';

export interface KillSwitch {
  /** Labels of the points passed so far, in order (the trace). */
  readonly points: string[];
  /** 1-based point at which to kill; 0 = never. */
  killAt: number;
  /** Points count only while armed (setup and openClient are not crash points here). */
  armed: boolean;
  killed: boolean;
  /**
   * Kill at the `killOccurrence`-th pass of the point labelled `killLabel` instead of at an index:
   * a trace may interleave differently from run to run (the next snapshot page is fetched while
   * the previous one is staged), and a label names the same point in every run.
   */
  killLabel?: string;
  killOccurrence?: number;
  /** What a kill does: in-process nothing (the caller hangs); in a child, SIGKILL. */
  readonly onKill: (label: string) => void;
}

export function killSwitch(onKill: (label: string) => void = () => undefined): KillSwitch {
  return { points: [], killAt: 0, armed: false, killed: false, onKill };
}

/** A promise that never settles: the frozen "process" never gets past this await. */
const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/** Passes one point; true when the client dies here (or died before). */
function pass(sw: KillSwitch, label: string): boolean {
  if (sw.killed) return true;
  if (!sw.armed) return false;
  sw.points.push(label);
  const hit = sw.killLabel !== undefined
    ? label === sw.killLabel && sw.points.filter((p) => p === label).length === (sw.killOccurrence ?? 1)
    : sw.killAt > 0 && sw.points.length === sw.killAt;
  if (hit) {
    sw.killed = true;
    sw.onKill(label);
    return true;
  }
  return false;
}

const short = (sql: string) => sql.trim().replace(/\s+/g, ' ').slice(0, 70);

function statements(inner: SqliteStatements, sw: KillSwitch, prefix: string): SqliteStatements {
  return {
    exec: (sql: string) => (pass(sw, `${prefix}exec ${short(sql)}`) ? never() : inner.exec(sql)),
    run: (sql: string, params?: readonly SqlValue[]) => (pass(sw, `${prefix}run ${short(sql)}`) ? never() : inner.run(sql, params)),
    query: <T extends Record<string, SqlValue>>(sql: string, params?: readonly SqlValue[]) =>
      pass(sw, `${prefix}query ${short(sql)}`) ? never<T[]>() : inner.query<T>(sql, params),
    runMany: (sql: string, rows: readonly (readonly SqlValue[])[]) => (pass(sw, `${prefix}runMany ${short(sql)}`) ? never() : inner.runMany(sql, rows)),
  };
}

/** The database as the client sees it: every statement and every commit is a crash point. */
export function crashingDb(db: SqliteDb, sw: KillSwitch): SqliteDb {
  return {
    ...statements(db, sw, ''),
    transaction<T>(fn: (tx: SqliteStatements) => Promise<T>): Promise<T> {
      if (pass(sw, 'BEGIN')) return never();
      return db.transaction(async (tx) => {
        const result = await fn(statements(tx, sw, 'tx '));
        // Killed here, the transaction's statements have all run and nothing is committed.
        if (pass(sw, 'tx COMMIT')) return never<T>();
        return result;
      });
    },
    tablesRead: (sql) => db.tablesRead(sql),
    onCommit: (listener) => db.onCommit(listener),
    close: () => (sw.killed ? never() : db.close()),
  };
}

/** fetch with a crash point before the request leaves and one after its answer arrived. */
export function crashingFetch(sw: KillSwitch, base: typeof fetch = (input, init) => fetch(input, init)): typeof fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const what = `${init?.method ?? 'GET'} ${url.pathname.replace(/[0-9a-f-]{36}/g, ':id')}`;
    if (pass(sw, `fetch> ${what}`)) return never();
    const response = await base(input, init);
    // Killed here, the server has done the work and the client never learns the answer.
    if (pass(sw, `fetch< ${what} ${response.status}`)) return never();
    return response;
  };
}

/** The job of one child process (model-crash-child.ts), passed as JSON in LOCKSTEP_CRASH_JOB. */
export interface CrashJob {
  readonly baseUrl: string;
  readonly token: string;
  readonly path: string;
  readonly schemaSql: string;
  readonly tables: readonly TableConfig[];
  /** `journal`: no client; a big transaction spills pages into the file, then the kill. */
  readonly phase: 'push' | 'pull' | 'rebuild' | 'journal';
  readonly killAt: number;
  readonly expectLabel?: string;
  /** Kill at this occurrence of `expectLabel` (label mode), instead of at index `killAt`. */
  readonly occurrence?: number;
  readonly pushChunkRows?: number;
  readonly pageRows?: number;
  readonly pullBundles?: number;
}
