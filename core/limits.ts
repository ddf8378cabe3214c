/**
 * Every limit the service enforces, in one place (docs/protocol.md §8). Units come last in each name.
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
  /**
   * Time a watch keeps back from its request's deadline (in Lambda: the function's remaining time
   * less `functionReserveMs`) for its last read and its answer. A wait that the remaining time
   * cannot hold is cut short and answered `changed: false` (200), never a 503.
   */
  readonly watchAnswerReserveMs: number;
  /** Conflicts reported in one push_conflict answer; the client resolves them in one round. */
  readonly maxConflictsPerAnswer: number;
  /**
   * Server-side bound of one statement: the role setting bootstrap installs (every session of
   * the role in this database) and runTx's transaction-local one. The timeouts fire in order:
   * lock < statement < query (client) < request < the function's timeout < API Gateway's 29 s
   * (asserted below and in test/template-routes.test.ts).
   */
  readonly statementTimeoutMs: number;
  /**
   * How long a statement waits for a lock: the role setting bootstrap installs, and a SET clause
   * of every managed function a request calls (so it holds on connections opened before).
   */
  readonly lockTimeoutMs: number;
  /**
   * Client-side bound of one statement: a connection that silently stops answering (a dropped
   * network path) raises nothing, so the runtime stops waiting after this and answers 503.
   */
  readonly queryTimeoutMs: number;
  /**
   * Everything one request may wait on the database, pool included; in Lambda also cut to the
   * function's remaining time less `functionReserveMs`.
   */
  readonly requestTimeoutMs: number;
  /** Time kept back from Lambda's remaining time to answer (serialise, return) after a timeout. */
  readonly functionReserveMs: number;
  /** A session idle inside a transaction (its client died mid-transaction) is ended after this. */
  readonly idleInTransactionTimeoutMs: number;
  /** How often a long statement checks that its client is still there (PostgreSQL 14+). */
  readonly clientCheckIntervalMs: number;
  /**
   * Share of a container's pool one user may hold at once: a user stuck on a lock keeps the rest
   * for the others (at least one connection each).
   */
  readonly poolSharePerUserPercent: number;
  /**
   * Connections of a container's pool the unauthenticated routes (`/syncx/status`, health) hold at
   * once, whatever their load: they never take a user's part of the pool (core/db/fair-share.ts).
   */
  readonly anonymousConnectionsMax: number;
  /**
   * Sources (devices) one user has that are not retired. Registering one more is `429
   * rate_limited`; maintenance retires sources idle for `sourceIdleRetireSeconds`, and a retired
   * source recovers by rotation (source_retired). Enforced by sync.check_source, whose SET clause
   * bootstrap installs from this value.
   */
  readonly maxSourcesPerUser: number;
  /** A source with no commit, connect, push session, snapshot or server write for this long is retired by maintenance. */
  readonly sourceIdleRetireSeconds: number;
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
  /**
   * Room in `maxResponseBytes` for the function result around the body (status, headers, the
   * base64 flag): page bodies are budgeted to the rest, counted escaped as Lambda counts them.
   */
  readonly responseEnvelopeBytes: number;
  /**
   * Room in a page for its own envelope around a single row (a committed-rows page's bundle head,
   * source id included). A committed row larger than the page budget less this could never be
   * served, so its commit is refused (413 payload_too_large).
   */
  readonly pageEnvelopeBytes: number;
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
  /**
   * The largest pull page a notification carries (protocol §5.9): a commit's bundle up to this
   * size goes to the user's sockets with its rows, so their devices need no pull for it.
   */
  readonly notifyPageBytesMax: number;
  /** Staging push sessions one user may hold at once (protocol §8); over it: 429 rate_limited. */
  readonly maxOpenPushSessionsPerUser: number;
  /** Snapshot sessions one user may hold at once (protocol §8); each is a copy of all their rows. */
  readonly maxOpenSnapshotSessionsPerUser: number;
  /** Bytes of request bodies one user may have staged in open push sessions (protocol §8). */
  readonly maxStagedBytesPerUser: number;
  /**
   * How often maintenance runs: the local runtime's timer, and the Retry-After of a cap held only
   * by expired sessions waiting to be removed. The template's schedule matches it.
   */
  readonly maintenanceIntervalSeconds: number;
  /**
   * How long a container trusts the database password it read from Secrets Manager
   * (DATABASE_SECRET_ID) before a new connection reads it again; an authentication failure
   * reads it again at once.
   */
  readonly secretRefreshSeconds: number;
  /**
   * After a failed read of the database secret (refused, throttled, unreachable), how long a
   * container waits before reading again: it keeps serving on the secret it holds meanwhile, and
   * one that holds none answers 503 with this Retry-After instead of calling the service again.
   */
  readonly secretRetryAfterFailureSeconds: number;
  /**
   * Tries of the bootstrap function's answer to CloudFormation (a PUT to the pre-signed
   * ResponseURL), the pause doubling from `cloudFormationResponseRetryMs`: a lost answer leaves
   * the stack waiting until the custom resource's ServiceTimeout.
   */
  readonly cloudFormationResponseAttempts: number;
  readonly cloudFormationResponseRetryMs: number;
  /** How long the WebSocket `$connect` waits for the issuer's JWKS before answering 503. */
  readonly jwksTimeoutMs: number;
  /** How long a fetched JWKS is used before it is fetched again (a token with an unknown key fetches sooner). */
  readonly jwksRefreshSeconds: number;
  /**
   * After a failed fetch of the JWKS, how long before the next try: the last good JWKS is used
   * meanwhile, and without one `$connect` answers 503 with this Retry-After.
   */
  readonly jwksRetryAfterFailureSeconds: number;
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
  watchAnswerReserveMs: 1_000,
  maxConflictsPerAnswer: 100,
  statementTimeoutMs: 20_000,
  lockTimeoutMs: 10_000,
  queryTimeoutMs: 22_000,
  requestTimeoutMs: 26_000,
  functionReserveMs: 1_500,
  idleInTransactionTimeoutMs: 30_000,
  clientCheckIntervalMs: 2_000,
  poolSharePerUserPercent: 50,
  anonymousConnectionsMax: 1,
  maxSourcesPerUser: 64,
  sourceIdleRetireSeconds: 90 * 24 * 60 * 60,
  maintenanceBatchRows: 5000,
  maxKeyBytes: 1024,
  maxJsonDepth: 64,
  maxProblemsPerAnswer: 20,
  unavailableRetryAfterSeconds: 1,
  dbConnectTimeoutMs: 5_000,
  dbIdleTimeoutMs: 30_000,
  catalogRefreshSeconds: 15,
  maxWsConnectionsPerUser: 32,
  wsConnectionTtlSeconds: 2 * 60 * 60,
  notifyTimeoutMs: 1000,
  notifyPageBytesMax: 64 * 1024,
  responseEnvelopeBytes: 2048,
  pageEnvelopeBytes: 1024,
  maxOpenPushSessionsPerUser: 64,
  maxOpenSnapshotSessionsPerUser: 8,
  maxStagedBytesPerUser: 256 * 1024 * 1024,
  maintenanceIntervalSeconds: 60,
  secretRefreshSeconds: 300,
  secretRetryAfterFailureSeconds: 30,
  cloudFormationResponseAttempts: 6,
  cloudFormationResponseRetryMs: 1_000,
  jwksTimeoutMs: 3_000,
  jwksRefreshSeconds: 600,
  jwksRetryAfterFailureSeconds: 30,
});

