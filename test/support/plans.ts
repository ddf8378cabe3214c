/**
 * The plans PostgreSQL actually ran, nested statements of managed functions included: a
 * dedicated connection loads auto_explain (tests connect as a superuser), sends every plan to
 * the client as a NOTICE in JSON, and this collects them. Used to prove that hot statements use
 * the key indexes by construction, whatever the statistics say.
 */
import pg from 'pg';
import { SNAPSHOT_CHUNK_BYTES, SNAPSHOT_CHUNK_ROWS } from '../../core/sync/snapshot/snapshot.sql.js';

export interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Index Cond'?: string;
  readonly 'Recheck Cond'?: string;
  readonly Filter?: string;
  readonly 'Actual Rows'?: number;
  readonly 'Actual Loops'?: number;
  readonly 'Workers Planned'?: number;
  readonly 'Sort Key'?: readonly string[];
  readonly Plans?: readonly PlanNode[];
}

export interface ExecutedPlan {
  readonly query: string;
  readonly plan: PlanNode;
}

/** Every node of a plan tree, depth first. */
export function nodesOf(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodesOf)];
}

export interface PlanRecorder {
  readonly client: pg.Client;
  /** Runs `fn` and answers the plans of every statement it ran, nested ones included. */
  record(fn: (client: pg.Client) => Promise<unknown>): Promise<ExecutedPlan[]>;
  close(): Promise<void>;
}

export async function planRecorder(url: string): Promise<PlanRecorder> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`LOAD 'auto_explain'`);
  await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
    SET auto_explain.log_analyze = on; SET auto_explain.log_timing = off; SET auto_explain.log_format = json;
    SET auto_explain.log_level = notice; SET client_min_messages = notice`);
  let sink: ExecutedPlan[] | null = null;
  client.on('notice', (msg) => {
    if (!sink) return;
    const at = msg.message?.indexOf('plan:') ?? -1;
    if (at < 0) return;
    const parsed = JSON.parse((msg.message as string).slice(at + 'plan:'.length)) as { 'Query Text': string; Plan: PlanNode };
    sink.push({ query: parsed['Query Text'], plan: parsed.Plan });
  });
  return {
    client,
    async record(fn) {
      sink = [];
      try {
        await fn(client);
        // Notices arrive before the statement's answer; one more round trip flushes stragglers.
        await client.query('SELECT 1');
        return sink;
      } finally {
        sink = null;
      }
    },
    close: () => client.end(),
  };
}

/** The chunks sync.snapshot_render answers for a user, in order: what a create stores. */
export type RenderedChunk = { first_ordinal: number; row_count: number; body: string | null; snapshot_bundle_seq: string };

/**
 * A snapshot render of `user` in json form `form` twice on one connection: planned in parallel
 * as for a large user (sync.snapshot_render's threshold at one row, so a table of a few thousand
 * rows qualifies) and with parallel plans off. Answers both results, the nodes of the parallel
 * run's render query, and whether the connection's planner settings were the same after the
 * parallel run as before it, for a test to check that the render runs in parallel (a
 * parallel-unsafe function or a fence in it keeps the plan serial), answers the same chunks
 * either way, and puts the settings back.
 */
export async function renderBothWays(url: string, user: string, form: 1 | 2): Promise<{
  parallel: RenderedChunk[]; serial: RenderedChunk[]; nodes: PlanNode[]; settingsKept: boolean;
}> {
  const recorder = await planRecorder(url);
  try {
    const render = (threshold: number) =>
      `SELECT first_ordinal, row_count, body, snapshot_bundle_seq FROM sync.snapshot_render($1, $2::smallint, ${SNAPSHOT_CHUNK_ROWS}, ${SNAPSHOT_CHUNK_BYTES}, ${threshold})`;
    const settings = async () => (await recorder.client.query(`SELECT name, setting FROM pg_settings WHERE name LIKE '%parallel%' ORDER BY name`)).rows;
    const before = await settings();
    let parallel: RenderedChunk[] = [];
    const plans = await recorder.record(async (client) => {
      parallel = (await client.query<RenderedChunk>(render(1), [user, form])).rows;
    });
    const settingsKept = JSON.stringify(await settings()) === JSON.stringify(before);
    await recorder.client.query(`SET max_parallel_workers_per_gather = 0`);
    const serial = (await recorder.client.query<RenderedChunk>(render(1), [user, form])).rows;
    const query = plans.find((p) => p.query.includes('ORDER BY 1, 2'));
    return { parallel, serial, nodes: query ? nodesOf(query.plan) : [], settingsKept };
  } finally {
    await recorder.close();
  }
}
