/**
 * Lambda: bootstrap. Installs or upgrades the `sync` layout and registers SYNC_TABLES; never part
 * of a request path. Two ways in:
 * - a CloudFormation custom resource (infra/template.yaml), so every deploy runs it before the
 *   request functions change: Create and Update bootstrap, Delete changes nothing (the data
 *   stays); the answer goes to the pre-signed ResponseURL, FAILED with the typed error when
 *   bootstrap refuses, which rolls the deploy back;
 * - a direct invoke (`sam remote invoke`), optionally `{"accept": ["drop-column:app.t.c"]}` for a
 *   deliberate contract step; it answers `{ok, …}` or `{ok: false, error, message}`.
 *
 * As a custom resource it takes every setting it reads from the event's properties, not from its
 * environment (issue 25 item 2): CloudFormation invokes the version the alias `live` points at,
 * published when the code last changed, with the environment of that moment, so a deploy that
 * changed only a setting (SyncTables, SyncMaxSchemaVersion, DatabaseUrl, DatabaseSecretArn,
 * DbDriver, …) ran with the old values. The template passes each of them as a property, so a
 * change of any of them also changes the properties, which makes CloudFormation run it again.
 *
 * During a rollback (issue 25 item 7: CloudFormation runs the previous release's bootstrap with
 * the previous properties) it changes nothing and answers SUCCESS, so the rollback can end: the
 * layout and the registered tables only move forward. When this release cannot serve the layout
 * it finds, the answer and an error line say so (its functions answer 503
 * layout_upgrade_required until a newer release is deployed). A rollback is told from the stack's
 * status (DescribeStacks on its own stack), or, when that cannot be read, from a bootstrap
 * version lower than the one it replaces.
 *
 * The answer to CloudFormation is retried with a doubling pause and every failure is logged (a
 * VPC without a route to S3 answered `fetch failed` once, and the stack waited for an hour).
 */
import { AwsClient } from 'aws4fetch';
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { inspectForRollback } from '../core/bootstrap/rollback.js';
import { loadConfig, type Config } from '../core/config.js';
import { Db } from '../core/db/index.js';
import { defaultLimits, limitsFromEnv, type Limits } from '../core/limits.js';
import { logEvent } from '../core/log.js';
import { noteDatabaseError, openDatabase, type Database } from './edge/database.js';

export interface BootstrapAnswer {
  readonly ok: boolean;
  readonly created?: boolean;
  readonly layout_from?: number;
  readonly layout_to?: number;
  readonly schema_version?: number;
  readonly applied?: string[];
  readonly adopted_rows?: number;
  readonly registered_tables?: string[];
  /** What became of the role's timeout settings: unchanged, installed, removed or refused. */
  readonly role_timeouts?: string;
  /** A rollback's bootstrap: it changed nothing, and says whether this release serves the layout. */
  readonly rollback?: boolean;
  readonly error?: string;
  readonly message?: string;
}

/**
 * The custom resource's properties (infra/template.yaml, LayoutBootstrap) and the environment
 * variable each one stands for: everything bootstrap reads that a deploy may change.
 */
export const PROPERTY_ENV = {
  SyncTables: 'SYNC_TABLES',
  SyncMaxSchemaVersion: 'SYNC_MAX_SCHEMA_VERSION',
  DatabaseUrl: 'DATABASE_URL',
  DatabaseSecretArn: 'DATABASE_SECRET_ID',
  DatabaseHost: 'DATABASE_HOST',
  DatabaseName: 'DATABASE_NAME',
  DatabaseSslMode: 'DATABASE_SSLMODE',
  DbDriver: 'SYNC_DB_DRIVER',
  RoleTimeouts: 'SYNC_ROLE_TIMEOUTS',
} as const;

type Properties = { readonly [K in keyof typeof PROPERTY_ENV]?: string } & {
  readonly BootstrapVersion?: string;
  readonly Accept?: string | readonly string[];
};

/** The custom resource request CloudFormation sends (the fields used here). */
interface CustomResourceEvent {
  readonly RequestType: 'Create' | 'Update' | 'Delete';
  readonly ResponseURL: string;
  readonly StackId: string;
  readonly RequestId: string;
  readonly LogicalResourceId: string;
  readonly PhysicalResourceId?: string;
  readonly ResourceProperties?: Properties;
  readonly OldResourceProperties?: Properties;
}

interface LambdaContext {
  getRemainingTimeInMillis?: () => number;
  logStreamName?: string;
}

type Env = Record<string, string | undefined>;

function isCustomResource(event: unknown): event is CustomResourceEvent {
  return typeof event === 'object' && event !== null && 'RequestType' in event && 'ResponseURL' in event;
}

function acceptList(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  if (typeof value === 'string') return value.split(',').map((v) => v.trim()).filter(Boolean);
  return [];
}

/** The environment with the event's properties over it: what this deploy asked for. */
export function settingsOf(properties: Properties | undefined, env: Env = process.env): Env {
  const out: Env = { ...env };
  for (const [property, name] of Object.entries(PROPERTY_ENV)) {
    const value = properties?.[property as keyof typeof PROPERTY_ENV];
    if (typeof value === 'string') out[name] = value;
  }
  return out;
}