/**
 * AWS Lambda's own ceiling for a synchronous invoke: the request event and the function result are
 * each at most 6 MB (6,291,456 bytes) as serialized JSON, escaping and base64 included. Not
 * configurable: `maxRequestBytes` and `maxResponseBytes` must stay under it, and the local
 * gateway answers as API Gateway does (its own 413, not a Lockstep body) above it.
 */
export const LAMBDA_PAYLOAD_BYTES_MAX = 6 * 1024 * 1024;

/** API Gateway's integration timeout for the HTTP API routes (infra/template.yaml). */
export const API_GATEWAY_TIMEOUT_MS = 29_000;

/**
 * The relations the limits must keep, so that each bound fires before the one that would cut the
 * answer off: a lock wait ends as a typed 503 before its statement's timeout, the server's
 * statement timeout before the client stops waiting, that before the request's budget, and the
 * budget before API Gateway gives up. Returns what is wrong, empty when nothing is.
 */
export function limitProblems(l: Limits): string[] {
  const problems: string[] = [];
  const order: Array<[string, number]> = [
    ['lock_timeout_ms', l.lockTimeoutMs],
    ['statement_timeout_ms', l.statementTimeoutMs],
    ['query_timeout_ms', l.queryTimeoutMs],
    ['request_timeout_ms', l.requestTimeoutMs],
    ['API Gateway', API_GATEWAY_TIMEOUT_MS],
  ];
  for (let i = 1; i < order.length; i++) {
    const [a, av] = order[i - 1] as [string, number];
    const [b, bv] = order[i] as [string, number];
    if (!(av < bv)) problems.push(`${a} (${av}) must be below ${b} (${bv})`);
  }
  if (!(l.dbConnectTimeoutMs < l.requestTimeoutMs)) problems.push(`db_connect_timeout_ms (${l.dbConnectTimeoutMs}) must be below request_timeout_ms (${l.requestTimeoutMs})`);
  if (!(l.watchAnswerReserveMs < l.requestTimeoutMs)) problems.push(`watch_answer_reserve_ms (${l.watchAnswerReserveMs}) must be below request_timeout_ms (${l.requestTimeoutMs})`);
  if (!(l.watchMaxWaitSeconds * 1000 < l.requestTimeoutMs)) problems.push(`watch_max_wait_seconds (${l.watchMaxWaitSeconds}) must end before request_timeout_ms (${l.requestTimeoutMs})`);
  if (!(l.requestTimeoutMs + l.functionReserveMs < API_GATEWAY_TIMEOUT_MS)) problems.push(`request_timeout_ms + function_reserve_ms (${l.requestTimeoutMs + l.functionReserveMs}) must be below API Gateway (${API_GATEWAY_TIMEOUT_MS})`);
  if (l.poolSharePerUserPercent > 100) problems.push('pool_share_per_user_percent is at most 100');
  for (const [name, value] of [['max_request_bytes', l.maxRequestBytes], ['max_response_bytes', l.maxResponseBytes]] as const) {
    if (!(value < LAMBDA_PAYLOAD_BYTES_MAX)) problems.push(`${name} (${value}) must be below Lambda's invoke payload limit (${LAMBDA_PAYLOAD_BYTES_MAX})`);
  }
  // Every default is clamped to its maximum where it is used, so a lowered push-chunk or watch
  // maximum needs no second setting; the page defaults are published for clients to plan pages
  // by, and one above its own maximum would tell them a size the server never serves.
  const atMost: Array<[string, number, string, number]> = [
    ['default_bundles_per_pull', l.defaultBundlesPerPull, 'max_bundles_per_pull', l.maxBundlesPerPull],
    ['default_rows_per_page', l.defaultRowsPerPage, 'max_rows_per_page', l.maxRowsPerPage],
    // One user must be able to stage one whole bundle of the largest size, or that bundle would
    // be refused 429 forever: stuck, with a way out that never opens.
    ['max_bytes_per_bundle', l.maxBytesPerBundle, 'max_staged_bytes_per_user', l.maxStagedBytesPerUser],
  ];
  for (const [a, av, b, bv] of atMost) if (!(av <= bv)) problems.push(`${a} (${av}) must be at most ${b} (${bv})`);
  // A page must keep room for at least one row inside the answer.
  if (!(l.responseEnvelopeBytes + l.pageEnvelopeBytes < l.maxResponseBytes)) problems.push(`response_envelope_bytes + page_envelope_bytes must be below max_response_bytes (${l.maxResponseBytes})`);
  return problems;
}

