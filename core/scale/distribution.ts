/**
 * Scale-out on Citus (docs/scale-out.md): which tables are distributed by what,
 * which are reference tables, which managed functions are delegated with which argument, and the
 * Citus statements that say so, generated from the live layout. Every user's rows, in the
 * registered tables and in the per-user `sync` tables, live on one worker (co-located by the
 * user's scope), and every request is one call of a managed function delegated to that worker, so
 * a request runs there in one local transaction.
 *
 * The generator is pure: it takes the layout as `LayoutFacts` (read by ./layout-facts.ts) and
 * answers the statements, or the blockers that make the layout not ready for Citus yet. Nothing is
 * half-distributed: with a blocker, bootstrap on Citus refuses (./citus.ts). It has not run on
 * Citus here (no Citus package for PostgreSQL 16/17 on this machine kind); its output is checked
 * against recorded expectations and against Citus's documented rules.
 */
import { quoteLiteral } from '../db/sql.js';
import { SCOPE_COLUMN } from '../sync/catalog/names.js';

/** The distribution column of the per-user `sync` tables: the user's scope, as text. */
export const SYNC_DISTRIBUTION_COLUMN = 'user_id';

/** The table every other distributed table and every delegated function is co-located with. */
export const COLOCATION_ANCHOR = 'sync.user_state';

/**
 * What each table of the `sync` schema is on Citus. `per-user`: distributed by the user's scope,
 * co-located with the registered tables. `reference`: a small catalog copied to every node, read
 * on the request path, written only by bootstrap and maintenance. A table missing here is a
 * blocker: a new table must be classified (and tested) before it can be distributed.
 */
export const SYNC_TABLE_ROLES: Readonly<Record<string, 'per-user' | 'reference'>> = {
  meta: 'reference',
  table_catalog: 'reference',
  counter_totals: 'reference',
  user_state: 'per-user',
  scope_state: 'per-user',
  source_state: 'per-user',
  row_state: 'per-user',
  bundle_log: 'per-user',
  bundle_rows: 'per-user',
  push_sessions: 'per-user',
  push_session_rows: 'per-user',
  snapshot_sessions: 'per-user',
  snapshot_session_rows: 'per-user',
  // A user's rendered snapshot at one ceiling and its chunks, shared by that user's sessions.
  snapshot_data: 'per-user',
  snapshot_chunks: 'per-user',
  user_quota: 'per-user',
  user_outcomes: 'per-user',
  ws_connections: 'per-user',
  // Scratch of one transaction (the bundle being committed): on Citus it lives where the user's
  // rows are, so the commit's joins with it stay on one shard group.
  bundle_context: 'per-user',
  capture_rows: 'per-user',
  // The counter ledger is written by commits: per user, folded by maintenance into counter_totals.
  counter_deltas: 'per-user',
};

/** A request-path function: delegated to the worker that holds `scopeArgument`'s rows. */
export interface DelegatedFunction {
  /** `sync.name`. */
  readonly name: string;
  /** The argument that carries the user's scope (a function that lacks it is a blocker). */
  readonly scopeArgument: string;
  /** Called inside an explicit transaction (the server write API): needs force_delegation. */
  readonly inTransaction?: boolean;
  /** Why it is on the request path, and, without a scope argument, what it needs. */
  readonly note: string;
}

/**
 * Every managed function a request calls directly (core/sync/**: one statement per request; the
 * server write API's two calls inside the application's transaction). The functions they call in
 * turn run inside them, on the same worker, and are only created on every node.
 */