interface Setup {
  readonly key: string;
  readonly config: Config;
  readonly db: Db;
  readonly secret: Database['secret'];
}

let setup: Promise<Setup> | undefined;

/**
 * Configuration and a small pool of its own, kept across warm invocations while the settings
 * stay the same, opened again when a deploy changed them. Not the request runtime
 * (functions/edge/runtime.ts): bootstrap needs none of the request path, whose modules would
 * only weigh on this bundle, and none of its client-side bounds (adoption may take minutes).
 */
async function bootstrapDb(env: Env): Promise<Setup> {
  const key = JSON.stringify(Object.values(PROPERTY_ENV).map((name) => env[name] ?? ''));
  const current = await setup?.catch(() => undefined);
  if (current?.key === key) return current;
  void current?.db.pool.end().catch(() => undefined);
  setup = (async () => {
    const config = loadConfig(env);
    const { pool, secret } = await openDatabase(config, 2, env);
    return { key, config, secret, db: new Db(pool, { statementTimeoutMs: config.limits.statementTimeoutMs, lockTimeoutMs: config.limits.lockTimeoutMs }) };
  })();
  setup.catch(() => {
    setup = undefined;
  });
  return setup;
}

function failure(error: unknown): BootstrapAnswer {
  const e = error as { code?: string; message?: string };
  return { ok: false, error: e.code ?? 'bootstrap_failed', message: e.message ?? String(error) };
}

async function run(accept: readonly string[], env: Env): Promise<BootstrapAnswer> {
  let runtime: Setup | undefined;
  try {
    runtime = await bootstrapDb(env);
    const result = await bootstrap(runtime.db, {
      tables: runtime.config.tables,
      maxSchemaVersion: runtime.config.maxSchemaVersion,
      accept,
      retainedBundlesPerUser: runtime.config.limits.retainedBundlesPerUser,
      bounds: runtime.config.limits,
      roleBounds: runtime.config.roleTimeouts,
    });
    return {
      ok: true,
      created: result.created,
      layout_from: result.layoutFrom,
      layout_to: result.layoutTo,
      schema_version: result.schemaVersion,
      applied: result.applied.map((c) => c.id),
      adopted_rows: result.adoptedRows,
      registered_tables: result.catalog.map((t) => `${t.schema}.${t.table}`),
      role_timeouts: result.roleBounds,
    };
  } catch (error) {
    noteDatabaseError(error, runtime?.secret);
    return failure(error);
  }
}

/**
 * A rollback's bootstrap: reads the layout, changes nothing, and succeeds whatever it finds, so
 * the rollback ends. What this release cannot serve is said in the answer and an error line.
 */
async function rollback(env: Env): Promise<BootstrapAnswer> {
  try {
    const view = await inspectForRollback((await bootstrapDb(env)).db);
    const version = view.layout?.version ?? 0;
    const answer = { ok: true, rollback: true, layout_from: version, layout_to: version, ...(view.schemaVersion === null ? {} : { schema_version: view.schemaVersion }) };
    if (view.servable.ok) {
      logEvent('info', 'bootstrap_rollback', { layout_version: version, servable: true });
      return { ...answer, message: `rollback: nothing changed; this release serves layout ${version}` };
    }
    const message = `rollback: nothing changed, but this release cannot serve the layout (${view.servable.reason}): ${view.servable.detail}; its functions answer 503 ${view.servable.reason} until a release that serves it is deployed`;
    logEvent('error', 'bootstrap_rollback_unservable', { layout_version: version, min_safe_version: view.layout?.minSafeVersion ?? null, reason: view.servable.reason, detail: view.servable.detail });
    return { ...answer, message };
  } catch (error) {
    // Even an unreadable database must not keep the rollback from ending.
    const e = failure(error);
    logEvent('error', 'bootstrap_rollback_unchecked', { error: e.error, message: e.message });
    return { ok: true, rollback: true, message: `rollback: nothing changed; the layout could not be read (${e.error}: ${e.message})` };
  }
}

/** The stack's status (DescribeStacks on the stack's own ARN, signed with the function's role). */
async function stackStatus(stackId: string, env: Env): Promise<string> {
  const region = env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'] ?? /^arn:[^:]+:cloudformation:([^:]+):/.exec(stackId)?.[1] ?? 'us-east-1';
  const client = new AwsClient({
    accessKeyId: env['AWS_ACCESS_KEY_ID'] ?? '',
    secretAccessKey: env['AWS_SECRET_ACCESS_KEY'] ?? '',
    ...(env['AWS_SESSION_TOKEN'] ? { sessionToken: env['AWS_SESSION_TOKEN'] } : {}),
    service: 'cloudformation',
    region,
    retries: 2,
  });
  const endpoint = env['AWS_ENDPOINT_URL_CLOUDFORMATION'] ?? env['AWS_ENDPOINT_URL'] ?? `https://cloudformation.${region}.amazonaws.com/`;
  const response = await client.fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ Action: 'DescribeStacks', Version: '2010-05-15', StackName: stackId }).toString(),
    signal: AbortSignal.timeout(5000),
  });
  const text = await response.text();
  const status = /<StackStatus>([A-Z_]+)<\/StackStatus>/.exec(text)?.[1];
  if (!response.ok || !status) throw new Error(`DescribeStacks answered ${response.status}: ${text.slice(0, 200)}`);
  return status;
}

