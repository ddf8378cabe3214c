/**
 * Runs `npm start` as a developer would, in its own process group, on ports and a data folder of
 * the test's choosing (never the defaults 8787/54329, which a developer may be using), and
 * reports what it printed and which processes it runs: npm, the server (dev/start.ts), the
 * embedded PostgreSQL and its watchdog.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isAlive } from '../../dev/processes.js';
import { HANG_MS } from './until.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface StartedProcess {
  readonly npm: ChildProcess;
  /** Everything printed so far (stdout and stderr). */
  output(): string;
  /** Resolves with the output once `pattern` appears; rejects if npm exits first or after `ms`. */
  waitFor(pattern: RegExp, ms?: number): Promise<string>;
  /** Resolves with npm's exit code (null: killed by a signal). */
  readonly exited: Promise<number | null>;
}

export function npmStart(env: Record<string, string>): StartedProcess {
  const childEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('npm_')) childEnv[key] = value;
  delete childEnv['DATABASE_URL'];
  const npm = spawn('npm', ['start'], { cwd: ROOT, env: { ...childEnv, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let text = '';
  const listeners = new Set<() => void>();
  const append = (chunk: Buffer) => {
    text += chunk.toString();
    for (const listener of listeners) listener();
  };
  npm.stdout?.on('data', append);
  npm.stderr?.on('data', append);
  const exited = new Promise<number | null>((resolveExit) => npm.once('exit', (code) => resolveExit(code)));
  return {
    npm,
    output: () => text,
    exited,
    waitFor: (pattern, ms = HANG_MS) =>
      new Promise<string>((resolveWait, reject) => {
        const check = () => {
          if (pattern.test(text)) {
            cleanup();
            resolveWait(text);
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`waited ${ms} ms for ${pattern}; npm start printed:\n${text}`));
        }, ms);
        const onExit = () => {
          // Let the last output arrive before deciding.
          setTimeout(() => {
            if (pattern.test(text)) return check();
            cleanup();
            reject(new Error(`npm start exited before printing ${pattern}:\n${text}`));
          }, 200);
        };
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
          npm.off('exit', onExit);
        };
        listeners.add(check);
        npm.once('exit', onExit);
        check();
      }),
  };
}

/** The pid written in a pid file's first line, or null. */
export function pidIn(file: string): number | null {
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/** The watchdog shell that stops postgres `pgPid` (dev/embedded-db.ts), or null. */
export function watchdogOf(pgPid: number): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args.includes('lockstep-postgres-watchdog') && args.includes(String(pgPid))) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  return null;
}

/** Waits until `pid` is gone; false when it is still there after `ms`. */
export async function gone(pid: number, ms = HANG_MS): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

/** Whether something accepts connections on 127.0.0.1:`port`. */
export async function listening(port: number): Promise<boolean> {
  const { connect } = await import('node:net');
  return new Promise((resolveConnect) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolveConnect(true);
    });
    socket.once('error', () => resolveConnect(false));
  });
}

export const dataPaths = (dataDir: string) => ({
  lock: join(dataDir, 'lockstep.pid'),
  postmaster: join(dataDir, 'pg17', 'postmaster.pid'),
  conf: join(dataDir, 'pg17', 'postgresql.conf'),
});