export const REQUEST_PATH_FUNCTIONS: readonly DelegatedFunction[] = [
  { name: 'sync.connect', scopeArgument: 'p_user', note: 'POST /sync/connect' },
  { name: 'sync.push_create', scopeArgument: 'p_user', note: 'POST /sync/push-sessions' },
  { name: 'sync.push_chunk', scopeArgument: 'p_user', note: 'POST /sync/push-sessions/{id}/chunks' },
  { name: 'sync.push_commit', scopeArgument: 'p_user', note: 'POST /sync/push-sessions/{id}/commit' },
  { name: 'sync.push_delete', scopeArgument: 'p_user', note: 'DELETE /sync/push-sessions/{id}' },
  { name: 'sync.pull_parts', scopeArgument: 'p_user', note: 'GET /sync/pull (layout 27 on)' },
  { name: 'sync.pull', scopeArgument: 'p_user', note: 'GET /sync/pull (builds before layout 27)' },
  { name: 'sync.committed_rows_parts', scopeArgument: 'p_user', note: 'GET /sync/committed-bundles/{seq}/rows (layout 27 on)' },
  { name: 'sync.committed_rows', scopeArgument: 'p_user', note: 'GET /sync/committed-bundles/{seq}/rows (builds before layout 27)' },
  { name: 'sync.watch_latest', scopeArgument: 'p_user', note: 'GET /sync/watch (each read of the long poll)' },
  { name: 'sync.snapshot_create', scopeArgument: 'p_user', note: 'POST /sync/snapshot-sessions' },
  { name: 'sync.snapshot_page_parts', scopeArgument: 'p_user', note: 'GET /sync/snapshot-sessions/{id} (layout 27 on)' },
  { name: 'sync.snapshot_page', scopeArgument: 'p_user', note: 'GET /sync/snapshot-sessions/{id} (builds before layout 27)' },
  { name: 'sync.snapshot_delete', scopeArgument: 'p_user', note: 'DELETE /sync/snapshot-sessions/{id}' },
  { name: 'sync.ws_connect', scopeArgument: 'p_user', note: 'WebSocket $connect' },
  { name: 'sync.ws_targets', scopeArgument: 'p_user', note: 'the connections a commit notifies' },
  {
    name: 'sync.ws_disconnect',
    scopeArgument: 'p_user',
    note: 'WebSocket $disconnect (after a lookup of the connection\'s user by its id) and 410 Gone (the notifier knows whose sockets it posted to)',
  },
  { name: 'sync.note_outcome', scopeArgument: 'p_user_id', note: 'after a conflict or a rejection' },
  { name: 'sync.user_status', scopeArgument: 'p_user_id', note: 'GET /syncx/users/{user_id}/status (operator, one user)' },
  { name: 'sync.first_unstorable_row', scopeArgument: 'p_user', note: 'after a data exception (rejection path)' },
  { name: 'sync.unstorable_column', scopeArgument: 'p_user', note: 'after a data exception (rejection path)' },
  { name: 'sync.server_bundle_begin', scopeArgument: 'p_user', inTransaction: true, note: 'server write API, inside the application transaction' },
  {
    name: 'sync.server_bundle_finish',
    scopeArgument: 'p_user',
    inTransaction: true,
    note: 'server write API: finds its bundle by (p_user, txid_current()), on the worker that holds the bundle context',
  },
  {
    name: 'sync.count',
    scopeArgument: 'p_user',
    note: 'the edge counts commit_outcome_unknown into the user\'s ledger, and counts kept while the database was unreachable into the ledger of the empty user id',
  },
];

/**
 * What keeps the layout from running on Citus although its tables and request functions are ready
 * (no blocker of citusPlan): runtime rules the catalog cannot show, each a finding the readiness
 * suite still records (test/scale-readiness.pg.test.ts, GLOBAL_EFFECT_FINDINGS). Bootstrap on
 * Citus refuses while any is open (./citus.ts); remove one with the change that clears it.
 */
export const CITUS_OPEN_ITEMS: readonly Blocker[] = [
  {
    id: 'sync.guard_managed:citus-writers',
    message: 'the sync tables\' guard admits a managed function on the call stack or the bootstrap lock of this backend (a pg_locks lookup); ' +
      'on a worker, the coordinator\'s writes into shards (create_distributed_table\'s copy, maintenance\'s multi-shard statements) carry neither: ' +
      'it needs a rule for Citus\'s own connections (a role only they use), never a string a caller can set',
  },
  {
    id: 'sync.notify_commit:per-worker',
    message: 'a commit NOTIFYs on the worker that runs it, and the commit feed LISTENs on one connection: it must listen on every worker, or the commit signal move off LISTEN/NOTIFY',
  },
  {
    id: 'sync.guard:refusal-counter',
    message: 'the guards count refused direct writes in the sequence sync.counter_rejected_direct_writes (the refusal rolls back, so no ledger row can count it); ' +
      'a sequence is one node\'s: it must exist on every worker, or the count move out of the database',
  },
];

