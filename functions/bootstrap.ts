/**
 * Lambda: bootstrap. Installs or upgrades the `sync` layout and registers SYNC_TABLES; never part
 * of a request path. Two ways in:
 * - a CloudFormation custom resource (infra/template.yaml), so every deploy runs it before the
 *   request functions change: Create and Update bootstrap, Delete changes nothing (the data
 *   stays); the answer goes to the pre-signed ResponseURL, FAILED with the typed error when
 *   bootstrap refuses, which rolls the deploy back;
 * - a direct invoke (`sam remote invoke`), optionally `{"accept": ["drop-column:app.t.c"]}` for a
 *   deliberate contract step; it answers `{ok, …}` or `{ok: false, error, message}`.
 */
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { loadConfig, type Config } from '../core/config.js';
import { Db } from '../core/db/index.js';
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
  /** What became of the role's timeout settings: unchanged, installed, skipped or refused. */
  readonly role_timeouts?: string;
  readonly error?: string;
  readonly message?: string;
}

/** The custom resource request CloudFormation sends (the fields used here). */
interface CustomResourceEvent {
  readonly RequestType: 'Create' | 'Update' | 'Delete';
  readonly ResponseURL: string;
  readonly StackId: string;
  readonly RequestId: string;
  readonly LogicalResourceId: string;
  readonly PhysicalResourceId?: string;
  readonly ResourceProperties?: { readonly Accept?: string | readonly string[] };
}

interface LambdaContext {
  getRemainingTimeInMillis?: () => number;
  logStreamName?: string;
}

function isCustomResource(event: unknown): event is CustomResourceEvent {
  return typeof event === 'object' && event !== null && 'RequestType' in event && 'ResponseURL' in event;
}

function acceptList(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  if (typeof value === 'string') return value.split(',').map((v) => v.trim()).filter(Boolean);
  return [];
}

let setup: Promise<{ config: Config; db: Db; secret: Database['secret'] }> | undefined;

/**
 * Configuration and a small pool of its own, kept across warm invocations. Not the request
 * runtime (functions/edge/runtime.ts): bootstrap needs none of the request path, whose modules
 * would only weigh on this bundle, and none of its client-side bounds (adoption may take minutes).
 */
function bootstrapDb(): Promise<{ config: Config; db: Db; secret: Database['secret'] }> {
  setup ??= (async () => {
    const config = loadConfig();
    const { pool, secret } = await openDatabase(config, 2);
    return { config, secret, db: new Db(pool, { statementTimeoutMs: config.limits.statementTimeoutMs, lockTimeoutMs: config.limits.lockTimeoutMs }) };
  })().catch((error: unknown) => {
    setup = undefined;
    throw error;
  });
  return setup;
}

async function run(accept: readonly string[]): Promise<BootstrapAnswer> {
  try {
    const runtime = await bootstrapDb();
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
    noteDatabaseError(error, (await setup?.catch(() => undefined))?.secret);
    const e = error as { code?: string; message?: string };
    return { ok: false, error: e.code ?? 'bootstrap_failed', message: e.message ?? String(error) };
  }
}

/** PUTs the custom resource's outcome to CloudFormation's pre-signed URL. */
async function respond(event: CustomResourceEvent, context: LambdaContext | undefined, answer: BootstrapAnswer): Promise<void> {
  // CloudFormation shows Reason (at most 4 KB of the response) when the deploy fails.
  const reason = answer.ok ? 'bootstrap done' : `${answer.error}: ${answer.message}`.slice(0, 3500);
  const body = JSON.stringify({
    Status: answer.ok ? 'SUCCESS' : 'FAILED',
    Reason: `${reason} (log stream ${context?.logStreamName ?? 'n/a'})`,
    PhysicalResourceId: event.PhysicalResourceId ?? 'lockstep-sync-layout',
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
    Data: answer.ok ? { LayoutVersion: String(answer.layout_to), SchemaVersion: String(answer.schema_version) } : {},
  });
  const response = await fetch(event.ResponseURL, { method: 'PUT', body, headers: { 'content-type': '' } });
  if (!response.ok) throw new Error(`CloudFormation response PUT answered ${response.status}`);
}

export async function handler(event?: unknown, context?: LambdaContext): Promise<BootstrapAnswer> {
  if (!isCustomResource(event)) {
    return run(acceptList((event as { accept?: unknown } | undefined)?.accept));
  }
  if (event.RequestType === 'Delete') {
    // Removing the stack never removes the sync layout or the data in it.
    const answer: BootstrapAnswer = { ok: true };
    await respond(event, context, answer);
    return answer;
  }
  // Answer FAILED before Lambda's timeout would leave CloudFormation waiting for an hour.
  const remaining = context?.getRemainingTimeInMillis?.() ?? 900_000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<BootstrapAnswer>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, error: 'bootstrap_timeout', message: 'bootstrap did not finish within the function timeout' }), Math.max(1000, remaining - 10_000));
  });
  const answer = await Promise.race([run(acceptList(event.ResourceProperties?.Accept)), timeout]);
  clearTimeout(timer);
  await respond(event, context, answer);
  return answer;
}
