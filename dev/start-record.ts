/**
 * The record a running `npm start` keeps in its data folder (`lockstep.pid`): its pid, its command
 * line (so a pid reused by another process is not taken for it) and, once PostgreSQL serves, the
 * database URL. The scripts that work on the running database (`npm run seed`, `npm run status`)
 * read it, so they find that database wherever LOCKSTEP_PG_PORT moved it; LOCKSTEP_DATA_DIR tells
 * them which start, as it tells `npm start` where to keep its data.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { commandLine, isAlive } from './processes.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const FILE = 'lockstep.pid';
const DATABASE_PREFIX = 'database ';

export interface StartRecord {
  readonly pid: number;
  /** The command line of `pid` when it wrote the record. */
  readonly command: string;
  /** The embedded database it serves; absent until PostgreSQL is up (or with DATABASE_URL). */
  readonly databaseUrl?: string | undefined;
}

/** The data folder of `npm start` under `env`: LOCKSTEP_DATA_DIR, else `.data` in the project. */
export function dataRootOf(env: Record<string, string | undefined>): string {
  return resolve(env['LOCKSTEP_DATA_DIR'] ?? join(ROOT, '.data'));
}

export function startRecordPath(dataRoot: string): string {
  return join(dataRoot, FILE);
}

/** The record in `dataRoot`, or null when there is none. */
export function readStartRecord(dataRoot: string): StartRecord | null {
  const file = startRecordPath(dataRoot);
  if (!existsSync(file)) return null;
  const [pidText = '', command = '', ...rest] = readFileSync(file, 'utf8').split('\n');
  const database = rest.find((line) => line.startsWith(DATABASE_PREFIX));
  return { pid: Number(pidText), command: command.trim(), databaseUrl: database?.slice(DATABASE_PREFIX.length).trim() };
}

/** The record of a start that still runs (its pid alive with the same command line), or null. */
export function livingStart(dataRoot: string): StartRecord | null {
  const record = readStartRecord(dataRoot);
  if (!record || !Number.isInteger(record.pid) || record.pid <= 0) return null;
  return isAlive(record.pid) && commandLine(record.pid) === record.command ? record : null;
}

/** Writes this process's record (and, once known, the database URL). */
export function writeStartRecord(dataRoot: string, databaseUrl?: string): void {
  mkdirSync(dataRoot, { recursive: true });
  const lines = [String(process.pid), commandLine(process.pid) ?? '', ...(databaseUrl ? [`${DATABASE_PREFIX}${databaseUrl}`] : [])];
  writeFileSync(startRecordPath(dataRoot), `${lines.join('\n')}\n`);
}

/** Where a script finds the database it works on, and how it found it (for its error message). */
export interface LocalDatabaseTarget {
  readonly url: string;
  readonly found: string;
}

/**
 * The database of `npm run seed` and `npm run status`: DATABASE_URL when set; else the one the
 * running `npm start` of LOCKSTEP_DATA_DIR (default `.data`) recorded; else the embedded default
 * on LOCKSTEP_PG_PORT (54329).
 */
export function localDatabase(env: Record<string, string | undefined>): LocalDatabaseTarget {
  if (env['DATABASE_URL']) return { url: env['DATABASE_URL'], found: 'DATABASE_URL' };
  const dataRoot = dataRootOf(env);
  const start = livingStart(dataRoot);
  if (start?.databaseUrl) return { url: start.databaseUrl, found: `the npm start (pid ${start.pid}) recorded in ${startRecordPath(dataRoot)}` };
  const port = env['LOCKSTEP_PG_PORT'] ?? '54329';
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/lockstep`,
    found: `no running npm start recorded in ${startRecordPath(dataRoot)}, so the embedded default on port ${port}`,
  };
}

/** One line for a database that did not answer: what was tried and which variable to set. */
export function unreachableMessage(target: LocalDatabaseTarget, error: unknown): string {
  const reason = error instanceof Error ? error.message : String(error);
  return `no database answers at ${new URL(target.url).host} (${target.found}): ${reason}. ` +
    'Is npm start running? Run this with the LOCKSTEP_DATA_DIR that start uses (it records its database there), or set DATABASE_URL.';
}
