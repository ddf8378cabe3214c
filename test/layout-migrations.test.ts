/**
 * Issue 14, the versioned layout without a database: migrations are numbered without gaps up to
 * this build's LAYOUT_VERSION; every managed function's text is the one its last migration
 * recorded (function-hashes.json), so an edit without a migration fails here; comments and
 * formatting never count; the version range check answers what an operator must do.
 */
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../core/bootstrap/migrations/index.js';
import { expectedHashes, hashProblems, readHashes } from '../core/bootstrap/migrations/function-hashes.js';
import { managedFunction, normalizeSql, sqlHash } from '../core/layout/managed-sql.js';
import { LAYOUT_VERSION, MIN_SERVED_LAYOUT, servable } from '../core/layout/version.js';

describe('migrations', () => {
  it('are numbered 1…LAYOUT_VERSION without gaps, each with a safe version at or below itself', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(Array.from({ length: LAYOUT_VERSION }, (_, i) => i + 1));
    for (const m of MIGRATIONS) {
      expect(m.minSafeVersion).toBeGreaterThanOrEqual(1);
      expect(m.minSafeVersion).toBeLessThanOrEqual(m.version);
    }
    expect(MIN_SERVED_LAYOUT).toBeLessThanOrEqual(LAYOUT_VERSION);
  });

  it('every managed function still has the text its last migration installed (else: add a migration)', () => {
    const problems = hashProblems(readHashes(), expectedHashes(MIGRATIONS), LAYOUT_VERSION);
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('a function edited without a migration is caught, a comment or reformatting is not', () => {
    const hashes = expectedHashes(MIGRATIONS);
    const [signature, entry] = Object.entries(hashes).find(([, e]) => e.version < LAYOUT_VERSION) ?? Object.entries(hashes)[0]!;
    const edited = { ...hashes, [signature]: { ...entry, hash: 'f'.repeat(64) } };
    expect(hashProblems(edited, hashes, LAYOUT_VERSION).join('\n')).toContain(signature);
    const fn = MIGRATIONS.flatMap((m) => m.functions ?? []).find((f) => f.signature === signature)!;
    const commented = fn.sql.replace('$fn$', '$fn$\n-- a comment added later\n  /* and a block */').replaceAll('\n', '\n   ');
    expect(sqlHash(commented)).toBe(sqlHash(fn.sql));
  });

  it('a function a migration drops and re-creates under the same signature (a changed return type) is recorded as that migration\'s', () => {
    const v1 = managedFunction(`CREATE OR REPLACE FUNCTION sync.f(p_a text) RETURNS bigint LANGUAGE sql AS $fn$ SELECT 1::bigint $fn$`);
    const v2 = managedFunction(`CREATE OR REPLACE FUNCTION sync.f(p_a text) RETURNS text LANGUAGE sql AS $fn$ SELECT p_a $fn$`);
    const base = { minSafeVersion: 1, description: 'a test migration' };
    const hashes = expectedHashes([{ ...base, version: 1, functions: [v1] }, { ...base, version: 2, dropFunctions: ['sync.f(text)'], functions: [v2] }]);
    expect(hashes['sync.f(text)']).toEqual({ version: 2, hash: sqlHash(v2.sql) });
    // Dropped without a re-creation, it is no one's.
    expect(expectedHashes([{ ...base, version: 1, functions: [v1] }, { ...base, version: 2, dropFunctions: ['sync.f(text)'] }])).toEqual({});
  });

  it('no function is installed twice under two signatures, and every migration has a description', () => {
    for (const m of MIGRATIONS) {
      expect(m.description.length).toBeGreaterThan(10);
      const signatures = (m.functions ?? []).map((f) => f.signature);
      expect(new Set(signatures).size).toBe(signatures.length);
    }
  });
});

describe('normalizeSql', () => {
  it('drops comments and collapses whitespace outside literals, keeps literals exactly', () => {
    const text = `SELECT  'a  --not a comment' , E'\\n  x''y', "Odd  Name" -- trailing\n /* block\n comment */ FROM t`;
    expect(normalizeSql(text)).toBe(`SELECT 'a  --not a comment' , E'\\n  x''y', "Odd  Name" FROM t`);
    expect(normalizeSql(`SELECT 'a  b'`)).not.toBe(normalizeSql(`SELECT 'a b'`));
    // An identifier ending in e before a string is not an E-string.
    expect(normalizeSql(`CASE WHEN x THEN 'a\\' ELSE 'b  c' END`)).toBe(`CASE WHEN x THEN 'a\\' ELSE 'b  c' END`);
  });

  it('reads a function signature from its CREATE statement', () => {
    const fn = managedFunction(`CREATE OR REPLACE FUNCTION sync.f(p_a text, p_b numeric(10, 2) DEFAULT 1, p_c jsonb DEFAULT '{}'::jsonb) RETURNS int LANGUAGE sql AS $fn$ SELECT 1 $fn$`);
    expect(fn.name).toBe('sync.f');
    expect(fn.signature).toBe('sync.f(text, numeric(10, 2), jsonb)');
  });
});

describe('which layouts a build serves', () => {
  const build = { version: 5, minServed: 4 };
  it('serves from its minimum up, as long as the database does not rule it out', () => {
    expect(servable({ version: 4, minSafeVersion: 3 }, build).ok).toBe(true);
    expect(servable({ version: 6, minSafeVersion: 5 }, build).ok).toBe(true);
  });
  it('an older layout needs bootstrap; a layout that rules this build out needs a newer build', () => {
    const old = servable({ version: 3, minSafeVersion: 3 }, build);
    expect(old).toMatchObject({ ok: false, reason: 'layout_upgrade_required' });
    expect(!old.ok && old.detail).toMatch(/run bootstrap/);
    const newer = servable({ version: 7, minSafeVersion: 6 }, build);
    expect(newer).toMatchObject({ ok: false, reason: 'layout_upgrade_required' });
    expect(!newer.ok && newer.detail).toMatch(/deploy a newer Lockstep build/);
  });
});
