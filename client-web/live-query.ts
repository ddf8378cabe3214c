/**
 * Live queries (docs/protocol.md has nothing to say: they are local): a query that runs once and
 * again whenever a table it reads changed, handing the listener rows with stable identity.
 *
 *   commit of a transaction ──tables written──▶ hub ──reads one of them?──▶ query re-runs
 *                                                                             │ (a change during a
 *                                                                             │  run: one more run)
 *                                         listener ◀── only when rows differ ─┘
 *
 * - Which tables a query reads comes from SQLite (the port's `tablesRead`, its authorizer), never
 *   from parsing SQL; which tables a transaction wrote comes from the port's `onCommit`. So a query
 *   re-runs once per committed transaction that touched it — a pull page, a replay, the final apply
 *   of a 20,000-row hydration, an app write — and never for a snapshot page being staged.
 * - Rows keep their identity: a row whose values did not change is the same object as in the
 *   previous result (matched by content, so no key is needed), and a result with nothing changed
 *   is not delivered at all. React skips what did not change.
 * - `complete`: the device has reached the server's frozen ceiling once for the attached user
 *   (client-web/state.ts records it), so the rows are the server's as of then, not a partial copy.
 *
 * The hub runs on whatever answers queries and reports commits: the client itself (Node, or the
 * sync worker), or a tab's proxy of the worker, whose commits the owning tab broadcasts. A source
 * may watch the hub's queries (`watchQuery`): the worker that owns the database reads its tab's
 * right behind each commit and hands the rows over with the commit's tables, so a re-run there
 * costs no round trip (client-web/live-prefetch.ts).
 */
import { type SqlRow, type SqlValue } from './sqlite/port.js';

/**
 * The rows of a watched query (LiveSource.watchQuery) as the database's owner read them right
 * after a commit, before it announced the commit: `reads`, the tables it reads, when the owner
 * asked for them again (the schema changed, or it never had).
 */
export interface PrefetchedRows {
  readonly id: number;
  readonly rows: SqlRow[];
  readonly reads?: readonly string[];
}

/** What live queries run on: the database, or a tab's proxy of it. */
export interface LiveSource {
  query(sql: string, params: readonly SqlValue[]): Promise<SqlRow[]>;
  tablesRead(sql: string): Promise<string[]>;
  /**
   * Subscribes to the tables each committed transaction wrote; answers the unsubscribe. A source
   * that watches queries (below) hands over, with the tables, the rows of those it ran again.
   */
  onTablesChanged(listener: (tables: ReadonlySet<string>, prefetched?: readonly PrefetchedRows[]) => void): () => void;
  /**
   * Optional: the source runs this query itself right after every commit that wrote a table it
   * reads, and hands its rows over with the commit's tables, so a re-run costs no round trip (a
   * tab's proxy of the sync worker: client-web/live-prefetch.ts). A query it hands nothing for is
   * re-run as usual, so a source may stop (another tab owns the database) at any time.
   */
  watchQuery?(id: number, sql: string, params: readonly SqlValue[]): void;
  unwatchQuery?(id: number): void;
}

/** One delivery of a live query. Every field is replaced, never mutated. */
export interface LiveQueryResult<T> {
  /** The rows of the last successful run (empty before the first); unchanged rows keep their objects. */
  readonly rows: readonly T[];
  /** True until the first run has answered (rows or an error). */
  readonly loading: boolean;
  /** The failure of the last run, or null; the rows of the run before stay. */
  readonly error: Error | null;
  /** The device has reached the server's frozen ceiling once for the attached user. */
  readonly complete: boolean;
}

/** A running live query. */
export interface LiveQuery<T> {
  /** The latest result (the same object until something changes). */
  readonly result: LiveQueryResult<T>;
  /** Adds a listener of later results; answers its removal. */
  subscribe(listener: (result: LiveQueryResult<T>) => void): () => void;
  /** Runs the query again now (e.g. after a change the database could not report). */
  refresh(): void;
  /** Stops re-running; no listener is called afterwards. */
  close(): void;
}

