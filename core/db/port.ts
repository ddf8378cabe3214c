/**
 * The narrow database port the core depends on. Both `pg`'s Pool and
 * `@neondatabase/serverless`'s Pool satisfy `PoolLike`, so the same core runs in Lambda over
 * Neon's pooler and locally over `pg`.
 *
 * Pool safety (docs/protocol.md §1): nothing here keeps session state. Transactions set their timeouts
 * with `set_config(..., true)` (transaction-local), and the hot endpoints are single statements
 * that call managed functions, so a transaction pooler may hand every statement to another
 * backend.
 */
import { type SqlFragment } from './sql.js';

export interface QueryResultLike {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

export interface QueryClientLike {
  query(text: string, values?: unknown[]): Promise<QueryResultLike | QueryResultLike[]>;
}

export interface PoolClientLike extends QueryClientLike {
  release(destroy?: Error | boolean): void;
}

export interface PoolLike extends QueryClientLike {
  connect(): Promise<PoolClientLike>;
  end(): Promise<void>;
}

export const Isolation = {
  readCommitted: 'READ COMMITTED',
  repeatableRead: 'REPEATABLE READ',
  serializable: 'SERIALIZABLE',
} as const;
export type Isolation = (typeof Isolation)[keyof typeof Isolation];

export interface TxOptions {
  readonly isolation?: Isolation;
  readonly readOnly?: boolean;
  readonly statementTimeoutMs?: number;
  readonly lockTimeoutMs?: number;
}

/** Counts SQL round trips of one request; tests and benchmarks read it. */
export class RoundTripCounter {
  count = 0;
}

/** Something that runs queries: the pool (autocommit statements) or one transaction. */
export interface Queryable {
  readonly roundTrips: RoundTripCounter;
  query<R = Record<string, unknown>>(fragment: SqlFragment): Promise<R[]>;
  /** Runs trusted multi-statement text with the simple protocol (no parameters). */
  simple(text: string): Promise<void>;
}

function lastResult(result: QueryResultLike | QueryResultLike[]): QueryResultLike {
  return Array.isArray(result) ? (result[result.length - 1] ?? { rows: [], rowCount: 0 }) : result;
}

class ClientQueryable implements Queryable {
  constructor(
    private readonly client: QueryClientLike,
    readonly roundTrips: RoundTripCounter,
  ) {}

  async query<R>(fragment: SqlFragment): Promise<R[]> {
    const { text, values } = fragment.toQuery();
    this.roundTrips.count++;
    return lastResult(await this.client.query(text, values)).rows as R[];
  }

  async simple(text: string): Promise<void> {
    this.roundTrips.count++;
    await this.client.query(text);
  }
}

/**
 * A request's view of the database: the shared pool plus this request's round-trip counter.
 * Create one per request with `Db.forRequest`.
 */
export class Db implements Queryable {
  private readonly direct: ClientQueryable;

  constructor(
    readonly pool: PoolLike,
    readonly defaults: { statementTimeoutMs: number; lockTimeoutMs: number },
    readonly roundTrips: RoundTripCounter = new RoundTripCounter(),
  ) {
    this.direct = new ClientQueryable(pool, roundTrips);
  }

  /** A view that shares the pool but counts round trips on its own. */
  forRequest(): Db {
    return new Db(this.pool, this.defaults, new RoundTripCounter());
  }

  query<R = Record<string, unknown>>(fragment: SqlFragment): Promise<R[]> {
    return this.direct.query<R>(fragment);
  }

  simple(text: string): Promise<void> {
    return this.direct.simple(text);
  }

  /**
   * Runs `fn` in one transaction on one pooled connection. BEGIN and the transaction-local
   * timeouts go out as a single simple-protocol message, so a transaction costs two round trips
   * more than its statements (BEGIN…, COMMIT).
   */
  async runTx<T>(fn: (tx: Queryable) => Promise<T>, options: TxOptions = {}): Promise<T> {
    const client = await this.pool.connect();
    const tx = new ClientQueryable(client, this.roundTrips);
    const isolation = options.isolation ?? Isolation.readCommitted;
    const mode = options.readOnly ? ' READ ONLY' : '';
    const statementMs = Math.trunc(options.statementTimeoutMs ?? this.defaults.statementTimeoutMs);
    const lockMs = Math.trunc(options.lockTimeoutMs ?? this.defaults.lockTimeoutMs);
    let broken: Error | undefined;
    try {
      await tx.simple(
        `BEGIN ISOLATION LEVEL ${isolation}${mode}; ` +
          `SELECT set_config('statement_timeout', '${statementMs}', true), set_config('lock_timeout', '${lockMs}', true)`,
      );
      const result = await fn(tx);
      await tx.simple('COMMIT');
      return result;
    } catch (error) {
      try {
        await tx.simple('ROLLBACK');
      } catch (rollbackError) {
        // The connection itself is gone; do not hand it back to the pool.
        broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
      }
      throw error;
    } finally {
      client.release(broken ?? false);
    }
  }
}
