/**
 * What `npm start` needs to know about other processes to explain a failed start in one line:
 * whether a pid is alive, what its command line is, who listens on a TCP port, and the chain of
 * processes that launched this one. Linux answers from /proc, so nothing beyond Node is needed;
 * elsewhere `lsof` and `ps` are asked when present, and an unknown answer is said as such.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

const HAS_PROC = existsSync('/proc/self/stat');

/** Whether a process with this pid exists (one of another user counts too). */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The command line of `pid`, or null when it is gone or cannot be read. */
export function commandLine(pid: number): string | null {
  try {
    if (HAS_PROC) return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ') || null;
    return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || null;
  } catch {
    return null;
  }
}

/** The parent of `pid`, or null. */
export function parentOf(pid: number): number | null {
  try {
    if (HAS_PROC) {
      // Field 4 of stat, counted after the command name, which may itself hold spaces and parentheses.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    }
    return Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()) || null;
  } catch {
    return null;
  }
}

/** Whether `pid`'s environment holds `name` (Linux only; false when unreadable). */
export function hasEnv(pid: number, name: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').some((entry) => entry.startsWith(`${name}=`));
  } catch {
    return false;
  }
}

/** The socket inodes listening on `port` (IPv4 and IPv6), from /proc/net/tcp*. */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; column 9 is the inode.
      if (cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A' && cols[9]) inodes.add(cols[9]);
    }
  }
  return inodes;
}

/**
 * The process listening on TCP `port`, as "pid N (command line)", or null when none is found (or
 * it belongs to another user, whose sockets this process cannot see).
 */
export function portHolder(port: number): string | null {
  if (HAS_PROC) {
    const inodes = listeningInodes(port);
    if (inodes.size === 0) return null;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let fds: string[];
      try {
        fds = readdirSync(`/proc/${entry}/fd`);
      } catch {
        continue;
      }
      for (const fd of fds) {
        let target = '';
        try {
          target = readlinkSync(`/proc/${entry}/fd/${fd}`);
        } catch {
          continue;
        }
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode && inodes.has(inode)) return describe(Number(entry));
      }
    }
    return 'a process this user cannot see';
  }
  try {
    const pid = Number(execFileSync('lsof', ['-t', `-iTCP:${port}`, '-sTCP:LISTEN'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n')[0]);
    return pid ? describe(pid) : null;
  } catch {
    return null;
  }
}

/**
 * "pid N (command line)", a long command line shortened in the middle: its end names the script
 * (`... dev/start.ts`), its start the program.
 */
export function describe(pid: number): string {
  const command = commandLine(pid);
  if (!command) return `pid ${pid}`;
  return `pid ${pid} (${command.length > 140 ? `${command.slice(0, 40)} ... ${command.slice(-90)}` : command})`;
}
