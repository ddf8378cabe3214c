/**
 * The wire schemas are built with `zod/mini`, the functional build a bundler can prune to what is
 * used (~12 KB for a small schema against ~420 KB when the whole build is kept). Pruning needs
 * `import * as z from 'zod/mini'` in each schema module: a namespace re-exported from a module of
 * ours, or `import { z }`, keeps everything (esbuild cannot see through either).
 *
 * What mini lacks is the classic build's English messages (it answers "Invalid input" for
 * everything): every schema module imports this one for its side effect, so they are configured
 * before anything is parsed.
 */
import { $ZodError, config } from 'zod/v4/core';
import en from 'zod/v4/locales/en.js';

config(en());

/** Any failed parse, from this build or the classic one (both extend zod's core error). */
export function isZodError(error: unknown): error is $ZodError {
  return error instanceof $ZodError;
}
