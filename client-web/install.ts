/**
 * Installs the client's own objects, idempotently and all prefixed `_sync_` (style.md #8):
 *
 * - `_sync_attachment_state`: the attached user, `last_bundle_seq_seen` (the read checkpoint),
 *   `rebuild_required`, and the initialization lease of a first push.
 * - `_sync_source_state`: this device's `source_id`, `next_source_bundle_id`, and a rotation in
 *   flight (recorded before the request, so a crash retries the same rotation).
 * - `_sync_control`: the apply flag. Capture triggers skip writes made while it is 1; it is only
 *   ever set inside an apply transaction, and reset on open in case a crash left it set.
 * - `_sync_dirty`: changed keys per table. `state` 0 = dirty, 1 = frozen into the outbox,
 *   2 = frozen and changed again since (pushed next time).
 * - `_sync_row_meta`: the server `row_version` each local row is based on, tombstones included,
 *   so a push carries the right `base_row_version` and a re-insert of a deleted key its version.
 * - `_sync_skipped`: pending keys whose newer server row a pull or rebuild kept out. Should the
 *   local change end as a no-op (the key inserted and deleted again), the freeze sets
 *   `rebuild_required` instead of silently forgetting the key: the skipped row is needed.
 * - `_sync_push_state`: the one frozen bundle (its outbox table, source tuple, request hash).
 *   Its rows live in `_sync_outbox_<n>`; while such a table exists, pull and rebuild fail closed.
 * - `_sync_rebuild_state` + `_sync_stage_<table>`: a resumable snapshot download.
 * - `_sync_capabilities`: the server's last capabilities, so the client validates offline.
 * - `_sync_local_model`: the local columns of each managed table at the last open, so a new app
 *   version whose local migration added a column (or a table) is noticed (recordLocalModel), and
 *   the added columns still to fill from the server (`refresh`, until the next rebuild).
 * - `_sync_quarantine`: rows moved out of a rejected bundle (quarantine.ts), with the rejection,
 *   until the app re-queues or drops them.
 * - `_sync_trg_<table>_{ins,upd,del}`: capture triggers, and `_sync_trg_<table>_key_{ins,upd}`,
 *   which refuse a key the wire would change (a non-canonical UUID), recreated on every open;
 *   those of a table no longer managed are dropped with its dirty marks.
 */
import { INVALID_LOCAL_ROW_MARK } from './local-writes.js';
import { type LocalModel, type TableModel, qi } from './local-schema.js';
import { type SqliteDb, type SqliteStatements } from './sqlite/port.js';

const STATE_DDL = `
CREATE TABLE IF NOT EXISTS _sync_attachment_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  user_id TEXT,
  last_bundle_seq_seen INTEGER NOT NULL DEFAULT 0,
  rebuild_required INTEGER NOT NULL DEFAULT 0,
  initialization_id TEXT
);
INSERT OR IGNORE INTO _sync_attachment_state (id) VALUES (1);
CREATE TABLE IF NOT EXISTS _sync_source_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  source_id TEXT NOT NULL,
  next_source_bundle_id INTEGER NOT NULL DEFAULT 1,
  rotation_new_source_id TEXT,
  rotation_reason TEXT
);
CREATE TABLE IF NOT EXISTS _sync_control (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  applying INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO _sync_control (id, applying) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS _sync_dirty (
  tbl TEXT NOT NULL,
  key NOT NULL,
  state INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS _sync_row_meta (
  tbl TEXT NOT NULL,
  key NOT NULL,
  row_version INTEGER NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS _sync_skipped (
  tbl TEXT NOT NULL,
  key NOT NULL,
  PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS _sync_push_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  outbox_table TEXT NOT NULL,
  source_id TEXT NOT NULL,
  source_bundle_id INTEGER NOT NULL,
  row_count INTEGER NOT NULL,
  request_hash TEXT NOT NULL,
  initialization_id TEXT,
  rejected TEXT
);
CREATE TABLE IF NOT EXISTS _sync_rebuild_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  snapshot_id TEXT,
  snapshot_bundle_seq INTEGER,
  row_count INTEGER,
  next_row_ordinal INTEGER NOT NULL DEFAULT 0,
  expires_at TEXT
);
CREATE TABLE IF NOT EXISTS _sync_capabilities (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS _sync_quarantine (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tbl TEXT NOT NULL,
  key_local NOT NULL,
  key_wire TEXT NOT NULL,
  op TEXT NOT NULL,
  payload TEXT,
  base_row_version INTEGER NOT NULL,
  rejection TEXT NOT NULL,
  depends_on INTEGER,
  source_bundle_id INTEGER NOT NULL,
  quarantined_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS _sync_local_model (
  tbl TEXT PRIMARY KEY,
  columns TEXT NOT NULL,
  refresh TEXT
);
`;

/**
 * Key columns hold the local key as it is (TEXT or BLOB), so they are declared without a type:
 * a declared type such as ANY gives NUMERIC affinity in an ordinary table, which turns a text key
 * '007' into the integer 7 and defeats the key indexes in joins. Databases created with such a
 * column get the tables rebuilt (values already converted cannot be recovered).
 */
