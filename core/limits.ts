/**
 * Every limit the service enforces, in one place (contract §7). Units come last in each name.
 * Capabilities publish all of them under `bundle_limits`; an advertised limit that is not
 * enforced is worse than none, so each one has a test that crosses it.
 */
export interface Limits {
  readonly defaultRowsPerPushChunk: number;
  readonly maxRowsPerPushChunk: number;
  readonly maxRowsPerBundle: number;
  readonly maxBytesPerBundle: number;
  readonly maxRequestBytes: number;
  readonly maxResponseBytes: number;
  readonly defaultBundlesPerPull: number;
  readonly maxBundlesPerPull: number;
  readonly defaultRowsPerPage: number;
  readonly maxRowsPerPage: number;
  readonly pushSessionTtlSeconds: number;
  readonly snapshotSessionTtlSeconds: number;
  readonly initializationLeaseTtlSeconds: number;
  readonly retainedBundlesPerUser: number;
  readonly watchMaxWaitSeconds: number;
  readonly watchDefaultWaitSeconds: number;
  /** Pause between the point reads of one watch long poll. */
  readonly watchPollIntervalMs: number;
  /** Conflicts reported in one push_conflict answer; the client resolves them in one round. */
  readonly maxConflictsPerAnswer: number;
  /** Statement timeout applied by runTx and the managed functions' callers. */
  readonly statementTimeoutMs: number;
  /** How long a managed function waits for a row lock before giving up. */
  readonly lockTimeoutMs: number;
  /** Rows deleted per statement by maintenance, so it never holds locks for long. */
  readonly maintenanceBatchRows: number;
  /**
   * UTF-8 bytes of one sync key value. Keys live in btree indexes (staged rows, row_state, the
   * business primary key beside the scope), whose entries stop at ~2.7 kB; beyond that
   * PostgreSQL fails the statement (54000) whatever the row. 1024 leaves room for the scope.
   */
  readonly maxKeyBytes: number;
  /**
   * Nesting of one json/jsonb payload value. The canonicaliser that hashes committed rows
   * (sync.jcs) recurses once per level in plpgsql, so a deeper value would exhaust the stack
   * (54001) during commit, after staging accepted it; it is refused up front instead.
   */
  readonly maxJsonDepth: number;
  /** Row problems listed in one invalid_request answer's `details`. */
  readonly maxProblemsPerAnswer: number;
  /** `Retry-After` of a 503 that carries no more specific interval. */
  readonly unavailableRetryAfterSeconds: number;
  /** How long the runtime's pool waits for a database connection (or a free slot) before 503. */
  readonly dbConnectTimeoutMs: number;
  /** How long an idle pooled connection is kept. */
  readonly dbIdleTimeoutMs: number;
  /** How long a container trusts its cached catalog and layout check before reading them again. */
  readonly catalogRefreshSeconds: number;
  /**
   * Open WebSocket connections per user (a cap on `sync.ws_connections`); a `$connect` beyond it
   * is refused and the device falls back to long polls.
   */
  readonly maxWsConnectionsPerUser: number;
  /**
   * How long a registered connection is trusted without a `$disconnect`: API Gateway closes every
   * WebSocket connection after two hours, so an older row is a disconnect that never arrived.
   */
  readonly wsConnectionTtlSeconds: number;
  /** How long a commit's answer may wait for its notifications to be posted (AWS). */
  readonly notifyTimeoutMs: number;
}

export const defaultLimits: Limits = Object.freeze({
  defaultRowsPerPushChunk: 1000,
  maxRowsPerPushChunk: 5000,
  maxRowsPerBundle: 100_000,
  maxBytesPerBundle: 64 * 1024 * 1024,
  maxRequestBytes: 4 * 1024 * 1024,
  maxResponseBytes: 4 * 1024 * 1024,
  defaultBundlesPerPull: 100,
  maxBundlesPerPull: 1000,
  defaultRowsPerPage: 1000,
  maxRowsPerPage: 5000,
  pushSessionTtlSeconds: 900,
  snapshotSessionTtlSeconds: 900,
  initializationLeaseTtlSeconds: 900,
  retainedBundlesPerUser: 10_000,
  watchMaxWaitSeconds: 25,
  watchDefaultWaitSeconds: 20,
  watchPollIntervalMs: 250,
  maxConflictsPerAnswer: 100,
  statementTimeoutMs: 30_000,
  lockTimeoutMs: 10_000,
  maintenanceBatchRows: 5000,
  maxKeyBytes: 1024,
  maxJsonDepth: 64,
  maxProblemsPerAnswer: 20,
  unavailableRetryAfterSeconds: 1,
  dbConnectTimeoutMs: 10_000,
  dbIdleTimeoutMs: 30_000,
  catalogRefreshSeconds: 15,
  maxWsConnectionsPerUser: 32,
  wsConnectionTtlSeconds: 2 * 60 * 60,
  notifyTimeoutMs: 1000,
});

/**
 * AWS Lambda's own ceiling for a synchronous invoke: the request event and the function result are
 * each at most 6 MB (6,291,456 bytes) as serialized JSON, escaping and base64 included. Not
 * configurable: `maxRequestBytes` and `maxResponseBytes` must stay under it, and the local
 * gateway answers as API Gateway does (its own 413, not a Lockstep body) above it.
 */
export const LAMBDA_PAYLOAD_BYTES_MAX = 6 * 1024 * 1024;

/** The wire names of the limits, as capabilities' `bundle_limits` reports them. */
export function limitsToWire(limits: Limits): Record<string, number> {
  return {
    default_rows_per_push_chunk: limits.defaultRowsPerPushChunk,
    max_rows_per_push_chunk: limits.maxRowsPerPushChunk,
    max_rows_per_bundle: limits.maxRowsPerBundle,
    max_bytes_per_bundle: limits.maxBytesPerBundle,
    max_request_bytes: limits.maxRequestBytes,
    max_response_bytes: limits.maxResponseBytes,
    default_bundles_per_pull: limits.defaultBundlesPerPull,
    max_bundles_per_pull: limits.maxBundlesPerPull,
    default_rows_per_page: limits.defaultRowsPerPage,
    max_rows_per_page: limits.maxRowsPerPage,
    push_session_ttl_seconds: limits.pushSessionTtlSeconds,
    snapshot_session_ttl_seconds: limits.snapshotSessionTtlSeconds,
    initialization_lease_ttl_seconds: limits.initializationLeaseTtlSeconds,
    retained_bundles_per_user: limits.retainedBundlesPerUser,
    watch_max_wait_seconds: limits.watchMaxWaitSeconds,
    max_conflicts_per_answer: limits.maxConflictsPerAnswer,
    max_ws_connections_per_user: limits.maxWsConnectionsPerUser,
  };
}

/** Environment overrides: `SYNC_LIMIT_<WIRE_NAME_UPPERCASE>=<integer>`. */
export function limitsFromEnv(env: Record<string, string | undefined>, base: Limits = defaultLimits): Limits {
  const out: Record<string, number> = { ...base };
  for (const key of Object.keys(base)) {
    const envName = `SYNC_LIMIT_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
    const raw = env[envName];
    if (raw === undefined || raw === '') continue;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${envName} must be a positive integer, got ${raw}`);
    out[key] = n;
  }
  return Object.freeze(out) as unknown as Limits;
}
