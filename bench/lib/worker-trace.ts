/**
 * A timeline of one sync worker, for bench/profile-browser-latency.ts (never shipped): every SQL
 * call through the port with its OPFS work (sync access handle calls and their time), every
 * fetch, WebSocket message and postMessage, as absolute times (`performance.timeOrigin + now`,
 * which the page and Node share). Read with `globalThis.__trace` from the worker.
 */
import type { SqlValue, SqliteDb, SqliteStatements } from '../../client-web/sqlite/port.js';

export interface TraceEvent {
  readonly kind: string;
  readonly what: string;
  readonly start: number;
  readonly end: number;
  /** OPFS calls during the event: flushes, reads, writes, truncates, getSize; and their time (ms). */
  readonly io?: IoCounts;
}

export interface IoCounts {
  flush: number;
  read: number;
  write: number;
  truncate: number;
  getSize: number;
  ms: number;
  flushMs: number;
}

const now = () => performance.timeOrigin + performance.now();
const events: TraceEvent[] = [];
const io: IoCounts = { flush: 0, read: 0, write: 0, truncate: 0, getSize: 0, ms: 0, flushMs: 0 };

function snapshot(): IoCounts {
  return { ...io };
}

function delta(before: IoCounts): IoCounts {
  return {
    flush: io.flush - before.flush,
    read: io.read - before.read,
    write: io.write - before.write,
    truncate: io.truncate - before.truncate,
    getSize: io.getSize - before.getSize,
    ms: io.ms - before.ms,
    flushMs: io.flushMs - before.flushMs,
  };
}

export function record(kind: string, what: string, start: number, end = now(), counts?: IoCounts): void {
  events.push({ kind, what, start, end, ...(counts ? { io: counts } : {}) });
}

/** Patches the sync access handle, fetch, WebSocket and postMessage of this worker. */
export function installTrace(): void {
  const g = globalThis as unknown as Record<string, unknown>;
  g['__trace'] = events;
  const proto = (g['FileSystemSyncAccessHandle'] as { prototype: Record<string, (...args: unknown[]) => unknown> } | undefined)?.prototype;
  if (proto) {
    for (const name of ['flush', 'read', 'write', 'truncate', 'getSize'] as const) {
      const original = proto[name] as (...args: unknown[]) => unknown;
      proto[name] = function (this: unknown, ...args: unknown[]) {
        const t0 = performance.now();
        try {
          return original.apply(this, args);
        } finally {
          const dt = performance.now() - t0;
          io[name]++;
          io.ms += dt;
          if (name === 'flush') io.flushMs += dt;
        }
      };
    }
  }
  const realFetch = globalThis.fetch.bind(globalThis);
  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const start = now();
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    try {
      const response = await realFetch(input, init);
      const headersAt = now();
      const body = await response.clone().arrayBuffer().catch(() => null);
      // Resource timing: when the request left and the first byte came back.
      const entries = performance.getEntriesByName(new URL(url, location.href).href) as PerformanceResourceTiming[];
      const entry = entries.at(-1);
      const base = performance.timeOrigin;
      const timing = entry ? ` req +${(base + entry.requestStart - start).toFixed(1)} firstbyte +${(base + entry.responseStart - start).toFixed(1)} conn ${(entry.connectEnd - entry.connectStart).toFixed(1)}` : '';
      performance.clearResourceTimings();
      record('fetch', `${init?.method ?? 'GET'} ${new URL(url).pathname.replace(/[0-9a-f-]{36}/g, ':id')} → ${response.status} (${body?.byteLength ?? '?'} B, headers at +${(headersAt - start).toFixed(1)}${timing})`, start);
      return response;
    } catch (error) {
      record('fetch', `${init?.method ?? 'GET'} ${url} failed`, start);
      throw error;
    }
  };
  const RealSocket = globalThis.WebSocket;
  globalThis.WebSocket = class extends RealSocket {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols);
      this.addEventListener('message', (event: MessageEvent) => record('ws', `message ${String(event.data).slice(0, 80)}`, now(), now()));
    }
  };
  const scope = globalThis as unknown as { postMessage(m: unknown): void; addEventListener(t: string, l: (e: MessageEvent) => void): void };
  const post = scope.postMessage.bind(scope);
  scope.postMessage = (message: unknown) => {
    const start = now();
    post(message);
    const m = message as { t?: string; event?: { type?: string }; id?: number };
    record('post', `${m.t ?? '?'}${m.event?.type ? ` ${m.event.type}` : ''}${m.id !== undefined ? ` #${m.id}` : ''}`, start);
  };
  scope.addEventListener('message', (event: MessageEvent) => {
    const m = event.data as { t?: string; method?: string; id?: number; args?: unknown[] };
    const t = now();
    record('in', `${m.t ?? '?'} ${m.method ?? ''} #${m.id ?? ''} ${m.method === 'query' || m.method === 'run' ? String(m.args?.[0]).slice(0, 60) : ''}`, t, t);
  });
}

const short = (sql: string) => sql.replace(/\s+/g, ' ').trim().slice(0, 90);

function tracedStatements(inner: SqliteStatements, prefix: string): SqliteStatements {
  const wrap = <T>(what: string, call: () => Promise<T>): Promise<T> => {
    const start = now();
    const before = snapshot();
    return call().finally(() => record('sql', `${prefix}${what}`, start, now(), delta(before)));
  };
  return {
    exec: (sql) => wrap(`exec ${short(sql)}`, () => inner.exec(sql)),
    run: (sql, params?: readonly SqlValue[]) => wrap(`run ${short(sql)}`, () => inner.run(sql, params)),
    query: (sql, params?: readonly SqlValue[]) => wrap(`query ${short(sql)}`, () => inner.query(sql, params)),
    runMany: (sql, rows) => wrap(`runMany×${rows.length} ${short(sql)}`, () => inner.runMany(sql, rows)),
  } as SqliteStatements;
}

/** The port with every call recorded (a transaction as one event, its statements inside). */
export function tracedDb(db: SqliteDb): SqliteDb {
  const outer = tracedStatements(db, '');
  return {
    ...outer,
    transaction: (fn) => {
      const start = now();
      const before = snapshot();
      return db.transaction((tx) => fn(tracedStatements(tx, '  tx.'))).finally(() => record('tx', 'transaction', start, now(), delta(before)));
    },
    tablesRead: (sql) => db.tablesRead(sql),
    onCommit: (listener) => db.onCommit(listener),
    close: () => db.close(),
  };
}
