// Runs in a fresh `node` (plain JavaScript: no TypeScript loader, like Lambda): imports one
// built bundle, invokes its `handler` once per step in the same process (warm invocations), and
// after each step records which server backends serve the bundle's pool (pg_stat_activity rows
// with the bundle's application_name). Prints one line: RESULT <json>.
//
// argv[2]: {bundle, steps: [{event, context?} | {args, remainingMs}], backends?: {adminUrl, database, applicationName}}
// Whatever else the bundle writes to stdout (its structured logs and metrics) is left for the test.
import { pathToFileURL } from 'node:url';

const plan = JSON.parse(process.argv[2] ?? '{}');
// What the import leaves running (sockets, timers, file reads): a handler does no I/O at import.
// Taken synchronously on both sides, so the count cannot depend on how busy the machine is.
const resourcesBefore = process.getActiveResourcesInfo();
const importStarted = performance.now();
const mod = await import(pathToFileURL(plan.bundle).href);
const importMs = performance.now() - importStarted;
const resourcesAfterImport = process.getActiveResourcesInfo();

let admin;
if (plan.backends) {
  const { default: pg } = await import('pg');
  admin = new pg.Client({ connectionString: plan.backends.adminUrl, application_name: 'lockstep-bundle-observer' });
  await admin.connect();
}

async function backendPids() {
  if (!admin) return undefined;
  const { rows } = await admin.query('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2 ORDER BY pid', [
    plan.backends.database,
    plan.backends.applicationName,
  ]);
  return rows.map((r) => r.pid);
}

const steps = [];
for (const step of plan.steps) {
  let answer;
  if (step.event) {
    answer = await mod.handler(step.event, step.context);
  } else {
    const context = step.remainingMs === undefined ? undefined : { getRemainingTimeInMillis: () => step.remainingMs };
    answer = await mod.handler(...(step.args ?? []), ...(context ? [context] : []));
  }
  if (answer && typeof answer.body === 'string' && answer.headers?.['content-type'] === 'application/json') {
    answer = { ...answer, json: JSON.parse(answer.body) };
  }
  steps.push({ answer, backends: await backendPids() });
}

await admin?.end();
process.stdout.write(`RESULT ${JSON.stringify({ importMs, resourcesBefore, resourcesAfterImport, steps })}\n`);
// The handler's pool keeps idle connections open for warm invocations; a test process ends here.
process.exit(0);
