/** The sync worker of the value-fidelity fixture: the scenario's local tables (test/support/value-fidelity.ts). */
import { hostSyncWorker } from '../../../client-web/browser/worker-host.js';
import { FIDELITY_LOCAL_SQL, FIDELITY_TABLES } from '../value-fidelity.js';

hostSyncWorker({
  schemaSql: FIDELITY_LOCAL_SQL,
  tables: FIDELITY_TABLES,
  watch: 'off',
  retry: { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200 },
});