/** A column of a table, as the catalog has it. */
export interface ColumnFacts {
  readonly name: string;
  readonly type: string;
  /** The column's collation name (`default` for the database's), null for non-collatable types. */
  readonly collation: string | null;
}

/** A unique index (primary keys included). */
export interface UniqueFacts {
  readonly name: string;
  readonly columns: readonly string[];
  readonly primary: boolean;
}

export interface ForeignKeyFacts {
  readonly name: string;
  readonly columns: readonly string[];
  /** `schema.table`. */
  readonly references: string;
  readonly referencedColumns: readonly string[];
}

export interface TableFacts {
  readonly schema: string;
  readonly table: string;
  readonly columns: readonly ColumnFacts[];
  readonly unique: readonly UniqueFacts[];
  readonly foreignKeys: readonly ForeignKeyFacts[];
}

export interface FunctionFacts {
  /** `sync.name`. */
  readonly name: string;
  /** As regprocedure prints it, e.g. `sync.pull(text,text,bigint,integer,bigint,bigint)`. */
  readonly signature: string;
  /** Input argument names, in order (empty strings for unnamed ones). */
  readonly argumentNames: readonly string[];
  readonly argumentTypes: readonly string[];
}

/** What the generator needs of a database. */
export interface LayoutFacts {
  /** Every table of the `sync` schema. */
  readonly syncTables: readonly TableFacts[];
  /** The registered tables, parents before children (the catalog's apply order). */
  readonly registeredTables: readonly TableFacts[];
  /** Every function of the `sync` schema. */
  readonly functions: readonly FunctionFacts[];
}

/** Why the layout is not ready for Citus, and what would make it so. */
export interface Blocker {
  /** Stable id, e.g. `sync.push_sessions:primary-key`. */
  readonly id: string;
  readonly message: string;
}

/** One statement of the plan; `table` names the table it distributes (bootstrap skips tables Citus already has). */
export interface CitusStatement {
  readonly sql: string;
  readonly table?: string;
}

export interface CitusPlan {
  readonly statements: readonly CitusStatement[];
  readonly blockers: readonly Blocker[];
}

const qualified = (t: { schema: string; table: string }): string => `${t.schema}.${t.table}`;

/** Unique indexes and primary keys that do not start with `column`. */
function notLeading(table: TableFacts, column: string): UniqueFacts[] {
  return table.unique.filter((u) => u.columns[0] !== column);
}

/** Referenced tables first, so a foreign key's target is distributed before its source (Citus requires it). */
function foreignKeyOrder(tables: readonly TableFacts[]): TableFacts[] {
  const byName = new Map(tables.map((t) => [qualified(t), t]));
  const out: TableFacts[] = [];
  const seen = new Set<string>();
  const visit = (t: TableFacts): void => {
    const name = qualified(t);
    if (seen.has(name)) return;
    seen.add(name);
    for (const fk of t.foreignKeys) {
      const target = byName.get(fk.references);
      if (target && target !== t) visit(target);
    }
    out.push(t);
  };
  tables.forEach(visit);
  return out;
}

/**
 * The blockers of the per-user `sync` tables: the distribution column present with the scope's
 * type and collation, every unique index (primary key included) leading with it, every foreign
 * key between them carrying it on both sides.
 */
