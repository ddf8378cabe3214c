/** vitest globalSetup: one PostgreSQL server per project, its admin URL provided to workers. */
import type { TestProject } from 'vitest/node';
import { startPgServer, type PgMajor } from './pg-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgMajor: number;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const major: PgMajor = project.name.includes('16') ? 16 : 17;
  const server = await startPgServer(major);
  project.provide('pgAdminUrl', server.adminUrl);
  project.provide('pgMajor', major);
  return () => server.stop();
}
