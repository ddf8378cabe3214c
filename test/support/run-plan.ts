/**
 * Which projects of this run need a PostgreSQL environment (test/support/global-setup.ts), known
 * before the first of them is set up, so their servers can start together.
 *
 * vitest runs the projects' global setups one after another, and each starts a server, PgBouncer
 * or a WebSocket forwarder, and a bootstrapped template: ~2-3 s apiece, ~17 s for five projects,
 * while no test runs. A setup cannot tell by itself which other projects have files in the run
 * (`--project`, file filters), and a server started for a project that never runs would never be
 * stopped. A reporter can: vitest tells reporters the run's test files (onTestRunStart) before it
 * runs any global setup. Reporters and global setups share the main process, not modules (each
 * project loads its setup file through its own module runner), hence a key on globalThis.
 */
import type { Reporter, TestSpecification } from 'vitest/node';

const PLAN = Symbol.for('lockstep.test.plannedEnvironments');
const SETUP_FILE = /[\\/]test[\\/]support[\\/]global-setup\.ts$/;

type WithPlan = typeof globalThis & { [PLAN]?: ReadonlySet<string> };

export class RunPlan implements Reporter {
  onTestRunStart(specifications: ReadonlyArray<TestSpecification>): void {
    const names = specifications
      .filter((spec) => [spec.project.config.globalSetup].flat().some((file) => SETUP_FILE.test(file)))
      .map((spec) => spec.project.name);
    (globalThis as WithPlan)[PLAN] = new Set(names);
  }
}

/**
 * The projects of this run whose global setup is global-setup.ts; empty when unknown (`vitest
 * list` collects without a test run), in which case each setup starts only its own.
 */
export function plannedEnvironments(): ReadonlySet<string> {
  return (globalThis as WithPlan)[PLAN] ?? new Set();
}
