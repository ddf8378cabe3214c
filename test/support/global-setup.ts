/**
 * vitest globalSetup: one PostgreSQL server per project, its admin URL provided to workers.
 * Projects named `pgbouncer*` also start PgBouncer (transaction pooling) in front of it, and
 * projects named `neon*` a WebSocket forwarder for the Neon driver; `pgRuntime` tells the
 * fixtures (test/support/server-db.ts) how the runtime's pool must connect.
 *
 * The first project set up starts the environments of every project the run will set up
 * (test/support/run-plan.ts), together; each project's setup then waits for its own, and its
 * teardown stops it. vitest would otherwise start them one after another.
 */
import type { TestProject } from 'vitest/node';
import { startPgServer, type PgMajor } from './pg-server.js';
import { startPgBouncer } from './pgbouncer.js';
import { plannedEnvironments } from './run-plan.js';
import { startWsForwarder } from './ws-forwarder.js';
import { createAppTemplate } from './app-template.js';

/** How runtime pools reach the server: directly, through PgBouncer, or over the Neon driver. */
export interface PgRuntime {
  readonly driver: 'pg' | 'neon';
  /** Set when runtime pools must go through PgBouncer on this port. */
  readonly bouncerPort?: number;
  /** Set for the Neon driver: the WebSocket forwarder (SYNC_NEON_WS_PROXY). */
  readonly neonWsProxy?: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgMajor: number;
    pgRuntime: PgRuntime;
    /** The bootstrapped app database default test databases are copied from (test/support/app-template.ts). */
    pgAppTemplate: string;
  }
}

interface Environment {
  readonly adminUrl: string;
  readonly major: PgMajor;
  readonly runtime: PgRuntime;
  readonly template: string;
  stop(): Promise<void>;
}

/** A project's server, pooler or forwarder, and template; stops what it started if a step fails. */
async function startEnvironment(project: string): Promise<Environment> {
  const major: PgMajor = project.includes('16') ? 16 : 17;
  const server = await startPgServer(major);
  const stops: Array<() => Promise<void>> = [() => server.stop()];
  const stop = async (): Promise<void> => {
    for (const step of stops) await step();
  };
  try {
    let runtime: PgRuntime = { driver: 'pg' };
    if (project.startsWith('pgbouncer')) {
      const bouncer = await startPgBouncer(server.adminUrl);
      stops.unshift(() => bouncer.stop());
      runtime = { driver: 'pg', bouncerPort: bouncer.port };
    } else if (project.startsWith('neon')) {
      const target = new URL(server.adminUrl);
      const forwarder = await startWsForwarder({ allow: [`${target.hostname}:${target.port || '5432'}`] });
      stops.unshift(() => forwarder.close());
      runtime = { driver: 'neon', neonWsProxy: forwarder.proxy };
    }
    const template = await createAppTemplate(server.adminUrl, project);
    // Dropped before its server stops (the last of `stops`), which matters only for DATABASE_URL.
    stops.splice(stops.length - 1, 0, template.drop);
    return { adminUrl: server.adminUrl, major, runtime, template: template.name, stop };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

// Shared by every project's copy of this module (each project loads it through its own runner).
const STARTED = Symbol.for('lockstep.test.environments');
interface Started {
  readonly starts: Map<string, Promise<Environment>>;
  readonly claimed: Set<string>;
}
const started: Started = ((globalThis as Record<symbol, Started | undefined>)[STARTED] ??= { starts: new Map(), claimed: new Set() });

function environmentOf(project: string): Promise<Environment> {
  let start = started.starts.get(project);
  if (!start) {
    start = startEnvironment(project);
    // Its own setup awaits it and reports a failure; until then it must not count as unhandled.
    start.catch(() => undefined);
    started.starts.set(project, start);
  }
  return start;
}

/** After a failed setup vitest sets up no further project: stop what was started for them. */
async function stopUnclaimed(): Promise<void> {
  const unclaimed = [...started.starts].filter(([project]) => !started.claimed.has(project));
  await Promise.all(unclaimed.map(([, start]) => start.then((env) => env.stop(), () => undefined)));
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  for (const planned of plannedEnvironments()) void environmentOf(planned);
  let env: Environment;
  try {
    env = await environmentOf(project.name);
  } catch (error) {
    // Its start stopped what it had started; the others' are stopped here.
    started.starts.delete(project.name);
    await stopUnclaimed();
    throw error;
  }
  started.claimed.add(project.name);
  project.provide('pgAdminUrl', env.adminUrl);
  project.provide('pgAppTemplate', env.template);
  project.provide('pgMajor', env.major);
  project.provide('pgRuntime', env.runtime);
  return async () => {
    // Forgotten first: a later setup of the same project (a restart in watch mode) starts anew.
    started.starts.delete(project.name);
    started.claimed.delete(project.name);
    await env.stop();
  };
}
