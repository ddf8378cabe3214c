/**
 * CPU time of processes from /proc (Linux), for the capacity run: PostgreSQL's whole process tree
 * (the postmaster, every backend and background worker), the gateway and the load generator,
 * each measured the same way, so "database CPU per request" is CPU the database really used.
 *
 * The postmaster reaps its children, so its cutime/cstime hold the CPU of backends that exited
 * (autovacuum workers, a pooler's recycled connections); adding the live children's own times
 * gives a total whose difference between two readings is exact whatever came and went between.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** USER_HZ: Linux reports /proc times in 1/100 s on every platform Node supports. */
const TICKS_PER_SECOND = 100;

interface Stat {
  readonly ppid: number;
  /** utime + stime, in ticks. */
  readonly own: number;
  /** cutime + cstime (reaped children), in ticks. */
  readonly children: number;
}

function readStat(pid: number): Stat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
  const num = (field: number): number => Number(fields[field - 3]);
  return { ppid: num(4), own: num(14) + num(15), children: num(16) + num(17) };
}

/** Seconds of CPU a single process used so far (its own threads; not its children). */
export function processCpuSeconds(pid: number): number {
  const stat = readStat(pid);
  return stat ? stat.own / TICKS_PER_SECOND : 0;
}

/** Seconds of CPU of a process and all its descendants, live and reaped, so far. */
export function treeCpuSeconds(rootPid: number): number {
  const root = readStat(rootPid);
  if (!root) return 0;
  const children = new Map<number, number[]>();
  const stats = new Map<number, Stat>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = readStat(pid);
    if (!stat) continue;
    stats.set(pid, stat);
    const list = children.get(stat.ppid) ?? [];
    list.push(pid);
    children.set(stat.ppid, list);
  }
  let ticks = root.own + root.children;
  const stack = [...(children.get(rootPid) ?? [])];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    const stat = stats.get(pid);
    if (!stat) continue;
    ticks += stat.own;
    stack.push(...(children.get(pid) ?? []));
  }
  return ticks / TICKS_PER_SECOND;
}

/** The postmaster's pid: the first line of postmaster.pid in its data folder. */
export function postmasterPid(dataDir: string): number {
  const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no postmaster pid in ${dataDir}/postmaster.pid`);
  return pid;
}
