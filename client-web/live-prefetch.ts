/**
 * The owner's half of a tab's live queries (client-web/live-query.ts): the sync worker that holds
 * the database runs its tab's watched queries right after every commit that wrote a table they
 * read, and sends their rows with the commit's tables in one message.
 *
 *   commit in the worker ──▶ watched queries that read a written table run (queued right behind
 *                            the commit, ahead of the sync loop's next statements)
 *                        ──▶ one message to the tab: tables + rows ──▶ the tab's hub delivers
 *
 * Without it a re-run is a round trip per query, asked for only once the tab heard of the commit,
 * and served after whatever the worker queued meanwhile (the rest of a pull): most of the time
 * between a commit and the rows on screen. Nothing here is needed for correctness: a query whose
 * rows are not handed over (it failed here, or this worker does not own the database) is re-run by
 * the tab as before.
 */
import { intersects, writesSchema, type PrefetchedRows } from './live-query.js';
import { type SqlValue, type SqliteDb } from './sqlite/port.js';

interface Watched {
  readonly sql: string;
  readonly params: readonly SqlValue[];
  /** The tables it reads, as last asked; null until then, or after a failure. */
  reads: ReadonlySet<string> | null;
}

/** Hears of commits in their order: the tables they wrote, and the rows read after them. */
export type Announce = (tables: ReadonlySet<string>, prefetched: PrefetchedRows[]) => void;

export class LivePrefetch {
  private readonly watched = new Map<number, Watched>();
  private reading = false;
  /** Tables written by commits made while a read was out, announced together after it. */
  private waiting: Set<string> | null = null;

  watch(id: number, sql: string, params: readonly SqlValue[]): void {
    this.watched.set(id, { sql, params, reads: null });
  }

  unwatch(id: number): void {
    this.watched.delete(id);
  }

  /**
   * Call from the commit listener: the watched queries that may read a written table are read at
   * once (queued right behind the commit, so they see it), then the commit is announced with their
   * rows. Commits made while a read is out wait for it and are announced together, with one read
   * made after it (a burst of writes costs a read or two, not one per write); their tables and
   * rows are then announced a little later, never out of order.
   */
  committed(db: Pick<SqliteDb, 'query' | 'tablesRead'>, tables: ReadonlySet<string>, announce: Announce): void {
    if (this.reading) {
      this.waiting ??= new Set();
      for (const t of tables) this.waiting.add(t);
      return;
    }
    this.reading = true;
    // Whatever fails, the commit is announced (without rows the tab re-runs its queries itself),
    // and the commits that waited are announced after it: a read left hanging would silence them.
    void this.afterCommit(db, tables).catch(() => []).then((prefetched) => {
      this.reading = false;
      const next = this.waiting;
      this.waiting = null;
      try {
        announce(tables, prefetched);
      } catch (error) {
        console.error('lockstep: announcing a commit to the tab failed', error);
      }
      if (next) this.committed(db, next, announce);
    });
  }

  /** The rows of every watched query that may read one of `tables`, read now (none fails: a failed read is left out). */
  private async afterCommit(db: Pick<SqliteDb, 'query' | 'tablesRead'>, tables: ReadonlySet<string>): Promise<PrefetchedRows[]> {
    const schema = writesSchema(tables);
    const runs: Promise<PrefetchedRows | null>[] = [];
    for (const [id, watched] of this.watched) {
      if (watched.reads !== null && !intersects(watched.reads, tables)) continue;
      const reread = watched.reads === null || schema;
      runs.push(
        (async () => {
          try {
            // Asked together with the rows, as the tab's own runs do (a schema change redefines them).
            const [tablesNow, rowsNow] = await Promise.all([reread ? db.tablesRead(watched.sql) : null, db.query(watched.sql, watched.params)]);
            if (tablesNow) watched.reads = new Set(tablesNow);
            return { id, rows: rowsNow, ...(tablesNow ? { reads: tablesNow } : {}) };
          } catch {
            // The tab's own run reports the failure; the tables are asked for again next time.
            watched.reads = null;
            return null;
          }
        })(),
      );
    }
    return (await Promise.all(runs)).filter((r): r is PrefetchedRows => r !== null);
  }
}