function perUserBlockers(table: TableFacts, scope: ColumnFacts | undefined): Blocker[] {
  const name = qualified(table);
  const column = table.columns.find((c) => c.name === SYNC_DISTRIBUTION_COLUMN);
  const out: Blocker[] = [];
  if (!column) {
    out.push({ id: `${name}:distribution-column`, message: `${name} has no ${SYNC_DISTRIBUTION_COLUMN} column (text, the user's scope) to be distributed by` });
  } else if (scope && (column.type !== scope.type || column.collation !== scope.collation)) {
    out.push({
      id: `${name}:distribution-type`,
      message: `${name}.${SYNC_DISTRIBUTION_COLUMN} is ${column.type} (collation ${column.collation ?? 'none'}); the registered tables' ${SCOPE_COLUMN} is ${scope.type} (collation ${scope.collation ?? 'none'}): co-located tables need the same type and collation`,
    });
  }
  for (const u of notLeading(table, SYNC_DISTRIBUTION_COLUMN)) {
    out.push({
      id: `${name}:${u.primary ? 'primary-key' : `unique:${u.name}`}`,
      message: `${name}: ${u.primary ? 'primary key' : `unique index ${u.name}`} (${u.columns.join(', ')}) does not lead with ${SYNC_DISTRIBUTION_COLUMN}`,
    });
  }
  for (const fk of table.foreignKeys) {
    const i = fk.columns.indexOf(SYNC_DISTRIBUTION_COLUMN);
    if (i < 0 || fk.referencedColumns[i] !== SYNC_DISTRIBUTION_COLUMN) {
      out.push({ id: `${name}:foreign-key:${fk.name}`, message: `${name}: foreign key ${fk.name} (${fk.columns.join(', ')}) → ${fk.references} does not join on ${SYNC_DISTRIBUTION_COLUMN}` });
    }
  }
  return out;
}

/** Registered tables: the envelope already requires every unique index to include the scope; Citus needs exactly that. */
function registeredBlockers(table: TableFacts): Blocker[] {
  const name = qualified(table);
  return table.unique
    .filter((u) => !u.columns.includes(SCOPE_COLUMN))
    .map((u) => ({ id: `${name}:unique:${u.name}`, message: `${name}: unique index ${u.name} (${u.columns.join(', ')}) does not include ${SCOPE_COLUMN}` }));
}

function distributeFunction(fn: FunctionFacts, delegated?: DelegatedFunction): string {
  const signature = quoteLiteral(fn.signature);
  if (!delegated) return `SELECT create_distributed_function(${signature})`;
  return (
    `SELECT create_distributed_function(${signature}, ${quoteLiteral(delegated.scopeArgument)}, ` +
    `colocate_with => ${quoteLiteral(COLOCATION_ANCHOR)}${delegated.inTransaction ? ', force_delegation => true' : ''})`
  );
}

/**
 * The Citus statements for a layout, in the order they must run (run them in one transaction on
 * the coordinator, as bootstrap does), or the blockers that make it not ready. Statements are
 * generated for what is ready even when something is blocked, so a test can compare both with
 * what it expects; bootstrap runs none unless there is no blocker.
 */
