/** What every benchmark receives, and its signature. */
import { type BenchServer } from './server.js';
import { type Recorder } from './report.js';

export interface BenchContext {
  readonly server: BenchServer;
  /** Scales run counts down for a quick smoke run (`--quick`); never below 3. */
  runs(n: number): number;
  log(message: string): void;
}

export interface Benchmark {
  readonly name: string;
  /** Needs no database: runs even before the server starts. */
  readonly standalone?: boolean;
  /**
   * Runs only when named in `--only` (its own time budget is larger than a plain run can spare,
   * e.g. the capacity ramp).
   */
  readonly optIn?: boolean;
  run(ctx: BenchContext, rec: Recorder): Promise<void>;
}
