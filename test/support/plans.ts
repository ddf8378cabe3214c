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
