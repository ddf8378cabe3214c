/**
 * A snapshot's rows are rendered by a query PostgreSQL may run in parallel (sync.snapshot_render),
 * but only if every function it calls is PARALLEL SAFE: one that is not keeps the whole render
 * serial, silently. This reads the row SQL the catalog generates for a table with every wire type
 * and checks each managed function it reaches, directly or through another one, as the newest
 * migration defines it. (test/read-snapshot.pg.test.ts runs a render in parallel.)
 */
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../core/bootstrap/migrations/index.js';
import { buildCatalog, type ColumnInfo } from '../core/sync/catalog/table-sql.js';
import { calledFunctions } from './support/sql-bodies.js';

const TYPES = [
  'uuid', 'text', 'integer', 'bigint', 'smallint', 'numeric', 'double precision', 'real', 'boolean', 'bytea', 'json', 'jsonb',
  'timestamp with time zone', 'timestamp without time zone', 'date',
  'timestamp with time zone[]', 'timestamp without time zone[]', 'date[]', 'bytea[]', 'numeric[]', 'bigint[]', 'double precision[]',
  'integer[]', 'text[]', 'boolean[]',
];

const column = (name: string, type: string): ColumnInfo => ({ name, type, notNull: false, generated: false, identityAlways: false, defaultExpr: null });

/** Each managed function's CREATE statement as the newest migration that installs it has it. */
function newestDefinitions(): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of MIGRATIONS) for (const f of m.functions ?? []) out.set(f.name, f.sql);
  return out;
}

describe('snapshot row rendering is parallel safe', () => {
  it('every managed function the row SQL reaches is declared PARALLEL SAFE', () => {
    const definitions = newestDefinitions();
    const known = new Set(definitions.keys());
    const [entry] = buildCatalog([{
      schema: 'app', table: 'everything', keyColumn: 'id', foreignKeys: [],
      columns: [column('id', 'uuid'), column('_sync_scope_id', 'text'), ...TYPES.map((type, i) => column(`c${i}`, type))],
    }]);
    const reached = new Set<string>();
    const pending = [entry!.snapshotSql, entry!.snapshotV1Sql ?? ''].flatMap((sql) => calledFunctions(sql, known));
    while (pending.length) {
      const name = pending.pop() as string;
      if (reached.has(name)) continue;
      reached.add(name);
      pending.push(...calledFunctions((definitions.get(name) as string).split('$fn$')[1] ?? '', known));
    }
    // The row SQL of these types calls the time and array renderers; an empty set would prove nothing.
    expect([...reached].sort()).toEqual(expect.arrayContaining(['sync.iso_year', 'sync.rfc3339', 'sync.wire_shape', 'sync.wire_timestamp_array']));
    const unsafe = [...reached].filter((name) => !/\bPARALLEL\s+SAFE\b/i.test((definitions.get(name) as string).split('$fn$')[0] as string));
    expect(unsafe).toEqual([]);
  });
});
