/**
 * The convergence model test's failures, replayed exactly: each scenario runs under the tag
 * (hence the same key UUIDs) and fault seed it failed with. Both failed before the fixes named
 * below and pass after them; the deterministic minimal cases are in orphan-rows.pg.test.ts and
 * server-cascade-row-count.pg.test.ts next to this file.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { runScenario, type Scenario } from '../support/model-convergence.js';
import { startTestServer, type TestServer } from '../support/server.js';

/** Seed 7, run 10: a server-won conflict applied a row whose list was not pulled yet (FK at COMMIT). */
const SEED_7_RUN_10: Scenario = { faultSeed: 192981678, commands: [{"k":"delItem","d":3,"slot":1,"shared":true},{"k":"sync","d":3},{"k":"putItem","d":0,"slot":0,"shared":false,"pick":2},{"k":"putItem","d":3,"slot":0,"shared":false,"pick":4},{"k":"delItem","d":3,"slot":0,"shared":false},{"k":"putList","d":1,"slot":0,"shared":true},{"k":"discard","d":0},{"k":"putList","d":1,"slot":1,"shared":false},{"k":"delItem","d":3,"slot":1,"shared":false},{"k":"putList","d":3,"slot":0,"shared":true},{"k":"putList","d":0,"slot":1,"shared":false},{"k":"putItem","d":1,"slot":0,"shared":true,"pick":3},{"k":"sync","d":2},{"k":"putItem","d":3,"slot":1,"shared":true,"pick":1},{"k":"push","d":3},{"k":"delList","d":0,"slot":1,"shared":true},{"k":"putList","d":3,"slot":1,"shared":false},{"k":"putItem","d":3,"slot":2,"shared":true,"pick":1},{"k":"delList","d":2,"slot":0,"shared":true},{"k":"delItem","d":3,"slot":2,"shared":false},{"k":"delItem","d":3,"slot":1,"shared":true},{"k":"putItem","d":1,"slot":0,"shared":true,"pick":3},{"k":"putList","d":0,"slot":0,"shared":false},{"k":"putItem","d":2,"slot":2,"shared":false,"pick":6},{"k":"putList","d":1,"slot":0,"shared":true},{"k":"delList","d":3,"slot":0,"shared":true},{"k":"putItem","d":2,"slot":1,"shared":true,"pick":6},{"k":"sync","d":0},{"k":"restart","d":1},{"k":"putList","d":2,"slot":1,"shared":true},{"k":"delList","d":2,"slot":1,"shared":true},{"k":"putList","d":1,"slot":1,"shared":true},{"k":"pull","d":2},{"k":"putList","d":1,"slot":1,"shared":false},{"k":"putItem","d":2,"slot":0,"shared":true,"pick":1},{"k":"putList","d":1,"slot":0,"shared":false},{"k":"putList","d":1,"slot":0,"shared":true},{"k":"putItem","d":3,"slot":2,"shared":false,"pick":6},{"k":"putItem","d":3,"slot":1,"shared":true,"pick":3},{"k":"putList","d":2,"slot":0,"shared":false},{"k":"putItem","d":2,"slot":2,"shared":true,"pick":6},{"k":"delList","d":2,"slot":1,"shared":true},{"k":"sync","d":2},{"k":"delItem","d":1,"slot":2,"shared":false},{"k":"sync","d":1},{"k":"putList","d":3,"slot":0,"shared":true},{"k":"putItem","d":1,"slot":0,"shared":true,"pick":6},{"k":"putItem","d":3,"slot":1,"shared":true,"pick":3},{"k":"push","d":1},{"k":"pull","d":0},{"k":"delItem","d":0,"slot":0,"shared":false},{"k":"sync","d":0},{"k":"putList","d":2,"slot":0,"shared":false},{"k":"putList","d":0,"slot":0,"shared":true},{"k":"putList","d":0,"slot":0,"shared":true},{"k":"sync","d":2},{"k":"delItem","d":2,"slot":1,"shared":true},{"k":"pull","d":1},{"k":"pull","d":2}] };

