/**
 * The narrow database port the core depends on. Both `pg`'s Pool and
 * `@neondatabase/serverless`'s Pool satisfy `PoolLike`, so the same core runs in Lambda over
 * Neon's pooler and locally over `pg`.
 *
 * Pool safety (docs/protocol.md §1): nothing here keeps session state. Transactions set their timeouts
 * with `set_config(..., true)` (transaction-local), and the hot endpoints are single statements
 * that call managed functions, so a transaction pooler may hand every statement to another
 * backend.
 *
 * Time (issue 17 item 3): every wait a request makes here is bounded on the client too, by
 * `queryTimeoutMs` and by the request's deadline (the function's remaining time), because a
 * connection that silently stops answering raises no error the server or the socket would see.
 * The server's own bounds (statement and lock timeouts, installed by bootstrap) fire first; these
 * catch what they cannot, and always before the function itself is killed.
 */
import { type SqlFragment } from './sql.js';
import { type PoolShare } from './fair-share.js';

export interface QueryResultLike {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

export interface QueryClientLike {
  query(text: string, values?: unknown[]): Promise<QueryResultLike | QueryResultLike[]>;
}

export interface PoolClientLike extends QueryClientLike {
  release(destroy?: Error | boolean): void;
  /** Both drivers' clients are event emitters: a dead socket is also an 'error' event. */
  on(event: 'error', listener: (error: Error) => void): unknown;
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
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
  /** 0: no server-side statement timeout (bootstrap's adoption of large tables). */
  readonly statementTimeoutMs?: number;
  readonly lockTimeoutMs?: number;
  /** 0: no client-side bound on each statement of this transaction (bootstrap). */
  readonly queryTimeoutMs?: number;
}

/** The bounds a Db applies; the last two are client-side and optional (tools and tests omit them). */
export interface DbBounds {
  readonly statementTimeoutMs: number;
  readonly lockTimeoutMs: number;
  /**
   * How long a transaction of this Db may sit idle (its client died or froze mid-transaction)
   * before the server ends it: set transaction-locally like the others, so the service bounds its
   * own transactions without a setting on the whole role (issue 25 item 6).
   */
  readonly idleInTransactionTimeoutMs?: number;
  /** Client-side bound of one statement: a silently dropped connection never answers. */
  readonly queryTimeoutMs?: number;
  /** Client-side bound of waiting for a connection (a free slot, or a new one). */
  readonly connectTimeoutMs?: number;
}

/** Who a request's database work is for, and until when it may run. */
export interface RequestScope {
  /** The user whose share of the pool it uses (PoolShare); none for unauthenticated routes. */
  readonly owner?: string | undefined;
  /** Epoch milliseconds after which nothing may still wait on the database. */
  readonly deadline?: number | undefined;
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

/** A wait that ran out: no SQLSTATE, so the edge answers 503 and commit reports an unknown outcome. */
function timedOut(message: string): Error {
  return Object.assign(new Error(message), { code: 'ETIMEDOUT' });
}

/**
 * A wait that ran out before anything was sent (no connection, or no time left to send): the
 * database never saw the statement, so its outcome is known — nothing happened (see neverSent).
 */
function notSent(message: string): Error {
  return Object.assign(timedOut(message), { notSent: true });
}

/** True when `error` failed a statement before it reached the database: nothing was sent. */
export function neverSent(error: unknown): boolean {
  return (error as { notSent?: unknown } | null)?.notSent === true;
}

/**
 * True when the connection cannot be trusted after this error: no SQLSTATE (a socket error, a
 * client-side timeout with the statement maybe still running), or the server ended the session.
 * An ordinary SQL error leaves the connection usable, so it goes back to the pool.
 */
function connectionBroken(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57P');
}

/** `promise`, or a rejection after `ms`; `onLate` gets the value if it arrives after that. */
function within<T>(promise: Promise<T>, ms: number, error: () => Error, onLate?: (value: T) => void): Promise<T> {
  if (!Number.isFinite(ms)) return promise;
  return new Promise<T>((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(error());
    }, Math.max(0, ms));
    promise.then(
      (value) => {
        clearTimeout(timer);
        if (late) onLate?.(value);
        else resolve(value);
      },
      (reason: unknown) => {
        clearTimeout(timer);
        if (!late) reject(reason);
      },
    );
  });
}

class ClientQueryable implements Queryable {
  /** Set when a statement ran out of time: the connection may still be busy, so it is dropped. */
  broken: Error | undefined;

  constructor(
    private readonly client: QueryClientLike,
    readonly roundTrips: RoundTripCounter,
    private readonly limitMs: () => number = () => Infinity,
  ) {}

  private run(text: string, values?: unknown[]): Promise<QueryResultLike | QueryResultLike[]> {
    if (this.broken) return Promise.reject(this.broken);
    const limit = this.limitMs();
    if (limit <= 0) return Promise.reject(notSent('the request ran out of time before the statement was sent'));
    this.roundTrips.count++;
    const sent = values === undefined ? this.client.query(text) : this.client.query(text, values);
    return within(sent, limit, () => {
      this.broken = timedOut(`the database did not answer within ${Math.round(limit)} ms`);
      return this.broken;
    });
  }

  async query<R>(fragment: SqlFragment): Promise<R[]> {
    const { text, values } = fragment.toQuery();
    return lastResult(await this.run(text, values)).rows as R[];
  }

  async simple(text: string): Promise<void> {
    await this.run(text);
  }
}