async function migrateKeyColumns(tx: SqliteStatements): Promise<void> {
  for (const table of ['_sync_dirty', '_sync_row_meta']) {
    const [column] = await tx.query<{ type: string }>('SELECT type FROM pragma_table_info(?) WHERE name = ?', [table, 'key']);
    if (!column || column.type === '') continue;
    await tx.exec(`ALTER TABLE ${table} RENAME TO ${table}_old`);
    await tx.exec(STATE_DDL);
    await tx.exec(`INSERT OR IGNORE INTO ${table} SELECT * FROM ${table}_old; DROP TABLE ${table}_old`);
  }
}

/** The state tables every database gets, before the local model is known. */
export async function installState(db: SqliteDb, newSourceId: () => string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.exec(STATE_DDL);
    await migrateKeyColumns(tx);
    await tx.run('INSERT OR IGNORE INTO _sync_source_state (id, source_id) VALUES (1, ?)', [newSourceId()]);
    // A crash cannot leave the flag set (it is only set inside a transaction), but a foreign
    // writer could have; capture must never be silently off.
    await tx.run('UPDATE _sync_control SET applying = 0 WHERE applying <> 0');
  });
}

export function stageTable(t: TableModel): string {
  return `_sync_stage_${t.local}`;
}

const HEX = '[0-9a-f]';
/** Canonical UUID text, as the wire carries it: lowercase, dashed (GLOB is case-sensitive). */
const UUID_GLOB = [8, 4, 4, 4, 12].map((n) => HEX.repeat(n)).join('-');

/**
 * The condition under which a written key is refused. The wire form of a UUID key is its
 * canonical text, and the server's rows come back in that form: a key stored any other way
 * (upper-case text, text in a BLOB key) would come back as a second row beside the first.
 */
function badKeyCondition(t: TableModel, ref: string): string | null {
  if (t.key.kind !== 'uuid') return null;
  return t.key.affinity === 'BLOB' ? `typeof(${ref}) <> 'blob' OR length(${ref}) <> 16` : `${ref} IS NULL OR ${ref} NOT GLOB '${UUID_GLOB}'`;
}

function triggerSql(t: TableModel): string {
  const name = (suffix: string) => qi(`_sync_trg_${t.local}_${suffix}`);
  const table = qi(t.local);
  const key = qi(t.key.name);
  const tbl = `'${t.local.replaceAll("'", "''")}'`;
  const when = 'WHEN (SELECT applying FROM _sync_control WHERE id = 1) = 0';
  // state 1 (frozen) becomes 2 (frozen, changed again); 0 and 2 stay as they are.
  const mark = (ref: string) =>
    `INSERT INTO _sync_dirty (tbl, key, state) VALUES (${tbl}, ${ref}, 0) ON CONFLICT (tbl, key) DO UPDATE SET state = CASE state WHEN 1 THEN 2 ELSE state END;`;
  const bad = badKeyCondition(t, `NEW.${key}`);
  const message = `'${INVALID_LOCAL_ROW_MARK}: the ${t.key.kind} key ${t.local}.${t.key.name.replaceAll("'", "''")} must be ${
    t.key.affinity === 'BLOB' ? 'a 16-byte BLOB' : 'lowercase dashed UUID text'}'`;
  const keyGuards = bad === null ? '' : `
CREATE TRIGGER ${name('key_ins')} BEFORE INSERT ON ${table} WHEN ${bad} BEGIN SELECT RAISE(ABORT, ${message}); END;
CREATE TRIGGER ${name('key_upd')} BEFORE UPDATE OF ${key} ON ${table} WHEN ${bad} BEGIN SELECT RAISE(ABORT, ${message}); END;`;
  return `
DROP TRIGGER IF EXISTS ${name('ins')};
DROP TRIGGER IF EXISTS ${name('upd')};
DROP TRIGGER IF EXISTS ${name('del')};
DROP TRIGGER IF EXISTS ${name('key_ins')};
DROP TRIGGER IF EXISTS ${name('key_upd')};
CREATE TRIGGER ${name('ins')} AFTER INSERT ON ${table} ${when} BEGIN ${mark(`NEW.${key}`)} END;
CREATE TRIGGER ${name('upd')} AFTER UPDATE ON ${table} ${when} BEGIN ${mark(`OLD.${key}`)} ${mark(`NEW.${key}`)} END;
CREATE TRIGGER ${name('del')} AFTER DELETE ON ${table} ${when} BEGIN ${mark(`OLD.${key}`)} END;${keyGuards}
`;
}

/**
 * Capture triggers for every managed table; recreated each open so they follow the model. A table
 * no longer in the config loses its triggers and its bookkeeping: its writes are local only from
 * now on (dirty marks it kept could never be pushed, and would block detach for good). Should it
 * be managed again, it counts as new (recordLocalModel) and the next sync refreshes it.
 */
