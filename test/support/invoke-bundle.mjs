// Runs in a fresh `node` (plain JavaScript: no TypeScript loader, like Lambda): imports one
// built bundle, invokes its `handler` once per step in the same process (warm invocations), and
// after each step records which server backends serve the bundle's pool (pg_stat_activity rows
// with the bundle's application_name). Prints one line: RESULT <json>.
//
// argv[2]: the plan, or @<file> holding it: {bundle, steps: [{event, context?, remainingMs?} | {args, remainingMs} | {sleepMs}], backends?: {adminUrl, database, applicationName}}
// `remainingMs` gives the step's context a getRemainingTimeInMillis that counts down from it, as
// Lambda's does (a context crosses the process boundary as JSON, which drops functions).
// Whatever else the bundle writes to stdout (its structured logs and metrics) is left for the test.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

// `@<file>`: the plan is in that file (an argument is at most 128 KiB on Linux; events are not).
const arg = process.argv[2] ?? '{}';
const plan = JSON.parse(arg.startsWith('@') ? readFileSync(arg.slice(1), 'utf8') : arg);
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
  // A pause between invocations of the same warm container (time passing for its caches).
  if (step.sleepMs !== undefined) {
    await new Promise((resolve) => setTimeout(resolve, step.sleepMs));
    continue;
  }
  const endsAt = step.remainingMs === undefined ? undefined : Date.now() + step.remainingMs;
  const countdown = endsAt === undefined ? {} : { getRemainingTimeInMillis: () => Math.max(0, endsAt - Date.now()) };
  try {
    if (step.event) {
      const context = step.context || endsAt !== undefined ? { ...step.context, ...countdown } : undefined;
      answer = await mod.handler(step.event, context);
    } else {
      const context = endsAt === undefined ? undefined : countdown;
      answer = await mod.handler(...(step.args ?? []), ...(context ? [context] : []));
    }
  } catch (error) {
    // What Lambda would record as the invocation's error (and, for an asynchronous one, retry).
    answer = { thrown: String(error?.message ?? error) };
  }
  if (answer && typeof answer.body === 'string' && answer.headers?.['content-type'] === 'application/json') {
    answer = { ...answer, json: JSON.parse(answer.body) };
  }
  steps.push({ answer, backends: await backendPids() });
}

await admin?.end();
// The handler's pool keeps idle connections open for warm invocations; a test process ends here,
// once the result (megabytes, for some answers) has gone down the pipe.
process.stdout.write(`RESULT ${JSON.stringify({ importMs, resourcesBefore, resourcesAfterImport, steps })}\n`, () => process.exit(0));
