/** Every migration of the `sync` layout, oldest first. Add new ones at the end; never edit one. */
import { type Migration } from './migration.js';
import { migration0001 } from './0001-initial.js';
import { migration0002 } from './0002-versioned-layout.js';
import { migration0003 } from './0003-commit-key-probes.js';
import { migration0004 } from './0004-push-notifications.js';

export const MIGRATIONS: readonly Migration[] = [migration0001, migration0002, migration0003, migration0004];

export { type Migration } from './migration.js';
