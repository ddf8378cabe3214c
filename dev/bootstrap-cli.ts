/**
 * `npm run bootstrap`: the one-off bootstrap against DATABASE_URL and SYNC_TABLES. Exit 0 when
 * the layout is ready; otherwise non-zero with the typed error on stderr.
 */
import { loadConfig } from '../core/config.js';
import { Db, createPool } from '../core/db/index.js';
import { bootstrap } from '../core/bootstrap/bootstrap.js';

async function main(): Promise<number> {
  const config = loadConfig();
  const pool = await createPool({
    connectionString: config.databaseUrl,
    max: 2,
    driver: config.dbDriver,
    ...(config.neonWsProxy ? { neonWsProxy: config.neonWsProxy } : {}),
  });
  const db = new Db(pool, { statementTimeoutMs: config.limits.statementTimeoutMs, lockTimeoutMs: config.limits.lockTimeoutMs });
  try {
    const result = await bootstrap(db, { tables: config.tables, maxSchemaVersion: config.maxSchemaVersion });
    console.log(
      result.created
        ? `ready: created the sync layout for ${result.catalog.length} table(s), adopted ${result.adoptedRows} existing row(s)`
        : `ready: the existing sync layout is coherent (${result.catalog.length} table(s)); nothing changed`,
    );
    return 0;
  } catch (error) {
    const e = error as { code?: string; message?: string };
    console.error(`${e.code ?? 'bootstrap_failed'}: ${e.message ?? String(error)}`);
    return e.code === 'unsupported_schema' ? 2 : e.code === 'managed_layout_mismatch' ? 3 : 1;
  } finally {
    await pool.end();
  }
}

main().then((code) => process.exit(code), (error: unknown) => {
  console.error(`bootstrap_failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
