/**
 * BENCH-ONLY MINIMAL APPLIER — a stand-in until client-web's apply lands (issue 9 switches to it
 * then). It does what any client apply must do and nothing more: per pulled bundle one
 * transaction that upserts or deletes each row, records each row's `row_version` (the base of
 * the next push) and advances the checkpoint; per snapshot page one transaction of upserts.
 * It has no capture suppression, outbox protection or type mapping beyond this table's columns,
 * so client-web's applier will be somewhat slower, not faster.
 */
import { type ClientDb, type Statement, type SqlValue, CLIENT_NOTES_SQL } from './wa-sqlite.js';

interface WireRow {
  readonly key: { readonly id: string };
  readonly op?: 'INSERT' | 'UPDATE' | 'DELETE';
  readonly row_version: number;
  readonly payload: Record<string, unknown> | null;
}

export interface WireBundle {
  readonly bundle_seq: number;
  readonly row_count: number;
  readonly rows_omitted: boolean;
  readonly rows: readonly WireRow[];
}

const SYNC_TABLES_SQL = `
CREATE TABLE _sync_row_versions (table_name TEXT NOT NULL, key TEXT NOT NULL, row_version INTEGER NOT NULL,
  deleted INTEGER NOT NULL, PRIMARY KEY (table_name, key)) WITHOUT ROWID;
CREATE TABLE _sync_checkpoint (id INTEGER PRIMARY KEY CHECK (id = 1), bundle_seq INTEGER NOT NULL);
INSERT INTO _sync_checkpoint VALUES (1, 0);`;

function values(row: WireRow): SqlValue[] {
  const p = row.payload as Record<string, unknown>;
  return [row.key.id, p['title'] as string, p['body'] as string, p['position'] as number, p['done'] ? 1 : 0, p['updated_at'] as string];
}

export class MinimalApplier {
  private constructor(
    readonly db: ClientDb,
    private readonly upsert: Statement,
    private readonly remove: Statement,
    private readonly version: Statement,
    private readonly checkpoint: Statement,
  ) {}

  /** Creates the client tables in a fresh database and prepares the apply statements. */
  static async install(db: ClientDb): Promise<MinimalApplier> {
    await db.exec(CLIENT_NOTES_SQL);
    await db.exec(SYNC_TABLES_SQL);
    return new MinimalApplier(
      db,
      await db.prepare(`INSERT INTO notes (id, title, body, position, done, updated_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET title = excluded.title, body = excluded.body, position = excluded.position,
          done = excluded.done, updated_at = excluded.updated_at`),
      await db.prepare('DELETE FROM notes WHERE id = ?'),
      await db.prepare(`INSERT INTO _sync_row_versions (table_name, key, row_version, deleted) VALUES ('bench.notes', ?, ?, ?)
        ON CONFLICT (table_name, key) DO UPDATE SET row_version = excluded.row_version, deleted = excluded.deleted`),
      await db.prepare('UPDATE _sync_checkpoint SET bundle_seq = ? WHERE id = 1'),
    );
  }

  private async applyRow(row: WireRow): Promise<void> {
    if (row.op === 'DELETE') {
      await this.remove.run([row.key.id]);
      await this.version.run([row.key.id, row.row_version, 1]);
    } else {
      await this.upsert.run(values(row));
      await this.version.run([row.key.id, row.row_version, 0]);
    }
  }

  /** One pulled bundle, complete (rows_omitted bundles must be paged in by the caller first). */
  async applyBundle(bundle: WireBundle, rows: readonly WireRow[] = bundle.rows): Promise<void> {
    if (rows.length !== bundle.row_count) throw new Error(`bundle ${bundle.bundle_seq}: ${rows.length} of ${bundle.row_count} rows`);
    await this.db.exec('BEGIN');
    for (const row of rows) await this.applyRow(row);
    await this.checkpoint.run([bundle.bundle_seq]);
    await this.db.exec('COMMIT');
  }

  /** One snapshot page; the snapshot's bundle_seq becomes the checkpoint with the last page. */
  async applySnapshotPage(rows: readonly WireRow[], finalBundleSeq?: number): Promise<void> {
    await this.db.exec('BEGIN');
    for (const row of rows) await this.applyRow(row);
    if (finalBundleSeq !== undefined) await this.checkpoint.run([finalBundleSeq]);
    await this.db.exec('COMMIT');
  }
}