export function citusPlan(facts: LayoutFacts): CitusPlan {
  const blockers: Blocker[] = [];
  const statements: CitusStatement[] = [
    // Lockstep's guards and capture are triggers; Citus refuses to distribute tables with triggers
    // unless this is on (transaction-local here: bootstrap's transaction).
    { sql: `SELECT set_config('citus.enable_unsafe_triggers', 'on', true)` },
  ];
  const scope = facts.registeredTables[0]?.columns.find((c) => c.name === SCOPE_COLUMN);
  for (const t of facts.registeredTables) {
    const other = t.columns.find((c) => c.name === SCOPE_COLUMN);
    if (scope && other && (other.type !== scope.type || other.collation !== scope.collation)) {
      blockers.push({ id: `${qualified(t)}:scope-type`, message: `${qualified(t)}.${SCOPE_COLUMN} is ${other.type} (collation ${other.collation ?? 'none'}), unlike the other registered tables` });
    }
  }

  const reference: TableFacts[] = [];
  const perUser: TableFacts[] = [];
  for (const t of facts.syncTables) {
    const role = SYNC_TABLE_ROLES[t.table];
    if (role === 'reference') reference.push(t);
    else if (role === 'per-user') {
      const found = perUserBlockers(t, scope);
      blockers.push(...found);
      if (found.length === 0) perUser.push(t);
    } else blockers.push({ id: `${qualified(t)}:unclassified`, message: `${qualified(t)} is not classified for Citus (core/scale/distribution.ts SYNC_TABLE_ROLES)` });
  }
  for (const missing of Object.keys(SYNC_TABLE_ROLES).filter((name) => !facts.syncTables.some((t) => t.table === name))) {
    blockers.push({ id: `sync.${missing}:missing`, message: `sync.${missing} is classified but does not exist` });
  }

  // Every managed function exists on every node (helpers and trigger functions run on the workers,
  // inside delegated calls and on shards); bodies are not checked at creation.
  const delegated = new Map(REQUEST_PATH_FUNCTIONS.map((d) => [d.name, d]));
  const functions = [...facts.functions].sort((a, b) => a.signature.localeCompare(b.signature));
  for (const fn of functions) if (!delegated.has(fn.name)) statements.push({ sql: distributeFunction(fn) });

  for (const t of reference) statements.push({ sql: `SELECT create_reference_table(${quoteLiteral(qualified(t))})`, table: qualified(t) });
  const anchor = perUser.find((t) => qualified(t) === COLOCATION_ANCHOR);
  if (anchor) {
    statements.push({ sql: `SELECT create_distributed_table(${quoteLiteral(COLOCATION_ANCHOR)}, ${quoteLiteral(SYNC_DISTRIBUTION_COLUMN)}, colocate_with => 'none')`, table: COLOCATION_ANCHOR });
    for (const t of foreignKeyOrder(perUser).filter((x) => x !== anchor)) {
      statements.push({ sql: `SELECT create_distributed_table(${quoteLiteral(qualified(t))}, ${quoteLiteral(SYNC_DISTRIBUTION_COLUMN)}, colocate_with => ${quoteLiteral(COLOCATION_ANCHOR)})`, table: qualified(t) });
    }
    for (const t of foreignKeyOrder(facts.registeredTables)) {
      const found = registeredBlockers(t);
      blockers.push(...found);
      if (found.length === 0) {
        statements.push({ sql: `SELECT create_distributed_table(${quoteLiteral(qualified(t))}, ${quoteLiteral(SCOPE_COLUMN)}, colocate_with => ${quoteLiteral(COLOCATION_ANCHOR)})`, table: qualified(t) });
      }
    }
  } else {
    blockers.push({ id: `${COLOCATION_ANCHOR}:anchor`, message: `${COLOCATION_ANCHOR}, the co-location anchor, cannot be distributed by ${SYNC_DISTRIBUTION_COLUMN} yet, so no other table or function can be co-located` });
    for (const t of facts.registeredTables) blockers.push(...registeredBlockers(t));
  }

  for (const d of REQUEST_PATH_FUNCTIONS) {
    const overloads = functions.filter((f) => f.name === d.name);
    if (overloads.length === 0) {
      blockers.push({ id: `${d.name}:missing`, message: `${d.name} is listed as a request-path function but does not exist` });
      continue;
    }
    for (const fn of overloads) {
      const index = fn.argumentNames.indexOf(d.scopeArgument);
      if (index < 0) {
        blockers.push({ id: `${fn.signature}:scope-argument`, message: `${fn.signature} has no ${d.scopeArgument} argument to be delegated by (${d.note})` });
        statements.push({ sql: distributeFunction(fn) });
        continue;
      }
      if (scope && fn.argumentTypes[index] !== scope.type) {
        blockers.push({ id: `${fn.signature}:scope-type`, message: `${fn.signature}: ${d.scopeArgument} is ${fn.argumentTypes[index]}, the scope is ${scope.type}` });
      }
      statements.push({ sql: anchor ? distributeFunction(fn, d) : distributeFunction(fn) });
    }
  }
  return { statements, blockers };
}
