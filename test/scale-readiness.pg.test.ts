/**
 * Issue 28: is the layout ready to be distributed on Citus (docs/scale-out.md)? Proven on plain
 * PostgreSQL, against the layout bootstrap really creates, by four checks:
 *   1. every per-user `sync` table's primary key and unique indexes lead with the distribution
 *      column (`user_id`, the user's scope as text, like the registered tables' `_sync_scope_id`);
 *   2. every request-path function takes the user's scope as an argument, and every scan of a
 *      per-user table its statements run has the user in its index condition (the plans of a
 *      scenario that calls each of them, nested statements included, seq scans disabled);
 *   3. no request-path statement advances a sequence, writes a table that has no user column, or
 *      takes a global lock (the scenario's effects, and the bodies of everything it can call);
 *   4. every name in a managed body is schema-qualified (the scenario runs with search_path = '',
 *      and every body is read for unqualified calls and relations).
 * Where the layout fails a check today, the case is named "not yet" with its reason and asserts that
 * the finding still holds (never a skip: CI counts a skip as a failure), and a ratchet test pins
 * exactly today's findings: a new finding (a regression) fails it, and so does a fixed one until its
 * entry here is removed. The layout change each finding needs is in docs/scale-out.md
 * ("What the layout must change").
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { startTestServer, type TestServer } from './support/server.js';
import { planRecorder, nodesOf, type ExecutedPlan, type PlanNode, type PlanRecorder } from './support/plans.js';
import { calledFunctions, globalEffects, unqualifiedNames } from './support/sql-bodies.js';
import { CITUS_OPEN_ITEMS, citusPlan, REQUEST_PATH_FUNCTIONS, SYNC_DISTRIBUTION_COLUMN, SYNC_TABLE_ROLES, type Blocker, type LayoutFacts } from '../core/scale/distribution.js';
import { readLayoutFacts } from '../core/scale/layout-facts.js';
import { distributeOnCitus } from '../core/scale/citus.js';

/**
 * A readiness case: with no recorded finding the check must pass; with one ("not yet") the check must
 * still fail, so the day the layout clears it this case fails until the finding is removed here.
 */
function readiness(name: string, known: string | undefined, check: () => void): void {
  if (!known) {
    it(name, check);
    return;
  }
  it(`${name} — not yet: ${known}`, () => {
    expect(check, 'the layout now passes this check: remove its finding from this file and docs/scale-out.md').toThrow();
  });
}

// The findings of today's layout, each with the change that clears it (docs/scale-out.md). Layout
// 18 keyed every per-user table by user_id (the user's scope as text, as the registered tables'
// _sync_scope_id) and took every global sequence off the request path, which cleared checks 1,
// 2 and most of 3. What holds is not in the tables or the request functions' statements but in
// three runtime rules, each also a blocker bootstrap names on Citus (CITUS_OPEN_ITEMS).

/** Check 1: per-user tables whose keys do not lead with user_id, and the change each needs. */
const KEY_FINDINGS: Readonly<Record<string, string>> = {};

/** Check 2a: request-path functions without a scope argument. */
const SCOPE_ARGUMENT_FINDINGS: Readonly<Record<string, string>> = {};

/** Check 2b: per-user tables scanned without the user in the index condition, and why. */
const SCAN_FINDINGS: Readonly<Record<string, string>> = {};

/** Check 3: sequences the scenario advances, tables without a user column it writes, global effects in reachable bodies. */
const SEQUENCE_FINDINGS: readonly string[] = [];
const GLOBAL_WRITE_FINDINGS: readonly string[] = [];
const GLOBAL_EFFECT_FINDINGS: readonly string[] = [
  // The guards count refused direct writes, whose transactions roll back (so no ledger row can
  // count them): only on the refusal path, never reached by a request (sync.counter_rejected_direct_writes).
  'sync.guard: nextval(sync.counter_rejected_direct_writes)',
  'sync.guard_bundle_context: nextval(sync.counter_rejected_direct_writes)',
  'sync.guard_managed: nextval(sync.counter_rejected_direct_writes)',
  // Bootstrap's lock, looked up only when no managed function is on the stack (not on the request
  // path); on a worker the coordinator's writes carry neither (sync.guard_managed:citus-writers).
  'sync.guard_managed: reads pg_locks',
  // NOTIFY takes PostgreSQL's cluster-wide notify lock from pre-commit to the end of the commit;
  // on Citus it is raised on the user's worker (sync.notify_commit:per-worker).
  'sync.notify_commit: pg_notify(lockstep_commit)',
];

