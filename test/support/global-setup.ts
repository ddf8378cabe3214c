/**
 * vitest globalSetup: one PostgreSQL server per project, its admin URL provided to workers.
 * Projects named `pgbouncer*` also start PgBouncer (transaction pooling) in front of it, and
 * projects named `neon*` a WebSocket forwarder for the Neon driver; `pgRuntime` tells the
 * fixtures (test/support/server-db.ts) how the runtime's pool must connect.
 */
import type { TestProject } from 'vitest/node';
import { startPgServer, type PgMajor } from './pg-server.js';
import { startPgBouncer } from './pgbouncer.js';
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

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const major: PgMajor = project.name.includes('16') ? 16 : 17;
  const server = await startPgServer(major);
  const stops: Array<() => Promise<void>> = [() => server.stop()];
  let runtime: PgRuntime = { driver: 'pg' };
  if (project.name.startsWith('pgbouncer')) {
    const bouncer = await startPgBouncer(server.adminUrl);
    stops.unshift(() => bouncer.stop());
    runtime = { driver: 'pg', bouncerPort: bouncer.port };
  } else if (project.name.startsWith('neon')) {
    const target = new URL(server.adminUrl);
    const forwarder = await startWsForwarder({ allow: [`${target.hostname}:${target.port || '5432'}`] });
    stops.unshift(() => forwarder.close());
    runtime = { driver: 'neon', neonWsProxy: forwarder.proxy };
  }
  project.provide('pgAdminUrl', server.adminUrl);
  const template = await createAppTemplate(server.adminUrl, project.name);
  // Dropped before its server stops (the last of `stops`), which matters only for DATABASE_URL.
  stops.splice(stops.length - 1, 0, template.drop);
  project.provide('pgAppTemplate', template.name);
  project.provide('pgMajor', major);
  project.provide('pgRuntime', runtime);
  return async () => {
    for (const stop of stops) await stop();
  };
}
