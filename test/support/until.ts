/** Polling for a condition that something asynchronous (a sync loop, a worker) makes true. */

/**
 * How long a wait for something that should happen gives it before calling it a hang: minutes,
 * so a loaded machine never fails a test that only waits for an event.
 */
export const HANG_MS = 180_000;

/** Reads until `done` holds, and answers that value; fails naming the last value read. */
export async function until<T>(what: string, read: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs = HANG_MS, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Whether `event` settles within `timeoutMs`: a hook that holds a request waits for it this way, never without end. */
export async function settlesWithin(event: Promise<unknown>, timeoutMs = HANG_MS): Promise<boolean> {
  let bound: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([event.then(() => true), new Promise<false>((resolve) => { bound = setTimeout(() => resolve(false), timeoutMs); })]);
  } finally {
    clearTimeout(bound);
  }
}
