/** Polling for a condition that something asynchronous (a sync loop, a worker) makes true. */

/** Reads until `done` holds, and answers that value; fails naming the last value read. */
export async function until<T>(what: string, read: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs = 10_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
