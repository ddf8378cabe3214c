/** The machine a run measured: CPUs, memory, Node and PostgreSQL versions. */
import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, totalmem } from 'node:os';

export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly memory: string;
  readonly node: string;
  readonly platform: string;
  postgres?: string;
}

function freeH(): string {
  try {
    return execFileSync('free', ['-h'], { encoding: 'utf8' }).trim();
  } catch {
    return `${(totalmem() / 2 ** 30).toFixed(1)} GiB total`;
  }
}

export function describeMachine(): Machine {
  return { nproc: availableParallelism(), cpuModel: cpus()[0]?.model ?? 'unknown', memory: freeH(), node: process.version, platform: `${process.platform} ${process.arch}` };
}
