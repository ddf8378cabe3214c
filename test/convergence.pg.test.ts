/**
 * Issue 10, convergence and no lost acknowledged write: a fast-check model test. Three
 * file-backed clients of one user and one client of another user run random inserts, updates,
 * deletes (cascading list deletes, re-inserted keys), syncs, pushes, pulls, restarts,
 * detach/reattach, rebuilds and discards through a fault proxy that drops requests, drops
 * responses, duplicates requests and answers 503. After healing and draining, the checks of
 * test/support/model-convergence.ts must hold.
 *
 * Size from the environment: CONVERGENCE_SEED (a number, or `random`; fixed by default, random
 * under SOAK), CONVERGENCE_RUNS, CONVERGENCE_COMMANDS;
 * SOAK=1 (npm run soak) runs many more and longer scenarios. A failure prints the fast-check
 * seed and path, the fault seed, and the command list with each command's outcome; pin it
 * under test/regressions/ with runScenario.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScenario, scenarioArb, type RunStats } from './support/model-convergence.js';
import { startTestServer, type TestServer } from './support/server.js';

const soak = process.env['SOAK'] === '1';
// `npm test` replays one fixed seed, so a landing never depends on the luck of a draw; the soak
// (and CONVERGENCE_SEED=random) explores new seeds, and every failure found is pinned.
const seedSetting = process.env['CONVERGENCE_SEED'] ?? (soak ? 'random' : '20261123');
const seed = seedSetting === 'random' ? Date.now() % 2 ** 31 : Number(seedSetting);
const runs = Number(process.env['CONVERGENCE_RUNS'] ?? (soak ? 150 : 12));
const maxCommands = Number(process.env['CONVERGENCE_COMMANDS'] ?? (soak ? 90 : 40));

describe('convergence under faults (model test)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it(`${runs} random scenarios of ≤ ${maxCommands} commands converge, lose nothing and duplicate nothing (seed ${seed})`, async () => {
    let n = 0;
    const all: RunStats[] = [];
    await fc.assert(
      fc.asyncProperty(scenarioArb(maxCommands), async (scenario) => {
        all.push(await runScenario(s, `${seed}-${n++}`, scenario));
      }),
      // Shrinking replays scenarios against a real server; it is on only when asked for.
      { seed, numRuns: runs, endOnFailure: process.env['CONVERGENCE_SHRINK'] !== '1', verbose: true },
    );
    const failures: Record<string, number> = {};
    for (const r of all) for (const [k, v] of Object.entries(r.failures)) failures[k] = (failures[k] ?? 0) + v;
    const faults = all.reduce((sum, r) => sum + Object.entries(r.faults ?? {}).filter(([k]) => k !== 'forwarded').reduce((a, [, v]) => a + v, 0), 0);
    console.log(
      `convergence seed=${seed} runs=${all.length} commands=${all.reduce((a, r) => a + r.commands, 0)} acks=${all.reduce((a, r) => a + r.acks, 0)} ` +
        `keysChecked=${all.reduce((a, r) => a + r.keysChecked, 0)} faults=${faults} failedCalls=${JSON.stringify(failures)} ` +
        `ms=${all.map((r) => r.durationMs).join(',')}`);
    // The model must have exercised something: faults were injected and writes were verified.
    expect(faults).toBeGreaterThan(0);
    expect(all.reduce((a, r) => a + r.keysChecked, 0)).toBeGreaterThan(0);
  }, soak ? 6 * 60 * 60_000 : 1_200_000);
});
