/**
 * The application's local tables, read from SQLite and checked against the server's
 * `registered_table_specs` (docs/protocol.md §10.8):
 * the sync key is the local PRIMARY KEY (`TEXT`, or a UUID `BLOB`), every local column exists on
 * the server with a compatible type, and the managed set is closed under foreign keys, locally and
 * on the server. A table that could never push is refused too: one without a server column that is
 * NOT NULL and has no default (a row inserted locally would break it). Any mismatch refuses to
 * open with one error naming every problem. The last two checks need the server to say which
 * columns have defaults and where its foreign keys point (`has_default`, `foreign_keys` in
 * `registered_table_specs`); a server that does not publish them is trusted on those points.
 */
import { type WireCategory } from '../core/protocol/wire-types.js';
import { type ConflictResolver, type TableConfig } from './api.js';
import { affinityOf, classify, type Affinity, type ColumnCodec, type ValueShape } from './codec.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { type SqliteStatements } from './sqlite/port.js';
import { type TableSpec } from '../core/protocol/meta.js';
import { type ProtocolVersion } from '../core/protocol/version.js';

/** Quotes a SQLite identifier. */
export function qi(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The name of one of the client's own triggers on a managed table: capture (`ins`, `upd`, `del`)
 * and base rows (`base_upd`, `base_del`). Unquoted; installs, base rows and bulk applies share it.
 */
export function syncTriggerName(table: string, suffix: string): string {
  return `_sync_trg_${table}_${suffix}`;
}

/** One of the client's triggers: its name and its whole CREATE TRIGGER statement. */
export interface TriggerDef {
  readonly name: string;
  readonly sql: string;
}

/**
 * Makes `wanted` the triggers of those names, and drops the `obsolete` ones: nothing is done when
 * each wanted trigger exists with exactly its CREATE text (SQLite keeps the text as it was given)
 * and no obsolete one is left, otherwise all of them are dropped and the wanted ones created.
 * Recreating them at every open would change the schema at every open: the open would parse the
 * triggers again, and every statement prepared before it would be prepared again.
 */
export async function ensureTriggers(tx: SqliteStatements, wanted: readonly TriggerDef[], obsolete: readonly string[] = []): Promise<void> {
  const names = [...wanted.map((w) => w.name), ...obsolete];
  const present = await tx.query<{ name: string; sql: string }>(
    `SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN (${names.map(() => '?').join(', ')})`, names);
  const same = present.length === wanted.length && wanted.every((w) => present.some((p) => p.name === w.name && p.sql === w.sql));
  if (same) return;
  await tx.exec([...names.map((name) => `DROP TRIGGER IF EXISTS ${qi(name)};`), ...wanted.map((w) => `${w.sql};`)].join('\n'));
}

/** One managed table, local and server side. */
export interface TableModel {
  readonly schema: string;
  readonly table: string;
  /** `schema.table`, the server's name. */
  readonly wireName: string;
  readonly local: string;
  readonly key: ColumnCodec & { readonly kind: 'uuid' | 'text' };
  /** Local columns (the key included), each with its server type. */
  readonly columns: readonly ColumnCodec[];
  /** Parents before children. */
  readonly order: number;
  /**
   * The tables (wire names) this table's foreign keys reference on the server, as its
   * `registered_table_specs` publish them; absent when the server does not publish them.
   */
  readonly serverReferences?: readonly string[];
  readonly resolver?: ConflictResolver;
}

export interface LocalModel {
  /** The protocol the client speaks to the server (json as text from 2 on, docs/protocol.md §9). */
  readonly protocol: ProtocolVersion;
  /** Parents first. */
  readonly tables: readonly TableModel[];
  readonly byLocal: ReadonlyMap<string, TableModel>;
  readonly byWire: ReadonlyMap<string, TableModel>;
}

interface LocalColumn {
  readonly name: string;
  readonly type: string;
  readonly notnull: boolean;
  readonly pk: number;
}

interface LocalTable {
  readonly name: string;
  readonly columns: readonly LocalColumn[];
  readonly references: readonly string[];
}

async function readLocalTable(db: SqliteStatements, name: string): Promise<LocalTable | null> {
  const columns = await db.query<{ name: string; type: string; notnull: number; pk: number }>(
    'SELECT name, type, "notnull", pk FROM pragma_table_info(?)', [name]);
  if (columns.length === 0) return null;
  const fks = await db.query<{ table: string }>('SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)', [name]);
  return {
    name,
    columns: columns.map((c) => ({ name: c.name, type: c.type, notnull: c.notnull === 1, pk: c.pk })),
    references: fks.map((f) => f.table),
  };
}

function compatible(category: WireCategory, shape: ValueShape, affinity: Affinity, untyped: boolean): boolean {
  if (untyped) return true;
  // Arrays are stored as JSON text; an opaque type as whatever its values are (text or a number).
  if (shape === 'array') return affinity === 'TEXT';
  if (shape === 'opaque') return affinity !== 'BLOB';
  switch (category) {
    case 'bytea':
      return affinity === 'BLOB';
    case 'uuid':
      return affinity === 'TEXT' || affinity === 'BLOB';
    case 'boolean':
    case 'integer':
      return affinity === 'INTEGER' || affinity === 'NUMERIC';
    case 'float':
      return affinity === 'REAL' || affinity === 'NUMERIC' || affinity === 'INTEGER';
    case 'decimal':
      return affinity !== 'BLOB';
    case 'json':
    case 'text':
    case 'timestamptz':
      return affinity === 'TEXT';
    case 'other':
      return affinity === 'TEXT' || affinity === 'NUMERIC';
  }
}

/** The codec of a local column the server does not publish yet: never encoded (see LocalModelAhead). */
function provisional(column: LocalColumn): ColumnCodec {
  return { name: column.name, category: 'other', shape: 'opaque', affinity: affinityOf(column.type), untyped: column.type === '', serverType: '', jsonText: false };
}

/**
 * The model of an app ahead of the server: its local tables declare a table or column the server's
 * capabilities do not publish yet (a new app version opened before, or just after, the deploy that
 * adds them). The model covers every local table and column — what is ahead has provisional
 * codecs — so capture and the record of local columns work while the client waits; nothing is
 * pushed or pulled until the server publishes them (client.ts). `ahead` names what is missing.
 */
export interface LocalModelAhead {
  readonly model: LocalModel;
  readonly ahead: readonly string[];
}

/**
 * Reads the configured local tables and checks them against the server's specs. Throws
 * `local_schema_mismatch` naming every problem; answers the model the client runs on, speaking
 * `protocol` (which decides how json values travel; their local form is the same in both).
 */
export async function buildLocalModel(db: SqliteStatements, configs: readonly TableConfig[], specs: readonly TableSpec[], protocol: ProtocolVersion = 1): Promise<LocalModel> {
  const built = await buildLocalModelAhead(db, configs, specs, protocol);
  if (built.ahead.length > 0) {
    throw new ClientError(ClientErrorCode.localSchemaMismatch, `local tables do not match the server: ${built.ahead.join('; ')}`, { problems: built.ahead });
  }
  return built.model;
}

/**
 * buildLocalModel, except that tables and columns the server does not publish (yet) are no
 * mismatch: they are answered in `ahead`, with a provisional model. Every other problem throws
 * `local_schema_mismatch`, naming those and the ones ahead.
 */
export async function buildLocalModelAhead(db: SqliteStatements, configs: readonly TableConfig[], specs: readonly TableSpec[], protocol: ProtocolVersion = 1): Promise<LocalModelAhead> {
  const problems: string[] = [];
  const ahead: string[] = [];
  const specByName = new Map(specs.map((s) => [`${s.schema}.${s.table}`, s]));
  const models: Omit<TableModel, 'order'>[] = [];
  const locals = new Map<string, LocalTable>();
  for (const config of configs) {
    const wireName = `${config.schema}.${config.table}`;
    const localName = config.local ?? config.table;
    const spec = specByName.get(wireName);
    const local = await readLocalTable(db, localName);
    if (!spec) {
      ahead.push(`${wireName}: the server does not register this table`);
      // Captured meanwhile under its local primary key, so nothing written waits uncaptured.
      const pk = local?.columns.filter((c) => c.pk > 0) ?? [];
      if (local && pk.length === 1) {
        locals.set(localName, local);
        const columns = local.columns.map(provisional);
        const key = columns.find((c) => c.name === pk[0]?.name) as ColumnCodec;
        models.push({ schema: config.schema, table: config.table, wireName, local: localName, key: { ...key, kind: 'text' }, columns, ...(config.resolver ? { resolver: config.resolver } : {}) });
      }
      continue;
    }
    if (!local) {
      problems.push(`${wireName}: local table ${localName} does not exist`);
      continue;
    }
    locals.set(localName, local);
    const pk = local.columns.filter((c) => c.pk > 0);
    const keyName = spec.sync_key.column;
    if (pk.length !== 1 || pk[0]?.name !== keyName) {
      problems.push(`${localName}: the PRIMARY KEY must be exactly the sync key column ${keyName} (found ${pk.map((c) => c.name).join(', ') || 'none'})`);
    }
    const serverColumns = new Map(spec.columns.map((c) => [c.name, c]));
    const columns: ColumnCodec[] = [];
    for (const column of local.columns) {
      const server = serverColumns.get(column.name);
      if (!server) {
        ahead.push(`${localName}.${column.name}: the server table ${wireName} has no such column`);
        columns.push(provisional(column));
        continue;
      }
      const codec: ColumnCodec = {
        name: column.name, ...classify(server.type), affinity: affinityOf(column.type), untyped: column.type === '', serverType: server.type, jsonText: protocol >= 2,
      };
      if (!compatible(codec.category, codec.shape, codec.affinity, codec.untyped)) {
        problems.push(`${localName}.${column.name}: local type ${column.type || '(none)'} cannot hold server type ${server.type}`);
      }
      // NOT NULL locally but nullable on the server is accepted: the server may have relaxed it after
      // this app version shipped (schema evolution). A null that does arrive is refused by apply
      // with local_schema_mismatch naming the column (codec.ts), never a raw SQLite error.
      columns.push(column.notnull && server.nullable && column.name !== keyName ? { ...codec, localNotNull: true } : codec);
    }
    const localNames = new Set(local.columns.map((c) => c.name));
    for (const server of spec.columns) {
      if (localNames.has(server.name) || server.nullable || server.has_default !== false) continue;
      problems.push(`${localName}.${server.name}: the server column is NOT NULL and has no default, so a row inserted locally could never push; add the column locally`);
    }
    for (const fk of spec.foreign_keys ?? []) {
      const target = `${fk.references.schema}.${fk.references.table}`;
      if (target === wireName || configs.some((c) => `${c.schema}.${c.table}` === target)) continue;
      problems.push(`${localName}: references ${target} on the server, which is not managed locally (the managed set must be closed under foreign keys)`);
    }
    const key = columns.find((c) => c.name === keyName);
    if (key) {
      const keyOk = spec.sync_key.kind === 'text' ? key.affinity === 'TEXT' : key.affinity === 'TEXT' || (key.affinity === 'BLOB' && !key.untyped);
      if (!keyOk) problems.push(`${localName}.${keyName}: a ${spec.sync_key.kind} sync key must be TEXT PRIMARY KEY${spec.sync_key.kind === 'uuid' ? ' or BLOB PRIMARY KEY' : ''}`);
      models.push({
        schema: config.schema, table: config.table, wireName, local: localName, key: { ...key, kind: spec.sync_key.kind }, columns,
        ...(spec.foreign_keys ? { serverReferences: spec.foreign_keys.map((fk) => `${fk.references.schema}.${fk.references.table}`) } : {}),
        ...(config.resolver ? { resolver: config.resolver } : {}),
      });
    } else if (pk.length === 1) {
      problems.push(`${localName}: has no column ${keyName}`);
    }
  }
  for (const local of locals.values()) {
    for (const ref of local.references) {
      if (!locals.has(ref)) problems.push(`${local.name}: references ${ref}, which is not a managed table (the managed set must be closed under foreign keys)`);
    }
  }
  if (problems.length > 0) {
    const all = [...ahead, ...problems];
    throw new ClientError(ClientErrorCode.localSchemaMismatch, `local tables do not match the server: ${all.join('; ')}`, { problems: all });
  }
  const order = parentFirst([...locals.values()]);
  const tables = models.map((m) => ({ ...m, order: order.get(m.local) ?? 0 })).sort((a, b) => a.order - b.order);
  return {
    model: {
      protocol,
      tables,
      byLocal: new Map(tables.map((t) => [t.local, t])),
      byWire: new Map(tables.map((t) => [t.wireName, t])),
    },
    ahead,
  };
}

/** Topological order, parents first; cycles are fine because apply defers foreign keys. */
function parentFirst(tables: readonly LocalTable[]): Map<string, number> {
  const byName = new Map(tables.map((t) => [t.name, t]));
  const order = new Map<string, number>();
  const visiting = new Set<string>();
  const visit = (name: string): void => {
    if (order.has(name) || visiting.has(name)) return;
    visiting.add(name);
    for (const ref of byName.get(name)?.references ?? []) if (ref !== name) visit(ref);
    order.set(name, order.size);
  };
  for (const t of [...tables].sort((a, b) => (a.name < b.name ? -1 : 1))) visit(t.name);
  return order;
}