/** Check 4: unqualified names in managed bodies (none today). */
const NAME_FINDINGS: readonly string[] = [];

const PER_USER_TABLES = Object.entries(SYNC_TABLE_ROLES).filter(([, role]) => role === 'per-user').map(([t]) => `sync.${t}`);
/** The columns that identify a user in a table: what its scans must be narrowed by. */
const USER_COLUMNS = ['user_id', '_sync_scope_id'];
/** Trigger functions that fire on the request path (on business tables and sync tables). */
const TRIGGER_FUNCTIONS = ['sync.guard', 'sync.capture', 'sync.guard_managed', 'sync.guard_bundle_context', 'sync.check_bundle_finished', 'sync.notify_commit'];

const MAX_BUDGET = 4 * 1024 * 1024;

interface Scenario {
  readonly plans: ExecutedPlan[];
  readonly sequencesAdvanced: string[];
  readonly tablesWritten: Map<string, number>;
}

/** Every request-path function called as the edge calls it, on one connection, with search_path = ''. */
async function runScenario(client: pg.Client, tables: Map<string, number>): Promise<void> {
  const call = async <T = any>(text: string, values: unknown[] = []): Promise<T> => (await client.query(text, values)).rows[0] as T;
  const user = 'ready-user';
  const source = 'ready-dev';
  const lists = tables.get('app.lists') as number;
  const items = tables.get('app.items') as number;
  const kinds = tables.get('app.kinds') as number;
  const answer = async (fn: string, args: string, values: unknown[]): Promise<any> => (await call(`SELECT ${fn}(${args}) AS a`, values)).a;
  let sbid = 0;
  const push = async (rows: unknown[]): Promise<{ pushId: string; commit: any }> => {
    sbid++;
    const created = await answer('sync.push_create', '$1, $2, $3, $4, NULL, NULL, 900', [user, source, sbid, rows.length]);
    expect(created, JSON.stringify(created)).toMatchObject({ status: 'staging' });
    const chunk = await answer('sync.push_chunk', '$1, $2, $3::uuid, 0, $4::jsonb, 1000, $5, 67108864', [user, source, created.push_id, JSON.stringify(rows), `digest-${sbid}`]);
    expect(chunk, JSON.stringify(chunk)).toMatchObject({ next_expected_row_ordinal: rows.length });
    const commit = await answer('sync.push_commit', '$1, $2, $3::uuid, 100, 10000', [user, source, created.push_id]);
    if (commit.status !== 'committed') sbid--; // a refused bundle consumes nothing
    return { pushId: created.push_id, commit };
  };
  const list = '11111111-1111-4111-8111-111111111111';
  const item = '22222222-2222-4222-8222-222222222222';

  expect(await answer('sync.connect', '$1, $2, false, 900', [user, source])).toMatchObject({ resolution: 'initialize_empty' });
  // A commit of inserts (capture, finalize, row state, the commit signal).
  const first = await push([
    { t: lists, k: list, o: 1, b: 0, p: { title: 'groceries', position: 1 } },
    { t: items, k: item, o: 1, b: 0, p: { list_id: list, body: 'milk', done: false } },
  ]);
  expect(first.commit).toMatchObject({ status: 'committed', bundle_seq: 1 });
  // A conflict (the server row is looked up), then its note.
  const conflict = await push([{ t: lists, k: list, o: 2, b: 7, p: { title: 'stale', position: 1 } }]);
  expect(conflict.commit).toMatchObject({ error: 'push_conflict' });
  await call(`SELECT sync.note_outcome($1, $2, 'conflict', '{}'::jsonb)`, [user, source]);
  // An update and a delete (the delete SQL and the cascade).
  expect((await push([
    { t: lists, k: list, o: 2, b: 1, p: { title: 'groceries!', position: 2 } },
    { t: items, k: item, o: 3, b: 1, p: null },
  ])).commit).toMatchObject({ status: 'committed', bundle_seq: 2 });
  // A rejection by a foreign key, and one by a value PostgreSQL cannot store (row and column search).
  expect((await push([{ t: items, k: '33333333-3333-4333-8333-333333333333', o: 1, b: 0, p: { list_id: '44444444-4444-4444-8444-444444444444', body: 'orphan' } }])).commit)
    .toMatchObject({ error: 'push_rejected' });
  const unstorable = await push([{ t: kinds, k: 'k1', o: 1, b: 0, p: { big: 'not a number' } }]);
  expect(unstorable.commit).toMatchObject({ error: 'push_rejected' });
  const key = (await call(`SELECT sync.first_unstorable_row($1, $2::uuid, $3::smallint) AS k`, [user, unstorable.pushId, kinds])).k;
  expect(key).not.toBeNull();
  expect((await call(`SELECT sync.unstorable_column($1, $2::uuid, $3::smallint, $4::bytea) AS c`, [user, unstorable.pushId, kinds, key])).c).toBe('big');
  await call(`SELECT sync.push_delete($1, $2, $3::uuid)`, [user, source, unstorable.pushId]);
  // Reads: the long poll's read, pull, a committed bundle's rows, a snapshot (create, page, delete).
  expect(Number((await call(`SELECT sync.watch_latest($1) AS latest`, [user])).latest)).toBeGreaterThan(0);
  expect((await call(`SELECT error, body FROM sync.pull($1, $2, 0, 100, NULL, $3)`, [user, source, MAX_BUDGET])).error).toBeNull();
  expect((await call(`SELECT error, body FROM sync.committed_rows($1, 1, 0, 1000, $2)`, [user, MAX_BUDGET])).error).toBeNull();
  const snapshot = await answer('sync.snapshot_create', '$1, $2, NULL, NULL, NULL, 900', [user, 'ready-dev-2']);
  expect(snapshot, JSON.stringify(snapshot)).toMatchObject({ row_count: 1 });
  expect((await call(`SELECT error FROM sync.snapshot_page($1, $2::uuid, 0, 5000, $3)`, [user, snapshot.snapshot_id, MAX_BUDGET])).error).toBeNull();
  await call(`SELECT sync.snapshot_delete($1, $2::uuid)`, [user, snapshot.snapshot_id]);
  // Push notifications: a socket registered, the targets of a commit, a disconnect.
  await call(`SELECT sync.ws_connect($1, $2, 'conn-1', 7200, 32)`, [user, source]);
  expect((await client.query(`SELECT * FROM sync.ws_targets($1)`, [user])).rows).toHaveLength(1);
  await call(`SELECT sync.ws_disconnect($1, ARRAY['conn-1'])`, [user]);
  // The server write API, inside the application's transaction.
  await client.query('BEGIN');
  await call(`SELECT sync.server_bundle_begin($1, 'server:ready')`, [user]);
  await client.query(`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES (gen_random_uuid(), $1, 'from the server')`, [user]);
  expect((await call(`SELECT sync.server_bundle_finish($1, 10000) AS a`, [user])).a).toMatchObject({ bundle_seq: 3 });
  await client.query('COMMIT');
  // The operator's view of one user.
  expect((await call(`SELECT sync.user_status($1, 10) AS s`, [user])).s).toMatchObject({ user_id: user });
}

