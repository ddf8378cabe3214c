/**
 * Devices of the real web client (client-web's `openClient`) over in-memory wa-sqlite under
 * Node, talking HTTP to the bench's gateway. The client's `fetch` is wrapped so a benchmark can
 * split a client call into waiting for HTTP answers (server, transfer, reading the body) and
 * everything else (JSON parse, validation, apply into SQLite), and so the round trips the server
 * reports land in the same per-route log as the raw HTTP client's.
 *
 * Also the baseline of the client-side benchmarks: the same rows inserted into wa-sqlite
 * directly, one prepared INSERT in one transaction, through the same SQLite port the client uses.
 */
import { SignJWT } from 'jose';
import { type ClientConfig, type SyncClient } from '../../client-web/api.js';
import { openClient } from '../../client-web/client.js';
import { insertValues } from '../../client-web/sqlite/insert-values.js';
import { openNodeSqlite } from '../../client-web/sqlite/node.js';
import { type SqlValue, type SqliteDb } from '../../client-web/sqlite/port.js';
import { ROUND_TRIPS_HEADER } from '../../functions/index.js';
import { routeOf } from './http-client.js';
import { type Note } from './rows.js';
import { BENCH_JWT_SECRET, type BenchServer } from './server.js';
import { type SqlTimings, timedDb } from './sql-timing.js';
import { nowMs } from './stats.js';

/** The client's copy of bench.notes (a UUID key as TEXT, booleans as 0/1, timestamps as text). */
export const CLIENT_NOTES_SQL = `CREATE TABLE notes (
  id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL,
  position INTEGER NOT NULL, done INTEGER NOT NULL, updated_at TEXT NOT NULL)`;

/** No retries: a benchmark must see every failure, not a slow success. */
/** The slow link of the benches' link runs: a round trip added to every request, as a phone's would. */
export const LINK_RTT_MS = 40;

const NO_RETRY = { maxAttempts: 1, baseDelayMs: 0, maxDelayMs: 0 } as const;

/**
 * Time spent waiting for HTTP answers, body included, since the last `reset()`: `ms` is the wall
 * time during which at least one request was out (a page asked for ahead overlaps the client's
 * apply of the current one, and counts once), `byRoute` the sum of each route's requests.
 */
export class HttpMeter {
  ms = 0;
  requests = 0;
  private inflight = 0;
  private busySince = 0;
  /** Response body bytes as sent (compressed when the server compressed them). */
  wireBytes = 0;
  /** Response body bytes after decoding. */
  bodyBytes = 0;
  readonly byRoute = new Map<string, { ms: number; requests: number }>();

  /** A request leaves. */
  start(): void {
    if (this.inflight++ === 0) this.busySince = nowMs();
  }

  /** A request's answer arrived (after `start()`). */
  record(route: string, ms: number, wireBytes = 0, bodyBytes = 0): void {
    if (--this.inflight === 0) this.ms += nowMs() - this.busySince;
    this.requests++;
    this.wireBytes += wireBytes;
    this.bodyBytes += bodyBytes;
    const r = this.byRoute.get(route) ?? { ms: 0, requests: 0 };
    r.ms += ms;
    r.requests++;
    this.byRoute.set(route, r);
  }

  /** Milliseconds spent on one route template, e.g. `POST /sync/snapshot-sessions`. */
  msOf(route: string): number {
    return this.byRoute.get(route)?.ms ?? 0;
  }

  reset(): void {
    this.ms = 0;
    this.inflight = 0;
    this.requests = 0;
    this.wireBytes = 0;
    this.bodyBytes = 0;
    this.byRoute.clear();
  }
}

export interface BenchDevice {
  readonly client: SyncClient;
  readonly db: SqliteDb;
  readonly http: HttpMeter;
  close(): Promise<void>;
}

/** The Accept-Encoding chromium sends, also to http://127.0.0.1: the edge answers brotli. */
export const BROWSER_ACCEPT_ENCODING = 'gzip, deflate, br, zstd';
/** The Accept-Encoding Node's fetch sends: the edge answers gzip. */
export const NODE_ACCEPT_ENCODING = 'gzip, deflate';

/**
 * A fetch that reads the whole body before answering, so the time until it resolves is the
 * server's work plus the transfer; the client's parse and apply come after.
 */
