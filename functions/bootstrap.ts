/**
 * Lambda: the one-off bootstrap (invoke it once per deployment, e.g. `sam remote invoke`).
 * Never part of a request path. Answers `{ok, created, adopted_rows}` or `{ok: false, error, message}`.
 */
import { bootstrap } from '../core/bootstrap/bootstrap.js';
import { runtimeFromEnv } from './edge/runtime.js';

export interface BootstrapAnswer {
  readonly ok: boolean;
  readonly created?: boolean;
  readonly adopted_rows?: number;
  readonly registered_tables?: string[];
  readonly error?: string;
  readonly message?: string;
}

export async function handler(): Promise<BootstrapAnswer> {
  const runtime = await runtimeFromEnv();
  try {
    const result = await bootstrap(runtime.db, { tables: runtime.config.tables, maxSchemaVersion: runtime.config.maxSchemaVersion });
    return {
      ok: true,
      created: result.created,
      adopted_rows: result.adoptedRows,
      registered_tables: result.catalog.map((t) => `${t.schema}.${t.table}`),
    };
  } catch (error) {
    const e = error as { code?: string; message?: string };
    return { ok: false, error: e.code ?? 'bootstrap_failed', message: e.message ?? String(error) };
  }
}