/**
 * Whether the attached user's data reached the server's frozen ceiling once. Written only by
 * state.ts; read here as a query like any other, so it re-runs when that table changes.
 */
const COMPLETE_SQL =
  'SELECT EXISTS (SELECT 1 FROM _sync_reached_ceiling r JOIN _sync_attachment_state a ON a.user_id = r.user_id) AS complete';

/** Tables whose change may change the set of tables a query reads (a view or table redefined). */
const SCHEMA_TABLES = new Set(['sqlite_master', 'sqlite_schema', 'sqlite_temp_master']);

/** Whether a commit that wrote `tables` may have changed which tables a query reads. */
export function writesSchema(tables: ReadonlySet<string>): boolean {
  for (const t of tables) if (SCHEMA_TABLES.has(t)) return true;
  return false;
}

/** The id the hub watches COMPLETE_SQL under; its queries count from 1. */
const COMPLETE_ID = 0;

const EMPTY: readonly never[] = Object.freeze([]);

/**
 * The identity of a row's content: equal strings for rows whose values are equal, of the same
 * types, column by column (a text '1' and an integer 1 differ). Strings and blobs carry their
 * length, so no separator is ambiguous.
 */
export function rowContentKey(row: Readonly<Record<string, unknown>>): string {
  let key = '';
  for (const column in row) {
    const v = row[column];
    if (v === null || v === undefined) key += 'N';
    else if (typeof v === 'number') key += `n${Object.is(v, -0) ? '-0' : v};`;
    else if (typeof v === 'string') key += `s${v.length}:${v}`;
    else if (typeof v === 'bigint') key += `b${v};`;
    else if (v instanceof Uint8Array) key += `x${v.length}:${bytesText(v)}`;
    else key += `j${JSON.stringify(v)};`;
  }
  return key;
}

function bytesText(bytes: Uint8Array): string {
  let text = '';
  // In slices: String.fromCharCode takes its arguments on the stack.
  for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode(...bytes.subarray(i, i + 8192));
  return text;
}

/**
 * The rows of a new run, with every row equal to one of the previous run's replaced by that
 * object (duplicates matched one to one). Answers the previous array itself when nothing changed.
 * A row equal to the previous run's row at its own position takes that one at once; only the rest
 * are matched through a pool of the previous rows left over, so a run where one row of 10,000
 * changed builds a pool of one instead of 10,000 (the common case of a live query).
 */
export function reuseRows<T extends object>(previous: readonly T[], keys: WeakMap<object, string>, next: readonly T[]): readonly T[] {
  let changed = previous.length !== next.length;
  const out = new Array<T>(next.length);
  const taken = new Uint8Array(previous.length);
  const rest: number[] = [];
  const restKeys: string[] = [];
  for (let i = 0; i < next.length; i++) {
    const row = next[i] as T;
    const key = rowContentKey(row as Record<string, unknown>);
    if (i < previous.length && keys.get(previous[i] as T) === key) {
      out[i] = previous[i] as T;
      taken[i] = 1;
    } else {
      rest.push(i);
      restKeys.push(key);
    }
  }
  if (rest.length > 0) {
    changed = true;
    const pool = new Map<string, T[]>();
    for (let k = 0; k < previous.length; k++) {
      if (taken[k]) continue;
      const row = previous[k] as T;
      const key = keys.get(row) as string;
      const same = pool.get(key);
      if (same) same.push(row);
      else pool.set(key, [row]);
    }
    for (let r = 0; r < rest.length; r++) {
      const i = rest[r] as number;
      const key = restKeys[r] as string;
      const same = pool.get(key);
      const kept = same && same.length > 0 ? (same.shift() as T) : undefined;
      if (kept) out[i] = kept;
      else {
        const row = next[i] as T;
        keys.set(row, key);
        out[i] = row;
      }
    }
  }
  return changed ? out : previous;
}

