/** Every migration of the `sync` layout, oldest first. Add new ones at the end; never edit one. */
import { type Migration } from './migration.js';
import { migration0001 } from './0001-initial.js';
import { migration0002 } from './0002-versioned-layout.js';
import { migration0003 } from './0003-commit-key-probes.js';
import { migration0004 } from './0004-wire-values.js';
import { migration0005 } from './0005-rendered-rows.js';
import { migration0006 } from './0006-push-rows-compared.js';
import { migration0007 } from './0007-counter-ledger.js';
import { migration0008 } from './0008-per-user-caps.js';
import { migration0009 } from './0009-guards.js';
import { migration0010 } from './0010-push-notifications.js';
import { migration0011 } from './0011-operator-status.js';
import { migration0012 } from './0012-table-facts.js';
import { migration0013 } from './0013-unstorable-rows.js';
import { migration0014 } from './0014-isolation.js';
import { migration0015 } from './0015-row-search.js';
import { migration0016 } from './0016-json-text-values.js';
import { migration0017 } from './0017-snapshot-chunks.js';
import { migration0018 } from './0018-user-keyed-layout.js';
import { migration0019 } from './0019-push-throughput.js';
import { migration0020 } from './0020-bounded-reads.js';
import { migration0021 } from './0021-snapshot-join.js';
import { migration0022 } from './0022-read-path-sorts-and-joins.js';
import { migration0023 } from './0023-push-chunk-key-bytes.js';
import { migration0024 } from './0024-parallel-snapshot-render.js';
import { migration0025 } from './0025-row-state-plain-insert.js';
import { migration0026 } from './0026-snapshot-row-arrays.js';
import { migration0027 } from './0027-page-parts.js';
import { migration0028 } from './0028-request-texts.js';

export const MIGRATIONS: readonly Migration[] = [
  migration0001, migration0002, migration0003, migration0004, migration0005, migration0006, migration0007, migration0008, migration0009,
  migration0010, migration0011, migration0012, migration0013, migration0014, migration0015, migration0016, migration0017,
  migration0018, migration0019, migration0020, migration0021, migration0022, migration0023, migration0024, migration0025,
  migration0026, migration0027, migration0028,
];

export { type Migration } from './migration.js';
