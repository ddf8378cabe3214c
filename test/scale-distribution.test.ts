/**
 * The Citus statements (core/scale/distribution.ts) for the layout the scale-out design targets
 * (docs/scale-out.md): every per-user sync table keyed by user_id first, every request function
 * taking the user. Compared with a recorded expectation (test/fixtures/citus/target-layout.sql),
 * which docs/scale-out.md reviews against Citus's documentation and source; it has not run on
 * Citus. `LOCKSTEP_RECORD_CITUS=1` rewrites the recording after a deliberate change. Also: the
 * generator refuses what Citus would refuse (a key without the distribution column, mismatched
 * types, a request function without its scope argument, an unclassified table).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { citusPlan, REQUEST_PATH_FUNCTIONS, SYNC_TABLE_ROLES, type FunctionFacts, type LayoutFacts, type TableFacts } from '../core/scale/distribution.js';

const FIXTURE = new URL('./fixtures/citus/target-layout.sql', import.meta.url);

const text = (name: string) => ({ name, type: 'text', collation: 'default' });
const other = (name: string, type = 'bigint') => ({ name, type, collation: null });

/** A table of the target layout: user_id first in every key, foreign keys to user_state on user_id. */
function syncTable(table: string, key: string[], options: { unique?: string[][]; fk?: boolean } = {}): TableFacts {
  return {
    schema: 'sync',
    table,
    columns: [text('user_id'), ...key.filter((k) => k !== 'user_id').map((k) => other(k))],
    unique: [{ name: `${table}_pkey`, columns: key, primary: true }, ...(options.unique ?? []).map((u, i) => ({ name: `${table}_key${i}`, columns: u, primary: false }))],
    foreignKeys: options.fk ? [{ name: `${table}_user_id_fkey`, columns: ['user_id'], references: 'sync.user_state', referencedColumns: ['user_id'] }] : [],
  };
}

function referenceTable(table: string, key: string): TableFacts {
  return { schema: 'sync', table, columns: [other(key, 'text')], unique: [{ name: `${table}_pkey`, columns: [key], primary: true }], foreignKeys: [] };
}

function registered(table: string, key: string, parent?: string): TableFacts {
  return {
    schema: 'app',
    table,
    columns: [other(key, 'uuid'), text('_sync_scope_id')],
    unique: [{ name: `${table}_pkey`, columns: ['_sync_scope_id', key], primary: true }],
    foreignKeys: parent ? [{ name: `${table}_parent_fkey`, columns: ['_sync_scope_id', 'parent_id'], references: `app.${parent}`, referencedColumns: ['_sync_scope_id', 'id'] }] : [],
  };
}

const fn = (name: string, args: [string, string][]): FunctionFacts => ({
  name,
  signature: `${name}(${args.map(([, t]) => t).join(',')})`,
  argumentNames: args.map(([n]) => n),
  argumentTypes: args.map(([, t]) => t),
});

/** The target layout (docs/scale-out.md, "What the layout must change"). */
function targetLayout(): LayoutFacts {
  const syncTables: TableFacts[] = [
    referenceTable('meta', 'key'),
    referenceTable('table_catalog', 'table_id'),
    referenceTable('counter_totals', 'name'),
    syncTable('user_state', ['user_id']),
    syncTable('scope_state', ['user_id'], { fk: true }),
    syncTable('source_state', ['user_id', 'source_id'], { fk: true }),
    syncTable('row_state', ['user_id', 'table_id', 'key_bytes']),
    syncTable('bundle_log', ['user_id', 'bundle_seq'], { unique: [['user_id', 'source_id', 'source_bundle_id']] }),
    syncTable('bundle_rows', ['user_id', 'bundle_seq', 'row_ordinal']),
    syncTable('push_sessions', ['user_id', 'push_id']),
    syncTable('push_session_rows', ['user_id', 'push_id', 'row_ordinal'], { unique: [['user_id', 'push_id', 'table_id', 'key_bytes']] }),
    syncTable('snapshot_sessions', ['user_id', 'snapshot_id']),
    syncTable('snapshot_session_rows', ['user_id', 'snapshot_id', 'row_ordinal']),
    syncTable('snapshot_data', ['user_id', 'data_id']),
    syncTable('snapshot_chunks', ['user_id', 'data_id', 'first_ordinal']),
    syncTable('user_quota', ['user_id']),
    syncTable('user_outcomes', ['user_id']),
    syncTable('ws_connections', ['user_id', 'connection_id'], { fk: true }),
    syncTable('bundle_context', ['user_id', 'xact']),
    { ...syncTable('capture_rows', ['user_id', 'xact', 'capture_id']), unique: [] },
    { ...syncTable('counter_deltas', ['user_id', 'name']), unique: [] },
  ];
  const scope: [string, string] = ['p_user', 'text'];
  const functions: FunctionFacts[] = [
    ...REQUEST_PATH_FUNCTIONS.map((d) => fn(d.name, [[d.scopeArgument, 'text'], ['p_other', 'integer']])),
    fn('sync.ensure_user', [scope]),
    fn('sync.finalize_bundle', [scope, ['p_seq', 'bigint']]),
    fn('sync.capture', []),
    fn('sync.guard', []),
    fn('sync.layout_state', []),
    fn('sync.maintenance_step', [['p_batch', 'integer']]),
  ];
  return { syncTables, registeredTables: [registered('lists', 'id'), registered('items', 'id', 'lists')], functions };
}

