/**
 * Per-container state: configuration, one bounded pool, and the cached catalog. Nothing about a
 * request lives here; Lambda reuses it across warm invocations.
 */
import { loadConfig, type Config } from '../../core/config.js';
import { ANONYMOUS_OWNER, Db, PoolShare, type PoolLike, type Queryable } from '../../core/db/index.js';
import { type DatabaseSecret } from '../../core/db/secret.js';
import { noteDatabaseError, openDatabase } from './database.js';
import { loadCatalog, PendingCounters, THIS_BUILD, type BuildRange, type Catalog } from '../../core/sync/index.js';
import { readCatalogStamp, stampMatches } from '../../core/sync/catalog/stamp.js';
import { type CommitFeed } from '../../core/sync/notify/commit-feed.js';
import { type CommitNotifier } from '../../core/sync/notify/connections.js';
import { setLogSink } from '../../core/log.js';
import { consoleTelemetry, powertoolsTelemetry, type Telemetry } from './telemetry.js';
import { lambdaCredentials, managementApiNotifier, type NotifyOutcome } from './ws-notifier.js';

export interface Runtime {
  readonly config: Config;
  /**
   * The container's database handle; `forRequest()` gives each request its own counter, owner
   * (the user whose share of the pool it uses) and deadline.
   */
  readonly db: Db;
  /**
   * The registered-table catalog and layout check, loaded on first use and again after
   * `catalogRefreshSeconds`, so a container notices an upgrade or drift without a round trip per
   * request; a failed load is retried by the next request.
   */
  catalog(via?: Queryable): Promise<Catalog>;
  /** Forgets the cached catalog (a request met drift); the next request reloads it. */
  invalidateCatalog(): void;
  /**
   * Reads the database's catalog stamp (one cheap statement) and forgets a cached catalog that no
   * longer matches it; true when it did (the next `catalog()` loads the new one). For a request
   * that must not be answered from a stale catalog: capabilities asked with `no-cache`, a pushed
   * row naming a column this catalog does not know. Free of statements when nothing is cached.
   */
  refreshCatalog(via?: Queryable): Promise<boolean>;
  /** Counts this container saw while the database was unreachable, recorded by a later request. */
  readonly pending: PendingCounters;
  /** A request failed with this error: credentials that stopped working are read again and reported. */
  noteError(error: unknown): void;
  /** A long-running process's commit feed (one LISTEN connection); absent in Lambda. */
  readonly feed: CommitFeed | undefined;
  /** Posts a user's commits to their WebSocket connections (AWS); absent locally, where the feed does it. */
  readonly notifier: CommitNotifier | undefined;
  /** Logs and metrics: Powertools in Lambda, the console elsewhere. */
  readonly telemetry: Telemetry;
  /**
   * Runs `run` once for all callers of `key` while it is in flight, so a flood of unauthenticated
   * reads (status, health) costs the database one query at a time, whoever asks.
   */
  shared<T>(key: string, run: () => Promise<T>): Promise<T>;
}

/** What a runtime may be given besides its pool. */
export interface RuntimeServices {
  readonly feed?: CommitFeed | undefined;
  readonly notifier?: CommitNotifier | undefined;
  /** The Secrets Manager source of the credentials, when they come from one. */
  readonly secret?: DatabaseSecret | undefined;
  readonly telemetry?: Telemetry | undefined;
}

/**
 * `build` is the layout range this runtime serves: this build's, unless a test stands in for an
 * older or newer one (the rolling-deploy tests).
 */