/** What the hub needs of each of its queries. */
interface Member {
  readonly id: number;
  readonly reads: ReadonlySet<string> | null;
  readonly failing: boolean;
  refresh(): void;
  close(): void;
  schemaChanged(): void;
  setComplete(complete: boolean): void;
  prefetched(rows: readonly SqlRow[], reads: readonly string[] | undefined): void;
}

/** One live query on the hub. */
class Query<T extends SqlRow> implements LiveQuery<T>, Member {
  result: LiveQueryResult<T>;
  reads: ReadonlySet<string> | null = null;
  private readonly listeners = new Set<(result: LiveQueryResult<T>) => void>();
  private readonly keys = new WeakMap<object, string>();
  private running = false;
  private again = false;
  private rereadTables = true;
  closed = false;

  constructor(private readonly hub: LiveQueries, readonly id: number, readonly sql: string, readonly params: readonly SqlValue[]) {
    this.result = { rows: EMPTY, loading: true, error: null, complete: hub.complete };
  }

  /**
   * Rows the source read right after a commit (LiveSource.watchQuery), delivered as a run's. A run
   * in flight may answer rows older than these, so then it is followed by one more run instead.
   */
  prefetched(rows: readonly SqlRow[], reads: readonly string[] | undefined): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (reads) {
      this.reads = new Set(reads);
      this.rereadTables = false;
    }
    this.deliver({ rows: reuseRows(this.result.rows, this.keys, rows as T[]), loading: false, error: null });
  }

  subscribe(listener: (result: LiveQueryResult<T>) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  refresh(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.runUntilQuiet();
  }

  /** The schema changed: the tables this query reads are asked for again on its next run. */
  schemaChanged(): void {
    this.rereadTables = true;
  }

  /** The last run failed (a table missing, a view redefined): any schema change may cure it. */
  get failing(): boolean {
    return this.result.error !== null;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    this.hub.forget(this);
  }

  setComplete(complete: boolean): void {
    this.deliver({ complete });
  }

  /** Delivers `changes` when they change the result. */
  private deliver(changes: Partial<LiveQueryResult<T>>): void {
    const next = { ...this.result, ...changes };
    if (next.rows === this.result.rows && next.loading === this.result.loading && next.error === this.result.error && next.complete === this.result.complete) return;
    this.result = next;
    for (const listener of [...this.listeners]) listener(next);
  }

  private async runUntilQuiet(): Promise<void> {
    do {
      this.again = false;
      await this.runOnce();
    } while (this.again && !this.closed);
    this.running = false;
  }

  private async runOnce(): Promise<void> {
    try {
      // The tables it reads are asked for with the rows, not before them: both go to the source
      // at once (a tab's proxy posts both to the worker, which answers them in order), so a re-run
      // after a schema change (the first pull apply of a connection creates its scratch table) waits one round trip.
      let reads: Promise<string[]> | undefined;
      if (this.rereadTables) {
        this.rereadTables = false;
        reads = this.hub.source.tablesRead(this.sql);
        // Its failure is the run's (below); not a rejection left unhandled if the query fails first.
        reads.catch(() => undefined);
      }
      const rows = (await this.hub.source.query(this.sql, this.params)) as T[];
      if (reads) this.reads = new Set(await reads);
      if (this.closed) return;
      this.deliver({ rows: reuseRows(this.result.rows, this.keys, rows), loading: false, error: null });
    } catch (error) {
      if (this.closed) return;
      // The tables are asked for again next time: the failure may have been a missing table.
      this.rereadTables = true;
      this.deliver({ loading: false, error: error instanceof Error ? error : new Error(String(error)) });
    }
  }
}

/**
 * The live queries of one database: one subscription to its commits, dispatched to the queries
 * that read a written table.
 */
