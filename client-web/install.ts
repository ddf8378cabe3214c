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
 * - `_sync_push_state`: the one frozen bundle (its outbox table, source tuple, request hash, and
 *   the protocol it was frozen in).
 *   Its rows live in `_sync_outbox_<n>`; while such a table exists, pull and rebuild fail closed.
 * - `_sync_rebuild_state` + `_sync_stage_<table>`: a resumable snapshot download.
 * - `_sync_capabilities`: the server's last capabilities, so the client validates offline.
 * - `_sync_local_model`: the local columns of each managed table at the last open, so a new app
 *   version whose local migration added a column (or a table) is noticed (recordLocalModel), and
 *   the added columns still to fill from the server (`refresh`, until the next rebuild).
 * - `_sync_quarantine`: rows moved out of a rejected bundle (quarantine.ts), with the rejection,
 *   until the app re-queues or drops them.
 * - `_sync_reached_ceiling`: the user whose data reached the server's frozen ceiling once (a pull
 *   to its stable bundle, or a snapshot), so live queries can say their rows are complete.
 * - `_sync_trg_<table>_{ins,upd,del}`: capture triggers, whose insert and update also refuse a
 *   value that is not its column's local form (codec.ts decides it: a key the wire would change,
 *   text in an INTEGER column, an array that is not JSON text, U+0000 …), recreated at an open
 *   when they differ from the model's; those of a table no longer managed are dropped with its
 *   dirty marks.
 */
import { keyRefusals, localFormOf, type Refusal } from './codec.js';
import { INVALID_LOCAL_ROW_MARK } from './local-writes.js';
import { ensureTriggers, type LocalModel, type TableModel, type TriggerDef, qi, syncTriggerName } from './local-schema.js';
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
  rejected TEXT,
  protocol INTEGER NOT NULL DEFAULT 1
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
CREATE TABLE IF NOT EXISTS _sync_reached_ceiling (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  user_id TEXT NOT NULL,
  bundle_seq INTEGER NOT NULL,
  reached_at TEXT NOT NULL
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

/**
 * Columns added to state tables after the first release, for databases created before: a bundle
 * frozen then was frozen in protocol 1, the default.
 */
async function addStateColumns(tx: SqliteStatements): Promise<void> {
  const [push] = await tx.query("SELECT 1 AS x FROM pragma_table_info('_sync_push_state') WHERE name = 'protocol'");
  if (!push) await tx.exec('ALTER TABLE _sync_push_state ADD COLUMN protocol INTEGER NOT NULL DEFAULT 1');
}

/** The state tables every database gets, before the local model is known. */
export async function installState(db: SqliteDb, newSourceId: () => string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.exec(STATE_DDL);
    await migrateKeyColumns(tx);
    await addStateColumns(tx);
    await tx.run('INSERT OR IGNORE INTO _sync_source_state (id, source_id) VALUES (1, ?)', [newSourceId()]);
    // A crash cannot leave the flag set (it is only set inside a transaction), but a foreign
    // writer could have; capture must never be silently off.
    await tx.run('UPDATE _sync_control SET applying = 0 WHERE applying <> 0');
  });
}

export function stageTable(t: TableModel): string {
  return `_sync_stage_${t.local}`;
}