describe('the Citus statements for the target layout', () => {
  it('every per-user table, registered table and request function of the target layout is ready (no blocker)', () => {
    expect(citusPlan(targetLayout()).blockers).toEqual([]);
  });

  it('match the recorded expectation (reference tables, the anchor, co-located tables in foreign-key order, delegated functions)', () => {
    const sql = `${citusPlan(targetLayout()).statements.map((s) => `${s.sql};`).join('\n')}\n`;
    if (process.env['LOCKSTEP_RECORD_CITUS'] === '1') writeFileSync(FIXTURE, sql);
    expect(sql).toBe(readFileSync(FIXTURE, 'utf8'));
  });

  it('the server write API is force-delegated (it runs inside the application\'s transaction); nothing else is', () => {
    const forced = citusPlan(targetLayout()).statements.filter((s) => s.sql.includes('force_delegation')).map((s) => /'(sync\.[a-z_]+)\(/.exec(s.sql)?.[1]);
    expect(forced.sort()).toEqual(['sync.server_bundle_begin', 'sync.server_bundle_finish']);
  });

  it('every classified sync table is in the target layout', () => {
    expect(targetLayout().syncTables.map((t) => t.table).sort()).toEqual(Object.keys(SYNC_TABLE_ROLES).sort());
  });
});

describe('what the generator refuses, as Citus would', () => {
  const ids = (facts: LayoutFacts): string[] => citusPlan(facts).blockers.map((b) => b.id);
  const withTable = (facts: LayoutFacts, table: TableFacts): LayoutFacts => ({ ...facts, syncTables: facts.syncTables.map((t) => (t.table === table.table ? table : t)) });

  it('a primary key or unique index that does not lead with user_id', () => {
    const facts = targetLayout();
    const pushSessions = facts.syncTables.find((t) => t.table === 'push_sessions') as TableFacts;
    expect(ids(withTable(facts, { ...pushSessions, unique: [{ name: 'push_sessions_pkey', columns: ['push_id'], primary: true }] }))).toEqual(['sync.push_sessions:primary-key']);
  });

  it('a distribution column of another type or collation than the registered tables\' scope', () => {
    const facts = targetLayout();
    const rowState = facts.syncTables.find((t) => t.table === 'row_state') as TableFacts;
    const changed = { ...rowState, columns: rowState.columns.map((c) => (c.name === 'user_id' ? { ...c, collation: 'C' } : c)) };
    expect(ids(withTable(facts, changed))).toEqual(['sync.row_state:distribution-type']);
  });

  it('a per-user table without user_id, whose absence also blocks everything co-located with the anchor', () => {
    const facts = targetLayout();
    const userState = facts.syncTables.find((t) => t.table === 'user_state') as TableFacts;
    const found = ids(withTable(facts, { ...userState, columns: [{ name: 'user_pk', type: 'bigint', collation: null }], unique: [{ name: 'user_state_pkey', columns: ['user_pk'], primary: true }] }));
    expect(found).toEqual(expect.arrayContaining(['sync.user_state:distribution-column', 'sync.user_state:primary-key', 'sync.user_state:anchor']));
  });

  it('a foreign key between per-user tables that does not join on user_id', () => {
    const facts = targetLayout();
    const scope = facts.syncTables.find((t) => t.table === 'scope_state') as TableFacts;
    const changed = { ...scope, foreignKeys: [{ name: 'scope_state_fkey', columns: ['user_pk'], references: 'sync.user_state', referencedColumns: ['user_pk'] }] };
    expect(ids(withTable(facts, changed))).toEqual(['sync.scope_state:foreign-key:scope_state_fkey']);
  });

  it('a request function without its scope argument, and an unclassified sync table', () => {
    const facts = targetLayout();
    const functions = facts.functions.map((f) => (f.name === 'sync.pull' ? fn('sync.pull', [['p_source', 'text']]) : f));
    const syncTables = [...facts.syncTables, { schema: 'sync', table: 'new_table', columns: [], unique: [], foreignKeys: [] }];
    expect(ids({ ...facts, functions, syncTables })).toEqual(['sync.new_table:unclassified', 'sync.pull(text):scope-argument']);
  });

  it('a registered table whose unique index leaves out _sync_scope_id', () => {
    const facts = targetLayout();
    const lists = facts.registeredTables[0] as TableFacts;
    const changed = { ...lists, unique: [...lists.unique, { name: 'lists_title_key', columns: ['title'], primary: false }] };
    expect(ids({ ...facts, registeredTables: [changed, ...facts.registeredTables.slice(1)] })).toEqual(['app.lists:unique:lists_title_key']);
  });
});
