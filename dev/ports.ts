/**
 * Checks a port before `npm start` commits to it, so a busy port is one line naming the process
 * that holds it and the setting that moves this one elsewhere, not a stack trace or a silent exit.
 */
import { createServer } from 'node:net';
import { portHolder } from './processes.js';
import { StartupError } from './startup-error.js';

/** Whether this process could listen on `host:port` now. */
export function canListen(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** The one-line error for a port that is taken. */
export function portBusyError(port: number, setting: string, role: string): StartupError {
  const holder = portHolder(port);
  return new StartupError(
    `port ${port} (${setting}, ${role}) is already in use${holder ? ` by ${holder}` : ''}: stop that process, or set ${setting} to a free port`,
  );
}

/** Throws `portBusyError` unless `host:port` is free. */
export async function assertPortFree(port: number, host: string, setting: string, role: string): Promise<void> {
  if (!(await canListen(port, host))) throw portBusyError(port, setting, role);
}