/** An SQL string literal. */
function lit(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * The refusal of a local write: its message without the key, one literal, opening a JSON object
 * naming table, column and why (checkSql closes it with the key). One literal per refusal keeps
 * the trigger program small: a trigger costs every row in proportion to its program, also while
 * the client applies server data and the body is skipped.
 */
function refusalHead(t: TableModel, column: string, why: string): string {
  return lit(`${INVALID_LOCAL_ROW_MARK}: {"table":${JSON.stringify(t.local)},"column":${JSON.stringify(column)},"reason":${JSON.stringify(why)},"key":`);
}

/** The first refusal of one value that holds, or NULL: `CASE WHEN <refused> THEN <message head> … END`. */
function refusalCase(t: TableModel, column: string, refusals: readonly Refusal[]): string {
  return `CASE ${refusals.map((r) => `WHEN ${r.when} THEN ${refusalHead(t, column, r.why)}`).join(' ')} END`;
}

/**
 * The check of a written row: every column's local form (codec.ts), the key first; the first
 * refusal fails the statement. On UPDATE only the columns the statement changed are checked, so a
 * large value left alone costs one comparison.
 *
 * SQLite before 3.47 takes only a literal in RAISE, which cannot name the key: json_extract's
 * error for a malformed path quotes the path, so the refusal is passed as one (local-writes.ts
 * reads it back); with no refusal the path is '$', which fails nothing.
 */
function checkSql(t: TableModel, when: 'INSERT' | 'UPDATE'): string {
  const key = `NEW.${qi(t.key.name)}`;
  const parts = [t.key, ...t.columns.filter((c) => c.name !== t.key.name)].map((c) => {
    const v = `NEW.${qi(c.name)}`;
    const refusals = c === t.key ? keyRefusals(t.key, v) : localFormOf(c).refusals(v);
    const guard = [when === 'UPDATE' ? `${v} IS NOT OLD.${qi(c.name)}` : '', c === t.key ? '' : `${v} IS NOT NULL`].filter(Boolean).join(' AND ');
    return guard ? `CASE WHEN ${guard} THEN ${refusalCase(t, c.name, refusals)} END` : refusalCase(t, c.name, refusals);
  });
  const keyText = `json_quote(CASE WHEN typeof(${key}) = 'blob' THEN lower(hex(${key})) ELSE ${key} END)`;
  // NULL || … is NULL: with no refusal the whole message is NULL, and the path '$'.
  return `SELECT json_extract('{}', coalesce(coalesce(${parts.join(',\n  ')}, NULL) || ${keyText} || '}', '$'));`;
}

/**
 * The capture triggers of one table. Each also checks the written row's local form first (its
 * SQL fails the statement, which undoes the row and the mark): one trigger per write, not two,
 * because a trigger costs every row its WHEN even while the client applies server data (an extra
 * trigger made applying 100k rows half again slower). An error in an AFTER trigger aborts the
 * statement as one in a BEFORE trigger would. `checks: false` installs capture alone (the
 * benchmark's baseline: the client before the checks).
 */
function captureTriggers(t: TableModel, checks: boolean): TriggerDef[] {
  const table = qi(t.local);
  const key = qi(t.key.name);
  const tbl = lit(t.local);
  const when = 'WHEN (SELECT applying FROM _sync_control WHERE id = 1) = 0';
  // state 1 (frozen) becomes 2 (frozen, changed again); 0 and 2 stay as they are.
  const mark = (ref: string) =>
    `INSERT INTO _sync_dirty (tbl, key, state) VALUES (${tbl}, ${ref}, 0) ON CONFLICT (tbl, key) DO UPDATE SET state = CASE state WHEN 1 THEN 2 ELSE state END;`;
  const check = (op: 'INSERT' | 'UPDATE') => (checks ? `${checkSql(t, op)} ` : '');
  const trigger = (suffix: string, event: string, body: string): TriggerDef => {
    const name = syncTriggerName(t.local, suffix);
    return { name, sql: `CREATE TRIGGER ${qi(name)} AFTER ${event} ON ${table} ${when} BEGIN ${body} END` };
  };
  return [
    trigger('ins', 'INSERT', `${check('INSERT')}${mark(`NEW.${key}`)}`),
    trigger('upd', 'UPDATE', `${check('UPDATE')}${mark(`OLD.${key}`)} ${mark(`NEW.${key}`)}`),
    trigger('del', 'DELETE', mark(`OLD.${key}`)),
  ];
}

/**
 * Capture triggers for every managed table, following the model: recreated when they differ from
 * the model's (ensureTriggers), with the separate check triggers of earlier releases (`key_ins`,
 * `key_upd`) dropped. A table no longer in the config loses its triggers and its bookkeeping: its
 * writes are local only from now on (dirty marks it kept could never be pushed, and would block
 * detach for good). Should it be managed again, it counts as new (recordLocalModel) and the next
 * sync refreshes it.
 */
export async function installTriggers(db: SqliteDb, model: LocalModel, options: { readonly checks?: boolean } = {}): Promise<void> {
  await db.transaction(async (tx) => {
    const triggers = await tx.query<{ name: string; tbl_name: string }>(
      "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\\_sync\\_trg\\_%' ESCAPE '\\'");
    for (const trigger of triggers) if (!model.byLocal.has(trigger.tbl_name)) await tx.exec(`DROP TRIGGER IF EXISTS ${qi(trigger.name)}`);
    const managed = model.tables.map((t) => t.local);
    const notManaged = `tbl NOT IN (${managed.map(() => '?').join(', ') || "''"})`;
    for (const table of ['_sync_dirty', '_sync_skipped', '_sync_row_meta', '_sync_local_model']) {
      await tx.run(`DELETE FROM ${table} WHERE ${notManaged}`, managed);
    }
    for (const t of model.tables) {
      await ensureTriggers(tx, captureTriggers(t, options.checks ?? true), ['key_ins', 'key_upd'].map((suffix) => syncTriggerName(t.local, suffix)));
    }
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