/**
 * A limit's one external name, derived from its key: `maxRowsPerPushChunk` is
 * `max_rows_per_push_chunk` in capabilities' `bundle_limits` and `SYNC_LIMIT_MAX_ROWS_PER_PUSH_CHUNK`
 * in the environment. Deriving it leaves no second spelling to drift.
 */
export function limitWireName(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Every limit under its wire name, as capabilities' `bundle_limits` reports them. */
export function limitsToWire(limits: Limits): Record<string, number> {
  return Object.fromEntries(Object.entries(limits).map(([key, value]) => [limitWireName(key), value as number]));
}

/** Environment overrides: `SYNC_LIMIT_<WIRE_NAME_UPPERCASE>=<integer>`. */
export function limitsFromEnv(env: Record<string, string | undefined>, base: Limits = defaultLimits): Limits {
  const out: Record<string, number> = { ...base };
  for (const key of Object.keys(base)) {
    const envName = `SYNC_LIMIT_${limitWireName(key).toUpperCase()}`;
    const raw = env[envName];
    if (raw === undefined || raw === '') continue;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${envName} must be a positive integer, got ${raw}`);
    out[key] = n;
  }
  const limits = Object.freeze(out) as unknown as Limits;
  const problems = limitProblems(limits);
  if (problems.length) throw new Error(`inconsistent SYNC_LIMIT_* settings: ${problems.join('; ')}`);
  return limits;
}

// The defaults keep their own relations; a broken default fails at load, never at a request.
const defaultProblems = limitProblems(defaultLimits);
if (defaultProblems.length) throw new Error(`inconsistent default limits: ${defaultProblems.join('; ')}`);