export class LiveQueries {
  private readonly queries = new Set<Member>();
  private unsubscribe: (() => void) | null = null;
  private completeReads: ReadonlySet<string> | null = null;
  private completeRunning = false;
  private completeAgain = false;
  private nextId = COMPLETE_ID + 1;
  /** Whether the attached user's data reached the server's frozen ceiling once (see COMPLETE_SQL). */
  complete = false;

  constructor(readonly source: LiveSource) {}

  /** Starts a live query: it runs now, and again after every commit that wrote a table it reads. */
  liveQuery<T extends SqlRow = SqlRow>(sql: string, params: readonly SqlValue[] = [], listener?: (result: LiveQueryResult<T>) => void): LiveQuery<T> {
    const query = new Query<T>(this, this.nextId++, sql, [...params]);
    if (listener) query.subscribe(listener);
    this.queries.add(query);
    if (!this.unsubscribe) {
      this.unsubscribe = this.source.onTablesChanged((tables, prefetched) => this.changed(tables, prefetched));
      this.source.watchQuery?.(COMPLETE_ID, COMPLETE_SQL, []);
      this.refreshComplete();
    }
    this.source.watchQuery?.(query.id, query.sql, query.params);
    query.refresh();
    return query;
  }

  /** Runs every live query again (the database changed in a way commits could not tell: another tab took over). */
  refreshAll(): void {
    this.refreshComplete();
    for (const query of this.queries) query.refresh();
  }

  /** Closes every live query (the database closes). */
  closeAll(): void {
    for (const query of [...this.queries]) query.close();
  }

  /** A query closed; the last one ends the subscription. */
  forget(query: Member): void {
    this.queries.delete(query);
    this.source.unwatchQuery?.(query.id);
    if (this.queries.size === 0 && this.unsubscribe) {
      this.unsubscribe();
      this.unsubscribe = null;
      this.source.unwatchQuery?.(COMPLETE_ID);
    }
  }

  private changed(tables: ReadonlySet<string>, prefetched: readonly PrefetchedRows[] = []): void {
    const schema = writesSchema(tables);
    const rows = new Map(prefetched.map((p) => [p.id, p]));
    const complete = rows.get(COMPLETE_ID);
    if (complete) this.prefetchedComplete(complete.rows);
    else if (this.completeReads === null || intersects(this.completeReads, tables)) this.refreshComplete();
    for (const query of this.queries) {
      const ready = rows.get(query.id);
      if (ready) {
        query.prefetched(ready.rows, ready.reads);
        continue;
      }
      // A table or view it reads was created, dropped or redefined (its name is among the written
      // ones then), or the query failed and the new schema may cure it.
      const touched = query.reads === null || intersects(query.reads, tables);
      if (schema && (touched || query.failing)) query.schemaChanged();
      if (touched || (schema && query.failing)) query.refresh();
    }
  }

  private setComplete(complete: boolean): void {
    if (complete === this.complete) return;
    this.complete = complete;
    for (const query of this.queries) query.setComplete(complete);
  }

  /** COMPLETE_SQL's row read by the source after a commit; a run in flight is followed by one more. */
  private prefetchedComplete(rows: readonly SqlRow[]): void {
    if (this.completeRunning) {
      this.completeAgain = true;
      return;
    }
    this.setComplete(Number(rows[0]?.['complete'] ?? 0) === 1);
  }

  private refreshComplete(): void {
    if (this.completeRunning) {
      this.completeAgain = true;
      return;
    }
    this.completeRunning = true;
    void (async () => {
      do {
        this.completeAgain = false;
        try {
          this.completeReads ??= new Set(await this.source.tablesRead(COMPLETE_SQL));
          const [row] = await this.source.query(COMPLETE_SQL, []);
          this.setComplete(Number(row?.['complete'] ?? 0) === 1);
        } catch {
          // The client's own tables are missing only before it was opened once; nothing to say then.
        }
      } while (this.completeAgain);
      this.completeRunning = false;
    })();
  }
}

export function intersects(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  for (const x of b) if (a.has(x)) return true;
  return false;
}
