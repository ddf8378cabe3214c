/**
 * The plans PostgreSQL actually ran, nested statements of managed functions included: a
 * dedicated connection loads auto_explain (tests connect as a superuser), sends every plan to
 * the client as a NOTICE in JSON, and this collects them. Used to prove that hot statements use
 * the key indexes by construction, whatever the statistics say.
 */
import pg from 'pg';

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
 * A snapshot render of `user` in json form `form` twice on one connection: with parallel plans
 * made free (so a table of a few thousand rows qualifies) and with parallel plans off. Answers both
 * results and the nodes of the parallel run's render query, for a test to check that the render
 * can run in parallel (a parallel-unsafe function or a fence in it keeps the plan serial) and
 * answers the same chunks either way.
 */
export async function renderBothWays(url: string, user: string, form: 1 | 2): Promise<{
  parallel: RenderedChunk[]; serial: RenderedChunk[]; nodes: PlanNode[];
}> {
  const recorder = await planRecorder(url);
  try {
    const render = `SELECT first_ordinal, row_count, body, snapshot_bundle_seq FROM sync.snapshot_render($1, $2::smallint, 500, 262144)`;
    await recorder.client.query(`SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
      SET min_parallel_index_scan_size = 0; SET max_parallel_workers_per_gather = 2`);
    let parallel: RenderedChunk[] = [];
    const plans = await recorder.record(async (client) => {
      parallel = (await client.query<RenderedChunk>(render, [user, form])).rows;
    });
    await recorder.client.query(`SET max_parallel_workers_per_gather = 0`);
    const serial = (await recorder.client.query<RenderedChunk>(render, [user, form])).rows;
    const query = plans.find((p) => p.query.includes('ORDER BY 1, 2'));
    return { parallel, serial, nodes: query ? nodesOf(query.plan) : [] };
  } finally {
    await recorder.close();
  }
}