/** Seed 12345, run 2: a list delete cascaded on the server; the replay refused the larger bundle. */
const SEED_12345_RUN_2: Scenario = { faultSeed: 1156741797, commands: [{"k":"delList","d":3,"slot":0,"shared":false},{"k":"sync","d":1},{"k":"discard","d":1},{"k":"sync","d":3},{"k":"sync","d":1},{"k":"putItem","d":3,"slot":1,"shared":false,"pick":4},{"k":"delList","d":1,"slot":0,"shared":true},{"k":"delItem","d":0,"slot":1,"shared":false},{"k":"restart","d":0},{"k":"delList","d":1,"slot":1,"shared":true},{"k":"sync","d":2},{"k":"pull","d":0},{"k":"putItem","d":2,"slot":2,"shared":true,"pick":2},{"k":"push","d":3},{"k":"restart","d":0},{"k":"push","d":3},{"k":"putList","d":0,"slot":1,"shared":true},{"k":"discard","d":2},{"k":"putList","d":0,"slot":0,"shared":true},{"k":"putItem","d":2,"slot":2,"shared":true,"pick":2},{"k":"sync","d":0},{"k":"putItem","d":3,"slot":0,"shared":false,"pick":0},{"k":"push","d":2},{"k":"sync","d":0},{"k":"putItem","d":0,"slot":1,"shared":false,"pick":1},{"k":"restart","d":0},{"k":"rebuild","d":0},{"k":"push","d":1},{"k":"detach","d":1},{"k":"push","d":1},{"k":"putList","d":0,"slot":1,"shared":false},{"k":"putList","d":1,"slot":0,"shared":false},{"k":"putItem","d":1,"slot":2,"shared":false,"pick":4},{"k":"detach","d":1},{"k":"putList","d":1,"slot":0,"shared":true},{"k":"delItem","d":2,"slot":0,"shared":true},{"k":"putItem","d":3,"slot":1,"shared":true,"pick":2},{"k":"sync","d":2},{"k":"putList","d":0,"slot":1,"shared":false},{"k":"restart","d":0},{"k":"delItem","d":3,"slot":1,"shared":true},{"k":"putItem","d":2,"slot":0,"shared":true,"pick":0},{"k":"putList","d":3,"slot":1,"shared":false},{"k":"detach","d":1},{"k":"putList","d":2,"slot":0,"shared":false},{"k":"sync","d":1},{"k":"delList","d":0,"slot":1,"shared":true},{"k":"putItem","d":2,"slot":0,"shared":true,"pick":1},{"k":"putItem","d":2,"slot":1,"shared":false,"pick":0},{"k":"putItem","d":0,"slot":1,"shared":true,"pick":7},{"k":"sync","d":2},{"k":"putItem","d":1,"slot":1,"shared":true,"pick":7},{"k":"pull","d":3},{"k":"putList","d":2,"slot":0,"shared":true},{"k":"restart","d":0},{"k":"restart","d":3},{"k":"delList","d":2,"slot":1,"shared":true},{"k":"putItem","d":3,"slot":2,"shared":false,"pick":4},{"k":"putItem","d":1,"slot":1,"shared":true,"pick":4},{"k":"putList","d":1,"slot":0,"shared":true},{"k":"putList","d":2,"slot":0,"shared":true},{"k":"sync","d":3},{"k":"putList","d":1,"slot":0,"shared":true},{"k":"sync","d":0},{"k":"putList","d":0,"slot":1,"shared":true},{"k":"putList","d":0,"slot":0,"shared":false},{"k":"delList","d":1,"slot":1,"shared":true},{"k":"putList","d":3,"slot":1,"shared":false},{"k":"putList","d":2,"slot":0,"shared":false},{"k":"sync","d":3},{"k":"putList","d":0,"slot":1,"shared":false},{"k":"sync","d":1},{"k":"sync","d":3},{"k":"delItem","d":3,"slot":2,"shared":false},{"k":"putList","d":1,"slot":0,"shared":true}] };

describe('regression: pinned convergence scenarios', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('seed 7, run 10 (orphan rows)', async () => {
    await runScenario(s, '7-10', SEED_7_RUN_10);
  }, 120_000);

  it('seed 12345, run 2 (committed row count above the pushed one)', async () => {
    await runScenario(s, '12345-2', SEED_12345_RUN_2);
  }, 120_000);
});