/** The user-column equality a scan's index condition must carry. */
function narrowedByUser(node: PlanNode): boolean {
  const cond = `${node['Index Cond'] ?? ''} ${node['Recheck Cond'] ?? ''}`;
  return USER_COLUMNS.some((c) => new RegExp(`\\b${c}\\s*=|=\\s*(?:\\w+\\.)?${c}\\b`).test(cond));
}

function perUserRelation(node: PlanNode, registered: ReadonlySet<string>): string | undefined {
  const relation = node['Relation Name'];
  const schema = (node as PlanNode & { Schema?: string }).Schema;
  if (!relation) return undefined;
  // auto_explain's JSON names the relation without its schema; sync and app names do not overlap.
  const name = PER_USER_TABLES.includes(`sync.${relation}`) && schema !== 'app' ? `sync.${relation}` : [...registered].find((r) => r.endsWith(`.${relation}`));
  return name;
}

describe('scale-out readiness: the layout bootstrap creates, checked for Citus', () => {
  let s: TestServer;
  let recorder: PlanRecorder;
  let facts: LayoutFacts;
  let blockers: readonly Blocker[];
  let scenario: Scenario;
  let bodies: Map<string, string>;
  let builtins: Set<string>;
  /** pg_catalog's relations: always on the search path, so unqualified they still resolve. */
  let catalogRelations: Set<string>;

  beforeAll(async () => {
    s = await startTestServer();
    facts = await readLayoutFacts(s.t.db);
    blockers = citusPlan(facts).blockers;
    const tableIds = new Map((await s.t.exec(`SELECT schema_name || '.' || table_name AS name, table_id FROM sync.table_catalog`)).rows.map((r) => [r.name as string, r.table_id as number]));
    builtins = new Set((await s.t.exec(`SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace`)).rows.map((r) => r.proname as string));
    catalogRelations = new Set((await s.t.exec(`SELECT relname FROM pg_class WHERE relnamespace = 'pg_catalog'::regnamespace`)).rows.map((r) => r.relname as string));
    bodies = new Map((await s.t.exec(`SELECT 'sync.' || proname AS name, prosrc FROM pg_proc WHERE pronamespace = 'sync'::regnamespace`)).rows.map((r) => [r.name as string, r.prosrc as string]));
    for (const r of (await s.t.exec(`SELECT schema_name || '.' || table_name AS t, capture_new_sql, capture_old_sql, capture_keychange_sql, upsert_sql, delete_sql, snapshot_sql, lookup_sql, hash_rows_sql, request_rows_sql FROM sync.table_catalog`)).rows) {
      for (const [column, text] of Object.entries(r)) if (column !== 't') bodies.set(`catalog ${r.t as string} ${column}`, text as string);
    }

    const sequences = async (): Promise<Map<string, string>> =>
      new Map((await s.t.exec(`SELECT schemaname || '.' || sequencename AS name, coalesce(last_value::text, '-') AS v FROM pg_sequences WHERE schemaname = 'sync'`)).rows.map((r) => [r.name as string, r.v as string]));
    const writes = async (): Promise<Map<string, number>> =>
      new Map((await s.t.exec(`SELECT schemaname || '.' || relname AS name, n_tup_ins + n_tup_upd + n_tup_del AS n FROM pg_stat_user_tables WHERE schemaname IN ('sync', 'app')`)).rows.map((r) => [r.name as string, Number(r.n)]));
    recorder = await planRecorder(s.t.url);
    await recorder.client.query(`SET search_path = ''; SET enable_seqscan = off`);
    const seq0 = await sequences();
    const w0 = await writes();
    const plans = await recorder.record((client) => runScenario(client, tableIds));
    await recorder.client.query('SELECT pg_stat_force_next_flush()');
    const seq1 = await sequences();
    const w1 = await writes();
    scenario = {
      plans,
      sequencesAdvanced: [...seq1].filter(([name, v]) => seq0.get(name) !== v).map(([name]) => name).sort(),
      tablesWritten: new Map([...w1].map(([name, n]) => [name, n - (w0.get(name) ?? 0)] as [string, number]).filter(([, n]) => n > 0)),
    };
  });
  afterAll(async () => {
    await recorder?.close();
    await s?.close();
  });

  it('without the citus extension (as here: no package for PostgreSQL 16/17 on this machine kind), bootstrap distributes nothing', async () => {
    expect(await distributeOnCitus(s.t.db)).toBe('absent');
  });

  it('bootstrap on Citus refuses exactly while a readiness finding holds: the layout\'s own blockers are gone, the open runtime items stand', () => {
    const findings = [KEY_FINDINGS, SCOPE_ARGUMENT_FINDINGS, SCAN_FINDINGS].some((f) => Object.keys(f).length > 0) ||
      [SEQUENCE_FINDINGS, GLOBAL_WRITE_FINDINGS, GLOBAL_EFFECT_FINDINGS, NAME_FINDINGS].some((f) => f.length > 0);
    expect(blockers).toEqual([]);
    expect(CITUS_OPEN_ITEMS.length > 0, 'remove CITUS_OPEN_ITEMS (core/scale/distribution.ts) only when every finding here is cleared').toBe(findings);
    // Each open item names the finding it stands for.
    for (const item of CITUS_OPEN_ITEMS) expect(GLOBAL_EFFECT_FINDINGS.some((f) => f.startsWith(`${item.id.split(':')[0] as string}:`)), item.id).toBe(true);
  });

  describe('1. every per-user sync table is keyed by the user first', () => {
    const keyBlockers = (table: string): string[] => blockers.filter((b) => b.id.startsWith(`${table}:`)).map((b) => b.message);
    for (const table of PER_USER_TABLES) {
      const known = KEY_FINDINGS[table];
      readiness(`${table}: ${SYNC_DISTRIBUTION_COLUMN} text is its distribution column, and its primary key, unique indexes and foreign keys lead with it`, known, () => {
        expect(keyBlockers(table)).toEqual([]);
      });
    }
    it('registered tables: every unique index includes _sync_scope_id, of one type and collation (the envelope already requires it)', () => {
      expect(blockers.filter((b) => facts.registeredTables.some((t) => b.id.startsWith(`${t.schema}.${t.table}:`)))).toEqual([]);
    });
    it('ratchet: the per-user tables with key findings are exactly the recorded ones', () => {
      const found = PER_USER_TABLES.filter((t) => keyBlockers(t).length > 0);
      expect(found.sort()).toEqual(Object.keys(KEY_FINDINGS).sort());
    });
    it('the live layout distributes its sync tables and delegates its request functions as the recorded target layout does (test/fixtures/citus/target-layout.sql)', () => {
      const recorded = readFileSync(new URL('./fixtures/citus/target-layout.sql', import.meta.url), 'utf8').split('\n');
      const live = citusPlan(facts).statements.map((st) => `${st.sql};`);
      const tables = (lines: readonly string[]): string[] => lines.filter((l) => /create_(distributed|reference)_table\('sync\./.test(l)).sort();
      const delegated = (lines: readonly string[]): string[] => lines.flatMap((l) => {
        const m = /create_distributed_function\('(sync\.[a-z_]+)\(.*?\)', '(\w+)'(.*)\);$/.exec(l);
        return m ? [`${m[1] as string} by ${m[2] as string}${m[3] as string}`] : [];
      }).sort();
      expect(tables(live)).toEqual(tables(recorded));
      expect(delegated(live)).toEqual(delegated(recorded));
    });
    it('every sync table is classified as per-user or reference', () => {
      expect(blockers.filter((b) => b.id.endsWith(':unclassified') || b.id.endsWith(':missing')).map((b) => b.message)).toEqual([]);
    });
  });

  describe('2. request-path functions take the user and touch only that user\'s rows', () => {
    for (const d of REQUEST_PATH_FUNCTIONS) {
      const known = SCOPE_ARGUMENT_FINDINGS[d.name];
      readiness(`${d.name} takes the scope as ${d.scopeArgument} (text)`, known, () => {
        const fn = facts.functions.find((f) => f.name === d.name);
        expect(fn, `${d.name} exists`).toBeDefined();
        const i = fn?.argumentNames.indexOf(d.scopeArgument) ?? -1;
        expect(i, `${d.name} has ${d.scopeArgument}`).toBeGreaterThanOrEqual(0);
        expect(fn?.argumentTypes[i]).toBe('text');
      });
    }
    it('ratchet: the functions without a scope argument are exactly the recorded ones', () => {
      const found = REQUEST_PATH_FUNCTIONS.filter((d) => {
        const fn = facts.functions.find((f) => f.name === d.name);
        return !fn || !fn.argumentNames.includes(d.scopeArgument);
      }).map((d) => d.name);
      expect(found.sort()).toEqual(Object.keys(SCOPE_ARGUMENT_FINDINGS).sort());
    });

    const scans = (): Map<string, Set<string>> => {
      const registered = new Set(facts.registeredTables.map((t) => `${t.schema}.${t.table}`));
      const out = new Map<string, Set<string>>();
      for (const p of scenario.plans) {
        for (const node of nodesOf(p.plan)) {
          if (!/Scan$/.test(node['Node Type']) || node['Node Type'] === 'Bitmap Heap Scan') continue;
          const table = perUserRelation(node, registered);
          if (!table || narrowedByUser(node)) continue;
          const how = node['Index Name'] ? `${node['Node Type']} of ${node['Index Name']} on (${node['Index Cond'] ?? ''})` : node['Node Type'];
          const set = out.get(table) ?? new Set<string>();
          set.add(how);
          out.set(table, set);
        }
      }
      return out;
    };
    it('the scenario ran every request-path function (its plans were recorded)', () => {
      const ran = new Set(scenario.plans.flatMap((p) => [...p.query.matchAll(/sync\.([a-z_]+)\(/g)].map((m) => `sync.${m[1] as string}`)));
      expect(REQUEST_PATH_FUNCTIONS.map((d) => d.name).filter((n) => !ran.has(n))).toEqual([]);
    });
    for (const table of [...PER_USER_TABLES, 'registered tables']) {
      const known = SCAN_FINDINGS[table];
      readiness(`every scan of ${table} has the user in its index condition`, known, () => {
        const found = scans();
        const mine = table === 'registered tables' ? [...found].filter(([t]) => !t.startsWith('sync.')) : [...found].filter(([t]) => t === table);
        expect(mine.map(([t, how]) => `${t}: ${[...how].join('; ')}`)).toEqual([]);
      });
    }
    it('ratchet: the tables scanned without the user are exactly the recorded ones', () => {
      expect([...scans().keys()].sort()).toEqual(Object.keys(SCAN_FINDINGS).sort());
    });
  });

  describe('3. no request-path statement reads or writes a global counter, sequence or lock', () => {
    const reachable = (): string[] => {
      const known = new Set(facts.functions.map((f) => f.name));
      const seen = new Set<string>();
      const todo = [...REQUEST_PATH_FUNCTIONS.map((d) => d.name), ...TRIGGER_FUNCTIONS];
      while (todo.length > 0) {
        const fn = todo.pop() as string;
        if (seen.has(fn) || !bodies.has(fn)) continue;
        seen.add(fn);
        todo.push(...calledFunctions(bodies.get(fn) as string, known));
      }
      for (const name of bodies.keys()) if (name.startsWith('catalog ')) seen.add(name);
      return [...seen].sort();
    };
    const effects = (): string[] =>
      [...new Set(reachable().flatMap((name) => globalEffects(bodies.get(name) as string).map((e) => `${name.replace(/^catalog (\S+) \S+$/, 'catalog SQL of $1')}: ${e}`)))].sort();
    readiness('the scenario advances no sequence', SEQUENCE_FINDINGS.join(', ') || undefined, () => {
      expect(scenario.sequencesAdvanced).toEqual([]);
    });
    it('ratchet: the sequences the scenario advances are exactly the recorded ones', () => {
      expect(scenario.sequencesAdvanced).toEqual([...SEQUENCE_FINDINGS].sort());
    });
    const globalWrites = (): string[] => {
      const withUser = new Set([...facts.syncTables, ...facts.registeredTables].filter((t) => t.columns.some((c) => USER_COLUMNS.includes(c.name))).map((t) => `${t.schema}.${t.table}`));
      return [...scenario.tablesWritten.keys()].filter((t) => !withUser.has(t)).sort();
    };
    readiness('the scenario writes no table without a user column', GLOBAL_WRITE_FINDINGS.join(', ') || undefined, () => {
      expect(globalWrites()).toEqual([]);
    });
    it('ratchet: the tables without a user column the scenario writes are exactly the recorded ones', () => {
      expect(scenario.tablesWritten.size).toBeGreaterThan(0);
      expect(globalWrites()).toEqual([...GLOBAL_WRITE_FINDINGS].sort());
    });
    readiness('no body the request path can reach uses a sequence, an advisory lock, LOCK TABLE, NOTIFY or pg_locks', GLOBAL_EFFECT_FINDINGS.length ? 'see the ratchet' : undefined, () => {
      expect(effects()).toEqual([]);
    });
    it('ratchet: the global effects in reachable bodies are exactly the recorded ones', () => {
      expect(effects()).toEqual([...GLOBAL_EFFECT_FINDINGS].sort());
    });
  });

  describe('4. every name in a managed body is schema-qualified', () => {
    it('the whole scenario ran with search_path = \'\' (pg_catalog only): nothing it reached needed a search path', () => {
      // beforeAll ran it; reaching here means no statement failed for a name it could not find.
      expect(scenario.plans.length).toBeGreaterThan(50);
    });
    const findings = (): string[] => [...bodies].flatMap(([name, text]) =>
      unqualifiedNames(text, builtins, new Set(['lockstep_new', 'lockstep_old', ...catalogRelations])).map((f) => `${name}: ${f.kind} ${f.name}`)).sort();
    readiness('no managed body calls a function or names a relation outside pg_catalog without its schema', NAME_FINDINGS.length ? 'see the ratchet' : undefined, () => {
      expect(findings()).toEqual([]);
    });
    it('ratchet: the unqualified names are exactly the recorded ones', () => {
      expect(findings()).toEqual([...NAME_FINDINGS].sort());
    });
  });
});
