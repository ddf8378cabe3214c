/** The sync worker of the worker-client fixture: the test app's local tables, watch by long poll, rejected rows quarantined. */
import { hostSyncWorker } from '../../../client-web/browser/worker-host.js';
import { LOCAL_APP_SQL, LOCAL_APP_TABLES } from '../local-app.js';

hostSyncWorker({
  schemaSql: LOCAL_APP_SQL,
  tables: LOCAL_APP_TABLES,
  watch: 'long-poll',
  onRejected: 'quarantine',
  retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200 },
});
