/**
 * What a function tells its operators: one structured log line per request that did not simply
 * succeed, and CloudWatch metrics (issue 17 item 6).
 *
 * In Lambda, Powertools for AWS Lambda does both: JSON lines carrying the invocation's request id,
 * and metrics as CloudWatch embedded metric format (EMF) documents on stdout, which CloudWatch
 * Logs turns into metrics without an API call or a network round trip. A long-running process
 * (`npm start`, tests) keeps the console: errors only, no metrics.
 *
 * Metrics carry one dimension, `service` (Powertools' default), plus `reason` on `Unavailable`:
 * every further dimension value is another billed custom metric, and API Gateway already counts
 * requests by route and status.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { logEvent, type LogFields, type LogLevel, type LogSink } from '../../core/log.js';

export type MetricName =
  /** Bundles committed through a push session (not a create answered `already_committed`). */
  | 'Commits'
  /** Rows of those bundles. */
  | 'CommittedRows'
  /** Commits refused with 409 push_conflict. */
  | 'Conflicts'
  /** Commits refused with 422 push_rejected (a constraint of the app's schema). */
  | 'Rejections'
  /** Answers 503 service_unavailable or commit_outcome_unknown, with dimension `reason`. */
  | 'Unavailable'
  /** Commits whose connection failed in flight: the client retries from create. */
  | 'CommitOutcomeUnknown'
  /** Answers 500: a defect, logged with its stack. */
  | 'InternalErrors'
  /** WebSocket notifications of commits that could not be posted (the commit stands). */
  | 'NotificationFailures'
  /** Reads of the database secret that failed (refused, throttled, unreachable); the cached one serves. */
  | 'DatabaseSecretReadFailures'
  /** $connect tokens that could not be checked because the issuer's JWKS could not be fetched. */
  | 'JwksUnavailable';

/** How a request ended, for its log line. */
export interface RequestOutcome {
  /** The route template, e.g. `POST /sync/push-sessions/{push_id}/commit`, or `unrouted`. */
  readonly route: string;
  readonly status: number;
  /** The error code of a failed request (`error` of its body). */
  readonly error?: string | undefined;
  /** Why a 503 was answered: the body's `reason`, else `database`. */
  readonly reason?: string | undefined;
  /**
   * What the database or the driver said, for a 503: the error's SQLSTATE or socket code (55P03 a
   * lock wait ran out, 57014 a statement bound, ETIMEDOUT the client stopped waiting). A lock bound
   * an operator expects to answer in a second looks, without it, like one that took the whole query bound.
   */
  readonly cause?: string | undefined;
  readonly roundTrips: number;
  readonly durationMs: number;
  readonly userId?: string | undefined;
}

export interface Telemetry {
  /** A request starts: the invocation's request id joins every line until it finishes. */
  begin(context: object | undefined): void;
  count(metric: MetricName, value?: number, reason?: string): void;
  /**
   * The request's line (debug when it succeeded, info for a client's error, warn for 503, error
   * with the stack for 500) and one metrics document of what it counted.
   */
  finish(outcome: RequestOutcome, error?: unknown): void;
  /** Where the core's and the edge's events go (core/log.ts). */
  readonly log: LogSink;
}

function levelOf(status: number): LogLevel {
  if (status < 400) return 'debug';
  if (status === 503) return 'warn';
  return status >= 500 ? 'error' : 'info';
}

function outcomeFields(outcome: RequestOutcome): LogFields {
  return {
    route: outcome.route,
    status: outcome.status,
    ...(outcome.error ? { error_code: outcome.error } : {}),
    ...(outcome.reason ? { reason: outcome.reason } : {}),
    ...(outcome.cause ? { cause: outcome.cause } : {}),
    round_trips: outcome.roundTrips,
    duration_ms: Math.round(outcome.durationMs),
    ...(outcome.userId ? { user_id: outcome.userId } : {}),
  };
}

/** An error as JSON fields: what a metric filter or a reader of the log needs, stack included. */
function errorFields(error: unknown): LogFields {
  if (!(error instanceof Error)) return { error: { message: String(error) } };
  const code = (error as { code?: unknown }).code;
  return { error: { name: error.name, message: error.message, ...(code === undefined ? {} : { code }), stack: error.stack } };
}

/**
 * A long-running process, and a Lambda function before its runtime exists (a failed start):
 * core/log.ts's JSON lines for warnings and errors, no metrics. Never plain text, which no metric
 * filter can read.
 */
export const consoleTelemetry: Telemetry = {
  begin() {},
  count() {},
  finish(outcome, error) {
    const level = levelOf(outcome.status);
    if (level === 'error') logEvent(level, 'request', { ...outcomeFields(outcome), ...errorFields(error) });
    else if (level === 'warn') logEvent(level, 'request', outcomeFields(outcome));
  },
  log: logEvent,
};

/** Whether `context` is Lambda's context object (the local gateway passes a plain signal holder). */
function isLambdaContext(context: object | undefined): context is Context {
  return typeof (context as Partial<Context> | undefined)?.awsRequestId === 'string';
}

/**
 * Lambda's telemetry. Service name, namespace and log level come from the environment
 * (POWERTOOLS_SERVICE_NAME, POWERTOOLS_METRICS_NAMESPACE, POWERTOOLS_LOG_LEVEL; the template
 * sets them), defaulting to `lockstep`, `Lockstep` and INFO.
 */
export function powertoolsTelemetry(): Telemetry {
  const serviceName = process.env['POWERTOOLS_SERVICE_NAME'] ?? 'lockstep';
  const logger = new Logger({ serviceName });
  const metrics = new Metrics({ namespace: process.env['POWERTOOLS_METRICS_NAMESPACE'] ?? 'Lockstep', serviceName });
  let counted = false;
  const log: LogSink = (level, event, fields) => logger[level]({ message: event, event, ...fields });
  return {
    begin(context) {
      logger.resetKeys();
      if (isLambdaContext(context)) logger.addContext(context);
      // One ColdStart metric per container, on its first invocation.
      metrics.captureColdStartMetric();
    },
    count(metric, value = 1, reason) {
      if (reason === undefined) {
        metrics.addMetric(metric, MetricUnit.Count, value);
        counted = true;
      } else {
        // A dimension only this metric has: published at once, as its own document.
        metrics.singleMetric().addDimension('reason', reason).addMetric(metric, MetricUnit.Count, value);
      }
    },
    finish(outcome, error) {
      const level = levelOf(outcome.status);
      if (level === 'error') logger.error({ message: 'request failed', event: 'request', ...outcomeFields(outcome) }, error as Error);
      else log(level, 'request', outcomeFields(outcome));
      if (counted) metrics.publishStoredMetrics();
      counted = false;
    },
    log,
  };
}