/**
 * A request's view of the database: the shared pool plus this request's round-trip counter,
 * owner and deadline. Create one per request with `Db.forRequest`.
 */
export class Db implements Queryable {
  constructor(
    readonly pool: PoolLike,
    readonly defaults: DbBounds,
    readonly roundTrips: RoundTripCounter = new RoundTripCounter(),
    readonly share?: PoolShare,
    readonly scope: RequestScope = {},
  ) {}

  /** A view that shares the pool (and its per-user shares) but counts round trips on its own. */
  forRequest(scope: RequestScope = {}): Db {
    return new Db(this.pool, this.defaults, new RoundTripCounter(), this.share, scope);
  }

  /** Milliseconds left before the request's deadline (Infinity without one). */
  private remainingMs(): number {
    return this.scope.deadline === undefined ? Infinity : this.scope.deadline - Date.now();
  }

  /** The client-side bound of the next statement: the query timeout, cut to the deadline. */
  private statementLimitMs(override?: number): number {
    const configured = override ?? this.defaults.queryTimeoutMs;
    return Math.min(configured === undefined || configured <= 0 ? Infinity : configured, this.remainingMs());
  }

  /**
   * A place in the owner's share, then a pooled connection, both within the connect bound. While
   * checked out, the connection's 'error' events (its socket died) are noted, not thrown: the
   * query in flight fails with the same error, and `giveBack` drops the connection.
   */
  private async checkout(): Promise<{ client: PoolClientLike; giveBack: (error?: Error) => void }> {
    const waitMs = Math.min(this.defaults.connectTimeoutMs ?? Infinity, this.remainingMs());
    if (waitMs <= 0) throw notSent('the request ran out of time before it reached the database');
    const started = Date.now();
    const leave = this.share && this.scope.owner !== undefined ? await this.share.acquire(this.scope.owner, Number.isFinite(waitMs) ? waitMs : 60_000) : () => {};
    let client: PoolClientLike;
    try {
      const left = waitMs - (Date.now() - started);
      client = await within(this.pool.connect(), left, () => notSent('timeout exceeded when trying to connect'), (late) => late.release());
    } catch (error) {
      leave();
      // No connection, so no statement was sent on it.
      if (error !== null && typeof error === 'object') Object.assign(error, { notSent: true });
      throw error;
    }
    let died: Error | undefined;
    const noteError = (error: Error): void => {
      died ??= error;
    };
    client.on('error', noteError);
    return {
      client,
      giveBack: (error) => {
        client.removeListener('error', noteError);
        client.release(error ?? died ?? false);
        leave();
      },
    };
  }

  /** Runs one autocommit statement (`run`) on a checked-out connection. */
  private async single<T>(run: (q: ClientQueryable) => Promise<T>): Promise<T> {
    const { client, giveBack } = await this.checkout();
    const q = new ClientQueryable(client, this.roundTrips, () => this.statementLimitMs());
    let broken: Error | undefined;
    try {
      return await run(q);
    } catch (error) {
      if (q.broken || connectionBroken(error)) broken = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      giveBack(broken);
    }
  }

  query<R = Record<string, unknown>>(fragment: SqlFragment): Promise<R[]> {
    return this.single((q) => q.query<R>(fragment));
  }

  simple(text: string): Promise<void> {
    return this.single((q) => q.simple(text));
  }

  /**
   * Runs `fn` in one transaction on one pooled connection. BEGIN and the transaction-local
   * timeouts go out as a single simple-protocol message, so a transaction costs two round trips
   * more than its statements (BEGIN…, COMMIT). The statement timeout is cut to the request's
   * deadline; a statement the client stops waiting for drops the connection (no ROLLBACK is sent
   * down a connection that does not answer; the server ends the transaction with the session).
   */
  async runTx<T>(fn: (tx: Queryable) => Promise<T>, options: TxOptions = {}): Promise<T> {
    const { client, giveBack } = await this.checkout();
    const tx = new ClientQueryable(client, this.roundTrips, () => this.statementLimitMs(options.queryTimeoutMs));
    const isolation = options.isolation ?? Isolation.readCommitted;
    const mode = options.readOnly ? ' READ ONLY' : '';
    const configured = Math.trunc(options.statementTimeoutMs ?? this.defaults.statementTimeoutMs);
    const remaining = this.remainingMs();
    const statementMs = Number.isFinite(remaining) ? Math.max(1, Math.min(configured > 0 ? configured : Infinity, Math.trunc(remaining))) : configured;
    const lockMs = Math.trunc(options.lockTimeoutMs ?? this.defaults.lockTimeoutMs);
    const idleMs = Math.trunc(this.defaults.idleInTransactionTimeoutMs ?? 0);
    let broken: Error | undefined;
    try {
      await tx.simple(
        `BEGIN ISOLATION LEVEL ${isolation}${mode}; ` +
          `SELECT set_config('statement_timeout', '${statementMs}', true), set_config('lock_timeout', '${lockMs}', true)` +
          (idleMs > 0 ? `, set_config('idle_in_transaction_session_timeout', '${idleMs}', true)` : ''),
      );
      const result = await fn(tx);
      await tx.simple('COMMIT');
      return result;
    } catch (error) {
      if (tx.broken) broken = tx.broken;
      else {
        try {
          await tx.simple('ROLLBACK');
        } catch (rollbackError) {
          // The connection itself is gone; do not hand it back to the pool.
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        }
      }
      throw error;
    } finally {
      giveBack(broken);
    }
  }
}