/** Whether this Update is CloudFormation rolling a failed update back. */
async function isRollback(event: CustomResourceEvent, env: Env): Promise<boolean> {
  try {
    return (await stackStatus(event.StackId, env)).endsWith('ROLLBACK_IN_PROGRESS');
  } catch (error) {
    // Without the stack's status, a bootstrap version lower than the one it replaces is a rollback.
    const from = Number(event.OldResourceProperties?.BootstrapVersion);
    const to = Number(event.ResourceProperties?.BootstrapVersion);
    const rollingBack = Number.isFinite(from) && Number.isFinite(to) && to < from;
    logEvent('warn', 'stack_status_unavailable', { message: (error as Error).message, bootstrap_version_from: from, bootstrap_version_to: to, rollback: rollingBack });
    return rollingBack;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * PUTs the custom resource's outcome to CloudFormation's pre-signed URL, retried with a doubling
 * pause; every failed try is a JSON line. Throws when every try failed: Lambda then retries the
 * whole (asynchronous) invocation, which revalidates and answers again.
 */
async function respond(event: CustomResourceEvent, context: LambdaContext | undefined, answer: BootstrapAnswer, env: Env): Promise<void> {
  // CloudFormation shows Reason (at most 4 KB of the response) when the deploy fails.
  const reason = answer.ok ? (answer.message ?? 'bootstrap done') : `${answer.error}: ${answer.message}`;
  const body = JSON.stringify({
    Status: answer.ok ? 'SUCCESS' : 'FAILED',
    Reason: `${reason.slice(0, 3500)} (log stream ${context?.logStreamName ?? 'n/a'})`,
    PhysicalResourceId: event.PhysicalResourceId ?? 'lockstep-sync-layout',
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
    Data: answer.ok ? { LayoutVersion: String(answer.layout_to ?? 'unknown'), SchemaVersion: String(answer.schema_version ?? 'unknown') } : {},
  });
  const limits = limitsOf(env);
  for (let attempt = 1; ; attempt++) {
    let problem: string;
    try {
      const response = await fetch(event.ResponseURL, { method: 'PUT', body, headers: { 'content-type': '' }, signal: AbortSignal.timeout(10_000) });
      if (response.ok) {
        logEvent('info', 'cloudformation_response_sent', { status: answer.ok ? 'SUCCESS' : 'FAILED', attempt, request_type: event.RequestType });
        return;
      }
      problem = `answered ${response.status}`;
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      problem = `${(error as Error).message}${cause ? ` (${cause.code ?? cause.message ?? ''})` : ''}`;
    }
    const last = attempt >= limits.cloudFormationResponseAttempts;
    logEvent(last ? 'error' : 'warn', 'cloudformation_response_failed', {
      attempt,
      attempts: limits.cloudFormationResponseAttempts,
      problem,
      host: new URL(event.ResponseURL).host,
      hint: 'the function needs a route to S3 (in a VPC: a NAT gateway, infra/README.md)',
    });
    if (last) throw new Error(`the answer to CloudFormation could not be sent after ${attempt} tries: ${problem}`);
    await sleep(limits.cloudFormationResponseRetryMs * 2 ** (attempt - 1));
  }
}

/** The limits this environment sets, or the defaults when it sets them wrong (bootstrap says so). */
function limitsOf(env: Env): Limits {
  try {
    return limitsFromEnv(env);
  } catch {
    return defaultLimits;
  }
}

export async function handler(event?: unknown, context?: LambdaContext): Promise<BootstrapAnswer> {
  if (!isCustomResource(event)) {
    return run(acceptList((event as { accept?: unknown } | undefined)?.accept), process.env);
  }
  const env = settingsOf(event.ResourceProperties);
  if (event.RequestType === 'Delete') {
    // Removing the stack never removes the sync layout or the data in it.
    const answer: BootstrapAnswer = { ok: true };
    await respond(event, context, answer, env);
    return answer;
  }
  // Answer FAILED before Lambda's timeout would leave CloudFormation waiting, with time left to
  // retry the answer.
  const remaining = context?.getRemainingTimeInMillis?.() ?? 900_000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<BootstrapAnswer>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, error: 'bootstrap_timeout', message: 'bootstrap did not finish within the function timeout' }), Math.max(1000, remaining - Math.min(60_000, remaining / 2)));
  });
  const work = event.RequestType === 'Update' && (await isRollback(event, env)) ? rollback(env) : run(acceptList(event.ResourceProperties?.Accept), env);
  const answer = await Promise.race([work, timeout]);
  clearTimeout(timer);
  await respond(event, context, answer, env);
  return answer;
}
