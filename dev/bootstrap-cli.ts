/**
 * `npm run bootstrap`: installs or upgrades the `sync` layout and registers SYNC_TABLES against
 * DATABASE_URL. Exit 0 when the layout is ready; otherwise non-zero with the typed error on stderr:
 * 2 unsupported_schema, 3 managed_layout_mismatch, 4 unsafe_schema_change, 5 layout_incompatible,
 * 1 anything else.
 *
 *   npm run bootstrap                                   install, upgrade, apply additive changes
 *   npm run bootstrap -- --accept drop-column:app.t.c   also apply this contract step
 *   npm run bootstrap -- --sql change.sql               run the app's own DDL in the same transaction
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig } from '../core/config.js';
import { Db, createPool } from '../core/db/index.js';
import { bootstrap, type BootstrapResult } from '../core/bootstrap/bootstrap.js';

const EXIT_CODES: Record<string, number> = {
  unsupported_schema: 2,
  managed_layout_mismatch: 3,
  unsafe_schema_change: 4,
  layout_incompatible: 5,
  citus_layout_not_ready: 6,
};

function describe(result: BootstrapResult): string {
  const tables = `${result.catalog.length} table(s)`;
  if (result.created) return `ready: created the sync layout (version ${result.layoutTo}) for ${tables}, adopted ${result.adoptedRows} existing row(s)`;
  if (result.unchanged) return `ready: the sync layout (version ${result.layoutTo}, schema version ${result.schemaVersion}) is coherent for ${tables}; nothing changed`;
  const lines = [`ready: sync layout ${result.layoutFrom === result.layoutTo ? `at version ${result.layoutTo}` : `upgraded from version ${result.layoutFrom} to ${result.layoutTo}`}, schema version ${result.schemaVersion}`];
  for (const change of result.applied) lines.push(`  applied: ${change.message}`);
  if (result.adoptedRows > 0) lines.push(`  adopted ${result.adoptedRows} existing row(s) of newly registered tables`);
  return lines.join('\n');
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { accept: { type: 'string', multiple: true }, sql: { type: 'string' } } });
  const config = loadConfig();
  const pool = await createPool({
    connectionString: config.databaseUrl,
    max: 2,
    driver: config.dbDriver,
    ...(config.neonWsProxy ? { neonWsProxy: config.neonWsProxy } : {}),
  });
  const db = new Db(pool, { statementTimeoutMs: config.limits.statementTimeoutMs, lockTimeoutMs: config.limits.lockTimeoutMs });
  try {
    const result = await bootstrap(db, {
      tables: config.tables,
      maxSchemaVersion: config.maxSchemaVersion,
      accept: values.accept ?? [],
      retainedBundlesPerUser: config.limits.retainedBundlesPerUser,
      bounds: config.limits,
      roleBounds: config.roleTimeouts,
      ...(values.sql ? { applySql: readFileSync(values.sql, 'utf8') } : {}),
    });
    console.log(describe(result));
    if (result.roleBounds.startsWith('refused')) {
      console.warn(`warning: the role's timeout settings could not be changed (${result.roleBounds}); the managed functions' lock bounds and the runtime's own bounds still hold`);
    }
    return 0;
  } catch (error) {
    const e = error as { code?: string; message?: string };
    console.error(`${e.code ?? 'bootstrap_failed'}: ${e.message ?? String(error)}`);
    return EXIT_CODES[e.code ?? ''] ?? 1;
  } finally {
    await pool.end();
  }
}

main().then((code) => process.exit(code), (error: unknown) => {
  console.error(`bootstrap_failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
