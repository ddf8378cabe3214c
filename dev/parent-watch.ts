/**
 * `npm start` runs as npm → (sh) → tsx → node. A signal to npm alone, or a hard kill of any of
 * them, used to leave this node process serving with its parent gone. This watches the launchers
 * (each ancestor npm started, and npm itself: the first ancestor without npm's environment) and
 * calls `onGone` as soon as one of them is gone, so the server stops with whatever started it.
 */
import { hasEnv, isAlive, parentOf } from './processes.js';

/** The launching ancestors of this process, nearest first. */
export function launchers(): number[] {
  const chain: number[] = [];
  for (let pid: number | null = process.ppid; pid !== null && pid > 1 && chain.length < 8; pid = parentOf(pid)) {
    chain.push(pid);
    // npm gives the processes it starts `npm_lifecycle_event`; the first ancestor without it is
    // npm itself (or tsx, run directly), the last one whose end means ours.
    if (!hasEnv(pid, 'npm_lifecycle_event')) break;
  }
  return chain;
}

/** Polls every `intervalMs`; returns a function that stops watching. */
export function watchLaunchers(onGone: (pid: number) => void, intervalMs = 500): () => void {
  const watched = launchers();
  const originalParent = process.ppid;
  const timer = setInterval(() => {
    // A reparented process has lost its parent even if that pid was reused since.
    const gone = process.ppid !== originalParent ? originalParent : watched.find((pid) => !isAlive(pid));
    if (gone !== undefined) {
      clearInterval(timer);
      onGone(gone);
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