export function createRuntime(config: Config, pool: PoolLike, build: BuildRange = THIS_BUILD, services: RuntimeServices = {}): Runtime {
  const { limits } = config;
  // Each user may hold this many of the container's connections at once (at least one), fewer
  // while other users are active (core/db/fair-share.ts); the unauthenticated routes share one.
  const share = new PoolShare(Math.max(1, Math.floor((config.dbPoolMax * limits.poolSharePerUserPercent) / 100)), config.dbPoolMax,
    new Map([[ANONYMOUS_OWNER, limits.anonymousConnectionsMax]]));
  const db = new Db(pool, {
    statementTimeoutMs: limits.statementTimeoutMs,
    lockTimeoutMs: limits.lockTimeoutMs,
    idleInTransactionTimeoutMs: limits.idleInTransactionTimeoutMs,
    queryTimeoutMs: limits.queryTimeoutMs,
    connectTimeoutMs: limits.dbConnectTimeoutMs,
  }, undefined, share);
  let cached: Promise<Catalog> | undefined;
  let loadedAt = 0;
  const inFlight = new Map<string, Promise<unknown>>();
  // Bootstrap committed a change (the local runtime's LISTEN connection hears it): reload first.
  services.feed?.onLayout(() => {
    cached = undefined;
  });
  return {
    shared<T>(key: string, run: () => Promise<T>): Promise<T> {
      const running = inFlight.get(key);
      if (running) return running as Promise<T>;
      const started = run().finally(() => inFlight.delete(key));
      inFlight.set(key, started);
      return started;
    },
    config,
    db,
    pending: new PendingCounters(),
    feed: services.feed,
    notifier: services.notifier,
    telemetry: services.telemetry ?? consoleTelemetry,
    catalog(via: Queryable = db) {
      if (cached && Date.now() - loadedAt > config.limits.catalogRefreshSeconds * 1000) cached = undefined;
      if (!cached) {
        loadedAt = Date.now();
        cached = loadCatalog(via, build).catch((error: unknown) => {
          cached = undefined;
          throw error;
        });
      }
      return cached;
    },
    invalidateCatalog() {
      cached = undefined;
    },
    async refreshCatalog(via: Queryable = db) {
      const held = cached;
      const current = held ? await held.catch(() => undefined) : undefined;
      if (!current) return false;
      if (stampMatches(current, await readCatalogStamp(via))) return false;
      if (cached === held) cached = undefined;
      return true;
    },
    noteError(error) {
      noteDatabaseError(error, services.secret);
    },
  };
}

/**
 * What became of a commit's notifications: a failed post (the management API refused it, 403 for
 * a role without the permission; timed out; unreachable from the VPC) is a warning with the
 * statuses and a `NotificationFailures` count, which the template's alarm watches; the rest is a
 * debug line.
 */
export function reportNotifications(telemetry: Telemetry, outcome: NotifyOutcome): void {
  const fields = { user_id: outcome.userId, posted: outcome.posted, gone: outcome.gone, failed: outcome.failed, statuses: outcome.statuses };
  if (outcome.failed === 0) return telemetry.log('debug', 'notified', fields);
  telemetry.count('NotificationFailures', outcome.failed);
  telemetry.log('warn', 'notification_failed', fields);
}

let fromEnv: Promise<Runtime> | undefined;

/** The runtime Lambda handlers use: configuration from the environment, created on first use. */
export function runtimeFromEnv(): Promise<Runtime> {
  fromEnv ??= (async () => {
    // Every line from here on, the core's included, is structured and carries the request id.
    const telemetry = powertoolsTelemetry();
    setLogSink(telemetry.log);
    const config = loadConfig();
    const { pool, secret } = await openDatabase(config, config.dbPoolMax, process.env, () => telemetry.count('DatabaseSecretReadFailures'));
    // In AWS the WebSocket API's management endpoint, when deployed, gets every commit's notice.
    const notifier = config.wsEndpoint
      ? managementApiNotifier({
          endpoint: config.wsEndpoint,
          region: config.awsRegion ?? 'us-east-1',
          credentials: () => lambdaCredentials(),
          timeoutMs: config.limits.notifyTimeoutMs,
          onOutcome: (outcome) => reportNotifications(telemetry, outcome),
        })
      : undefined;
    return createRuntime(config, pool, THIS_BUILD, { secret, notifier, telemetry });
  })().catch((error: unknown) => {
    fromEnv = undefined;
    throw error;
  });
  return fromEnv;
}
