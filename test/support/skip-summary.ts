/**
 * A vitest reporter that ends the run with what did not run and why: the projects left out for
 * want of something no npm package provides (vitest.config.ts), and every skipped test. Under
 * LOCKSTEP_REQUIRE_ALL=1 (CI) any of them fails the run, unless LOCKSTEP_ALLOW_SKIP names its need.
 */
import type { File } from '@vitest/runner';
import type { Reporter, TestModule, Vitest } from 'vitest/node';
import { ALLOWED_SKIPS, needs, REQUIRE_ALL, type NeedId } from './prerequisites.js';

export interface SkippedProject {
  readonly project: string;
  readonly need: NeedId;
}

const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1;33m${s}\x1b[0m` : s);

export class SkipSummary implements Reporter {
  private filtered = false;
  private vitest: Vitest | undefined;

  constructor(private readonly skippedProjects: readonly SkippedProject[]) {}

  onInit(vitest: Vitest): void {
    // `--project x` chose the projects itself: a project left out is no news then.
    this.filtered = vitest.config.project.length > 0;
    this.vitest = vitest;
  }

  // onFinished, not onTestRunEnd: the default reporter prints its summary there, and this comes after it.
  onFinished(files: File[] = []): void {
    const testModules = files.map((f) => this.vitest?.state.getReportedEntity(f)).filter((m): m is TestModule => m?.type === 'module');
    const lines: string[] = [];
    let fatal = false;
    if (!this.filtered) {
      for (const { project, need } of this.skippedProjects) {
        lines.push(`  ${project}: not run — ${needs()[need].missing}`);
        if (REQUIRE_ALL && !ALLOWED_SKIPS.includes(need)) fatal = true;
      }
    }
    const skippedTests: string[] = [];
    // `-t pattern` skips the rest on purpose: those are not missing anything.
    if (!this.vitest?.config.testNamePattern) for (const module of testModules) {
      for (const test of module.children.allTests()) {
        if (test.result().state !== 'skipped') continue;
        skippedTests.push(`  ${module.project.name}: ${module.moduleId.replace(`${process.cwd()}/`, '')} > ${test.fullName}`);
      }
    }
    if (skippedTests.length) {
      const missing = Object.values(needs()).filter((n) => !n.available);
      lines.push(...skippedTests);
      for (const n of missing) lines.push(`  missing here: ${n.id} — ${n.missing}`);
      // A skip tolerated by LOCKSTEP_ALLOW_SKIP is one whose need is missing and allowed.
      const tolerated = missing.length > 0 && missing.every((n) => ALLOWED_SKIPS.includes(n.id));
      if (REQUIRE_ALL && !tolerated) fatal = true;
    }
    if (lines.length === 0) return;
    console.log(`\n${bold(` SKIPPED (${this.skippedProjects.length && !this.filtered ? `${this.skippedProjects.length} project(s), ` : ''}${skippedTests.length} test(s))`)}`);
    for (const line of lines) console.log(line);
    if (fatal) {
      console.log(bold(' LOCKSTEP_REQUIRE_ALL=1: a skip is a failure here (CI installs everything; see .ci/run)'));
      process.exitCode = 1;
    } else if (REQUIRE_ALL) {
      console.log(` tolerated by LOCKSTEP_ALLOW_SKIP=${ALLOWED_SKIPS.join(',')}`);
    }
    console.log('');
  }
}
