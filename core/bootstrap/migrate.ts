/**
 * Installs and upgrades the `sync` layout by its numbered migrations, inside the caller's
 * transaction (bootstrap holds `pg_advisory_xact_lock` around it). A fresh database applies every
 * migration from 1; a database at version N applies N+1 onwards. `sync.meta` records
 * `layout_version` and `min_safe_version` after each one.
 */
import { sql, type Queryable } from '../db/index.js';
import { quoteLiteral } from '../db/sql.js';
import { ManagedLayoutMismatchError } from '../errors.js';
import { LAYOUT_VERSION } from '../layout/version.js';
import { BOOTSTRAP_LOCK_KEY } from './lock.js';
import { MIGRATIONS, type Migration } from './migrations/index.js';

/** The migrations are numbered 1, 2, … without gaps, and the last one is this build's version. */
function checkSequence(migrations: readonly Migration[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration #${i + 1} is numbered ${m.version}`);
    if (m.minSafeVersion < 1 || m.minSafeVersion > m.version) throw new Error(`migration ${m.version}: minSafeVersion ${m.minSafeVersion} is out of range`);
  });
  const last = migrations.at(-1)?.version;
  if (last !== LAYOUT_VERSION) throw new Error(`LAYOUT_VERSION is ${LAYOUT_VERSION} but the last migration is ${String(last)}`);
}
checkSequence(MIGRATIONS);

export interface LayoutVersion {
  readonly version: number;
  readonly minSafeVersion: number;
}

/**
 * The layout a database holds: null without a `sync` schema. The first release recorded no
 * minimum safe version; it served only itself, so its minimum is its version.
 *
 * A `sync` schema whose own bookkeeping (`sync.meta`, `sync.table_catalog`) is missing or has
 * another shape is drift, reported as ManagedLayoutMismatchError. It is checked in the catalogs
 * first: a failing read inside bootstrap's transaction would abort it, and every statement after
 * it would fail with a raw 25P02 instead of naming what is wrong.
 */
export async function readLayoutVersion(db: Queryable): Promise<LayoutVersion | null> {
  const [row] = await db.query<{ has_sync: boolean; problems: string[] | null }>(sql`
    SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'sync') AS has_sync,
           (SELECT array_agg(problem ORDER BY problem) FROM (
              SELECT format('table %s is missing', t.name) AS problem FROM (VALUES ('sync.meta'), ('sync.table_catalog')) t(name)
               WHERE to_regclass(t.name) IS NULL
              UNION ALL
              SELECT format('table sync.meta has no text column %s', c.name) FROM (VALUES ('key'), ('value')) c(name)
               WHERE to_regclass('sync.meta') IS NOT NULL AND NOT EXISTS (
                 SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass('sync.meta') AND a.attname = c.name
                    AND a.atttypid = 'text'::regtype AND NOT a.attisdropped)) p) AS problems`);
  if (!row?.has_sync) return null;
  if (row.problems?.length) throw new ManagedLayoutMismatchError([...row.problems, 'the schema sync exists but is not a coherent Lockstep layout']);
  const meta = await db.query<{ key: string; value: string }>(sql`
    SELECT key, value FROM sync.meta WHERE key IN ('layout_version', 'min_safe_version')`);
  const get = (key: string): number | undefined => {
    const value = meta.find((m) => m.key === key)?.value;
    return value === undefined ? undefined : Number(value);
  };
  const version = get('layout_version') ?? 0;
  return { version, minSafeVersion: get('min_safe_version') ?? version };
}

export interface MigrateResult {
  readonly from: number;
  readonly to: number;
}

/**
 * Applies the migrations after `from` up to `target` (default: all of them) in the caller's
 * transaction. Tests pass a lower target to build older layouts.
 */
export async function migrateLayout(tx: Queryable, from: number, target = LAYOUT_VERSION, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrateResult> {
  // Under the bootstrap lock (already held when bootstrap calls this): migrations serialise, and
  // the guard of the sync tables lets their writes through. Bodies are checked when they run,
  // not when a migration creates them (see migration.ts).
  await tx.simple(`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY}), set_config('check_function_bodies', 'off', true)`);
  let at = from;
  for (const m of migrations) {
    if (m.version <= from || m.version > target) continue;
    const steps = [
      ...(m.dropFunctions ?? []).map((signature) => `DROP FUNCTION IF EXISTS ${signature}`),
      ...(m.statements ?? []),
      ...(m.functions ?? []).map((f) => f.sql),
      ...(m.afterFunctions ?? []),
      `INSERT INTO sync.meta (key, value) VALUES ('layout_version', ${quoteLiteral(String(m.version))}),
         ('min_safe_version', ${quoteLiteral(String(m.minSafeVersion))})
       ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
    ];
    await tx.simple(steps.join(';\n'));
    at = m.version;
  }
  await tx.simple(`SELECT set_config('check_function_bodies', 'on', true)`);
  return { from, to: at };
}
