/**
 * wa-sqlite under Node: the synchronous build with its wasm read from node_modules, one
 * in-memory database per fresh client. Also the direct-insert baseline the client-side
 * benchmarks compare against: the same rows inserted with one prepared statement in one
 * transaction, no sync bookkeeping.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import SQLiteESMFactory from 'wa-sqlite/dist/wa-sqlite.mjs';
import * as SQLite from 'wa-sqlite';
import { type Note } from './rows.js';

export type SqliteApi = ReturnType<typeof SQLite.Factory>;
export type SqlValue = string | number | null;

let api: Promise<SqliteApi> | undefined;

/** The wa-sqlite API, instantiated once per process. */
export function sqliteApi(): Promise<SqliteApi> {
  api ??= (async () => {
    const require = createRequire(import.meta.url);
    const wasmBinary = readFileSync(require.resolve('wa-sqlite/dist/wa-sqlite.wasm'));
    return SQLite.Factory(await SQLiteESMFactory({ wasmBinary }));
  })();
  return api;
}

/** A prepared statement that is bound, stepped and reset per use. */
export class Statement {
  constructor(
    private readonly sqlite3: SqliteApi,
    readonly stmt: number,
  ) {}

  async run(values: readonly SqlValue[]): Promise<void> {
    this.sqlite3.bind_collection(this.stmt, values as SqlValue[]);
    await this.sqlite3.step(this.stmt);
    await this.sqlite3.reset(this.stmt);
  }

  finalize(): Promise<number> {
    return this.sqlite3.finalize(this.stmt);
  }
}

/** One open wa-sqlite database. */
export class ClientDb {
  private readonly statements: Statement[] = [];

  private constructor(
    readonly sqlite3: SqliteApi,
    readonly handle: number,
  ) {}

  /** A fresh, empty in-memory database. */
  static async open(): Promise<ClientDb> {
    const sqlite3 = await sqliteApi();
    return new ClientDb(sqlite3, await sqlite3.open_v2(':memory:'));
  }

  async exec(sql: string): Promise<void> {
    await this.sqlite3.exec(this.handle, sql);
  }

  async prepare(sql: string): Promise<Statement> {
    const str = this.sqlite3.str_new(this.handle, sql);
    try {
      const prepared = await this.sqlite3.prepare_v2(this.handle, this.sqlite3.str_value(str));
      if (!prepared) throw new Error(`no statement in: ${sql}`);
      const statement = new Statement(this.sqlite3, prepared.stmt);
      this.statements.push(statement);
      return statement;
    } finally {
      this.sqlite3.str_finish(str);
    }
  }

  async scalar(sql: string): Promise<SqlValue> {
    let value: SqlValue = null;
    await this.sqlite3.exec(this.handle, sql, (row) => {
      value = (row[0] ?? null) as SqlValue;
    });
    return value;
  }

  /** Finalizes every statement this database prepared, then closes it. */
  async close(): Promise<void> {
    for (const statement of this.statements.splice(0)) await statement.finalize();
    await this.sqlite3.close(this.handle);
  }
}

/** The client's copy of bench.notes (the shape a schema installer would create). */
export const CLIENT_NOTES_SQL = `CREATE TABLE notes (
  id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL,
  position INTEGER NOT NULL, done INTEGER NOT NULL, updated_at TEXT NOT NULL)`;

/** A note as SQLite values, in NOTE_FIELDS order. */
export function noteValues(n: Note): SqlValue[] {
  return [n.id, n.title, n.body, n.position, n.done ? 1 : 0, n.updated_at];
}

/**
 * A fingerprint of the client's notes (count, sums of position, done and text lengths), so a
 * check catches rows that arrived but with the wrong values, not only missing rows.
 */
export async function clientFingerprint(db: ClientDb): Promise<string> {
  let out = '';
  await db.sqlite3.exec(db.handle, 'SELECT count(*), sum(position), sum(done), sum(length(title) + length(body)) FROM notes', (row) => {
    out = row.map((v) => String(v ?? 0)).join('/');
  });
  return out;
}

/** The same fingerprint computed from the source rows (ASCII text, so lengths agree). */
export function notesFingerprint(notes: readonly Note[]): string {
  let position = 0;
  let done = 0;
  let text = 0;
  for (const n of notes) {
    position += n.position;
    done += n.done ? 1 : 0;
    text += n.title.length + n.body.length;
  }
  return [notes.length, position, done, text].join('/');
}

/** Baseline: the same rows straight into wa-sqlite, one prepared INSERT, one transaction. */
export async function directInsert(db: ClientDb, notes: readonly Note[]): Promise<void> {
  const insert = await db.prepare('INSERT INTO notes (id, title, body, position, done, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
  await db.exec('BEGIN');
  for (const n of notes) await insert.run(noteValues(n));
  await db.exec('COMMIT');
}
