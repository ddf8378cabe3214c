/**
 * Notices quickly that the server is back. While the last sync could not reach it, the sync loop
 * waits longer after each failure (up to 30 s), so after a server restart the app used to stay
 * "unreachable" for 12 s. This asks `/syncx/health` (unauthenticated, cheap, never cached by the
 * service worker) once a second meanwhile, and calls `onBack` as soon as it answers.
 */
const PROBE_INTERVAL_MS = 1000;

export interface ServerWatch {
  /** Starts probing unless it is already; stops by itself once the server answered. */
  probe(): void;
  stop(): void;
}

export function watchServerReturn(onBack: () => void): ServerWatch {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let active = false;
  let stopped = false;
  const tick = async () => {
    const ok = navigator.onLine && (await fetch('/syncx/health', { cache: 'no-store' }).then((r) => r.ok, () => false));
    if (stopped) return;
    if (!ok) {
      timer = setTimeout(() => void tick(), PROBE_INTERVAL_MS);
      return;
    }
    active = false;
    onBack();
  };
  return {
    probe() {
      if (stopped || active) return;
      active = true;
      timer = setTimeout(() => void tick(), PROBE_INTERVAL_MS);
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