function meteredFetch(server: BenchServer, meter: HttpMeter, acceptEncoding: string, latencyMs: number): typeof fetch {
  return async (input, init) => {
    const start = nowMs();
    meter.start();
    // A link's round trip, before the request leaves: timers, so the client's thread stays free.
    if (latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, latencyMs));
    // Node's fetch asks for gzip and deflate only (though it decodes brotli); browsers ask for brotli too.
    const headers = new Headers(init?.headers);
    headers.set('accept-encoding', acceptEncoding);
    let res: Response;
    let body: ArrayBuffer;
    try {
      res = await fetch(input, { ...init, headers });
      body = await res.arrayBuffer();
    } catch (error) {
      meter.record('(failed)', nowMs() - start);
      throw error;
    }
    const url = new URL(input instanceof Request ? input.url : String(input));
    const route = routeOf(init?.method ?? 'GET', url.pathname);
    // The gateway answers with a Content-Length: the bytes on the wire, before fetch decodes them.
    meter.record(route, nowMs() - start, Number(res.headers.get('content-length') ?? body.byteLength), body.byteLength);
    const roundTrips = Number(res.headers.get(ROUND_TRIPS_HEADER) ?? NaN);
    if (Number.isFinite(roundTrips)) server.roundTrips.record(route, roundTrips);
    return new Response(res.status === 204 ? null : body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * A fresh device: an empty in-memory database with the notes table and the client opened on it.
 * With `timings`, every statement the client runs is timed (profile-client.ts); it asks for the
 * codings `acceptEncoding` names (BROWSER_ACCEPT_ENCODING unless set: brotli and gzip, as
 * chromium asks; NODE_ACCEPT_ENCODING is what Node's fetch asks, gzip; `identity` asks for
 * uncompressed answers); with `latencyMs`, every request waits
 * that long before it leaves (a link's round trip, added once per request).
 */
export async function openBenchDevice(server: BenchServer, userId: string, timings?: SqlTimings,
  options: { acceptEncoding?: string; latencyMs?: number; config?: Partial<ClientConfig> } = {}): Promise<BenchDevice> {
  const token = new SignJWT({ sub: userId }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('2h').sign(new TextEncoder().encode(BENCH_JWT_SECRET));
  const raw = await openNodeSqlite();
  const db = timings ? timedDb(raw, timings) : raw;
  await db.exec(CLIENT_NOTES_SQL);
  const http = new HttpMeter();
  const client = await openClient({
    baseUrl: server.url,
    getToken: () => token,
    db,
    tables: [{ schema: 'bench', table: 'notes' }],
    retry: NO_RETRY,
    fetch: meteredFetch(server, http, options.acceptEncoding ?? BROWSER_ACCEPT_ENCODING, options.latencyMs ?? 0),
    ...options.config,
  });
  http.reset();
  return { client, db, http, close: () => client.close() };
}

/** An empty in-memory database with the notes table, for the baseline. */
export async function openBaselineDb(): Promise<SqliteDb> {
  const db = await openNodeSqlite();
  await db.exec(CLIENT_NOTES_SQL);
  return db;
}

/** A note as the client's SQLite values. */
export function noteValues(n: Note): SqlValue[] {
  return [n.id, n.title, n.body, n.position, n.done ? 1 : 0, n.updated_at];
}

export const INSERT_NOTE_HEAD = 'INSERT INTO notes (id, title, body, position, done, updated_at)';
export const NOTE_TUPLE = '(?, ?, ?, ?, ?, ?)';
export const INSERT_NOTE = `${INSERT_NOTE_HEAD} VALUES ${NOTE_TUPLE}`;

/**
 * Baseline: the rows straight into wa-sqlite, one transaction, as fast as the client itself can
 * write them: many rows a statement (client-web/sqlite/insert-values.ts), as the client's apply does.
 */
export async function directInsert(db: SqliteDb, notes: readonly Note[]): Promise<void> {
  await db.transaction((tx) => insertValues(tx, INSERT_NOTE_HEAD, NOTE_TUPLE, notes.map(noteValues)));
}

/** Local writes as an application makes them: one prepared INSERT run per row, one transaction (capture triggers fire). */
export async function localWrite(db: SqliteDb, notes: readonly Note[]): Promise<void> {
  await db.transaction((tx) => tx.runMany(INSERT_NOTE, notes.map(noteValues)));
}

/**
 * A fingerprint of the local notes (count, sums of position, done and text lengths), so a check
 * catches rows that arrived with the wrong values, not only missing rows.
 */
export async function clientFingerprint(db: SqliteDb): Promise<string> {
  const [row] = await db.query('SELECT count(*) AS n, sum(position) AS p, sum(done) AS d, sum(length(title) + length(body)) AS t FROM notes');
  return [row?.['n'], row?.['p'], row?.['d'], row?.['t']].map((v) => String(v ?? 0)).join('/');
}

/** The same fingerprint from the source rows (ASCII text, so lengths agree). */
export function notesFingerprint(notes: readonly Note[]): string {
  let position = 0;
  let done = 0;
  let text = 0;
  for (const n of notes) {
    position += n.position;
    done += n.done ? 1 : 0;
    text += n.title.length + n.body.length;
  }
  return [notes.length, position, done, text].join('/');
}