export async function installTriggers(db: SqliteDb, model: LocalModel): Promise<void> {
  await db.transaction(async (tx) => {
    const triggers = await tx.query<{ name: string; tbl_name: string }>(
      "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\\_sync\\_trg\\_%' ESCAPE '\\'");
    for (const trigger of triggers) if (!model.byLocal.has(trigger.tbl_name)) await tx.exec(`DROP TRIGGER IF EXISTS ${qi(trigger.name)}`);
    const managed = model.tables.map((t) => t.local);
    const notManaged = `tbl NOT IN (${managed.map(() => '?').join(', ') || "''"})`;
    for (const table of ['_sync_dirty', '_sync_skipped', '_sync_row_meta', '_sync_local_model']) {
      await tx.run(`DELETE FROM ${table} WHERE ${notManaged}`, managed);
    }
    for (const t of model.tables) await tx.exec(triggerSql(t));
  });
}

/**
 * (Re)creates the empty stage tables of a fresh snapshot download, shaped like the local tables,
 * except for the tables in `direct`: their pages are written straight into the table (see
 * directTables in apply.ts), and the missing stage table is what says so, also to a download that
 * resumes after a restart.
 */
export async function resetStageTables(tx: SqliteStatements, model: LocalModel, direct: ReadonlySet<string> = new Set()): Promise<void> {
  for (const t of model.tables) {
    if (direct.has(t.local)) {
      await tx.exec(`DROP TABLE IF EXISTS ${qi(stageTable(t))}`);
      continue;
    }
    const cols = t.columns.map((c) => qi(c.name)).join(', ');
    // No key index while pages stream in (it would cost as much as the inserts); the final apply
    // builds it once, and only when it joins on the key (applyStagedSnapshot).
    await tx.exec(`DROP TABLE IF EXISTS ${qi(stageTable(t))};
CREATE TABLE ${qi(stageTable(t))} AS SELECT ${cols}, 0 AS _sync_row_version FROM ${qi(t.local)} WHERE 0;`);
  }
}

/** The managed tables that have a stage table (the others of a download are written directly). */
export async function stagedTables(db: SqliteStatements, model: LocalModel): Promise<Set<string>> {
  const rows = await db.query<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '\\_sync\\_stage\\_%' ESCAPE '\\'");
  const names = new Set(rows.map((r) => r.name));
  return new Set(model.tables.filter((t) => names.has(stageTable(t))).map((t) => t.local));
}

/** Drops the stage tables of a finished (or abandoned) snapshot download. */
export async function dropStageTables(tx: SqliteStatements, model: LocalModel): Promise<void> {
  for (const t of model.tables) await tx.exec(`DROP TABLE IF EXISTS ${qi(stageTable(t))}`);
}

/** Names of existing outbox tables (at most one in normal operation). */
export async function outboxTables(db: SqliteStatements): Promise<string[]> {
  const rows = await db.query<{ name: string }>(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '\\_sync\\_outbox\\_%' ESCAPE '\\'");
  return rows.map((r) => r.name);
}

/**
 * Records the managed tables' local columns and answers the tables that gained a column, or are
 * managed for the first time, since the last open. Their existing rows lack values the server
 * has (a column the server added earlier, a table registered earlier), so the caller refreshes
 * them from a snapshot; the added columns are kept in `refresh` so the rebuild also fills them
 * in rows with pending changes (whose other values it keeps). Nothing is reported on the first
 * open of a database.
 */
export async function recordLocalModel(db: SqliteDb, model: LocalModel): Promise<string[]> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ tbl: string; columns: string; refresh: string | null }>('SELECT tbl, columns, refresh FROM _sync_local_model');
    const known = new Map(rows.map((r) => [r.tbl, { columns: new Set(JSON.parse(r.columns) as string[]), refresh: JSON.parse(r.refresh ?? '[]') as string[] }]));
    const grown: string[] = [];
    for (const t of model.tables) {
      const before = known.get(t.local);
      const added = before ? t.columns.map((c) => c.name).filter((c) => !before.columns.has(c)) : [];
      if (known.size > 0 && (!before || added.length > 0)) grown.push(t.local);
      const refresh = [...new Set([...(before?.refresh ?? []), ...added])].filter((c) => t.columns.some((m) => m.name === c));
      await tx.run('INSERT OR REPLACE INTO _sync_local_model (tbl, columns, refresh) VALUES (?, ?, ?)',
        [t.local, JSON.stringify(t.columns.map((c) => c.name)), refresh.length ? JSON.stringify(refresh) : null]);
    }
    return grown;
  });
}

/** Columns added locally that a rebuild must still fill in rows with pending changes. */
export async function columnsToRefresh(db: SqliteStatements, table: TableModel): Promise<string[]> {
  const [row] = await db.query<{ refresh: string | null }>('SELECT refresh FROM _sync_local_model WHERE tbl = ?', [table.local]);
  return row?.refresh ? (JSON.parse(row.refresh) as string[]) : [];
}
