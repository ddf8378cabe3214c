/**
 * The record of which migration last installed each managed function, and the hash of the
 * normalized text it installed (function-hashes.json). `test/layout-migrations.test.ts` checks that
 * every function's current text still has that hash: editing a function (beyond comments and
 * formatting) without a migration that re-creates it would leave upgraded databases running the
 * old text while fresh ones run the new.
 *
 * `npm run layout:hashes` records the hashes of the newest migration's functions. It refuses to
 * change the entry of an older migration: add a migration instead.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sqlHash, type ManagedFunction } from '../../layout/managed-sql.js';
import { type Migration } from './migration.js';

export type FunctionHashes = Record<string, { readonly version: number; readonly hash: string }>;

export const HASHES_FILE = fileURLToPath(new URL('./function-hashes.json', import.meta.url));

/** Each function with the last migration that installs it. */
export function lastInstalls(migrations: readonly Migration[]): Map<string, { version: number; fn: ManagedFunction }> {
  const out = new Map<string, { version: number; fn: ManagedFunction }>();
  for (const m of migrations) for (const fn of m.functions ?? []) out.set(fn.signature, { version: m.version, fn });
  for (const m of migrations) for (const dropped of m.dropFunctions ?? []) {
    const last = out.get(dropped);
    // A migration drops before it creates (migrate.ts): its own re-creation of a dropped signature stays.
    if (last && (last.version < m.version || !(m.functions ?? []).some((f) => f.signature === dropped))) out.delete(dropped);
  }
  return out;
}

/** What function-hashes.json should say for these migrations. */
export function expectedHashes(migrations: readonly Migration[]): FunctionHashes {
  const out: FunctionHashes = {};
  for (const [signature, { version, fn }] of [...lastInstalls(migrations)].sort(([a], [b]) => (a < b ? -1 : 1))) {
    out[signature] = { version, hash: sqlHash(fn.sql) };
  }
  return out;
}

export function readHashes(): FunctionHashes {
  return JSON.parse(readFileSync(HASHES_FILE, 'utf8')) as FunctionHashes;
}

/** Problems between the recorded and the current hashes, phrased as what to do. */
export function hashProblems(recorded: FunctionHashes, expected: FunctionHashes, newest: number): string[] {
  const problems: string[] = [];
  for (const [signature, want] of Object.entries(expected)) {
    const have = recorded[signature];
    if (!have) problems.push(`${signature}: not recorded (run npm run layout:hashes after adding it to migration ${want.version})`);
    else if (have.version !== want.version || have.hash !== want.hash) {
      problems.push(have.version < newest && have.version === want.version
        ? `${signature} changed since migration ${have.version} installed it: add a migration that re-creates it, then run npm run layout:hashes`
        : `${signature}: recorded ${have.version}/${have.hash.slice(0, 12)}, now ${want.version}/${want.hash.slice(0, 12)} (run npm run layout:hashes)`);
    }
  }
  for (const signature of Object.keys(recorded)) if (!(signature in expected)) problems.push(`${signature}: recorded but no migration installs it`);
  return problems;
}

/** `npm run layout:hashes`: writes the file, refusing to rewrite history. */
export function writeHashes(migrations: readonly Migration[]): void {
  const newest = migrations.at(-1)?.version ?? 0;
  const recorded = (() => {
    try {
      return readHashes();
    } catch {
      return {};
    }
  })();
  const expected = expectedHashes(migrations);
  const rewritten = Object.entries(expected).filter(([signature, want]) => {
    const have = recorded[signature];
    return have !== undefined && have.version === want.version && want.version < newest && have.hash !== want.hash;
  });
  if (rewritten.length) {
    throw new Error(`refusing to change what older migrations installed:\n${rewritten.map(([s, w]) => `  - ${s} (migration ${w.version}): add a migration that re-creates it`).join('\n')}`);
  }
  writeFileSync(HASHES_FILE, `${JSON.stringify(expected, null, 2)}\n`);
}
