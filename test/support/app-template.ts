/**
 * The app database every default test server starts from, prepared once per PostgreSQL server by
 * the real bootstrap (globalSetup) and then copied by `CREATE DATABASE … TEMPLATE` for each test.
 * A copy is the bootstrapped database byte for byte, in ~30 ms instead of ~220 ms for a bootstrap;
 * the suite copies it 350 times a run.
 * Bootstrap's own paths (over PgBouncer and the Neon driver too, revalidation, upgrades, custom
 * tables) stay covered by the tests that bootstrap a database themselves.
 */
import pg from 'pg';
import { Db, createPool } from '../../core/db/index.js';
import { bootstrap } from '../../core/bootstrap/bootstrap.js';
import { type TimeBounds } from '../../core/bootstrap/bounds.js';
import { defaultLimits } from '../../core/limits.js';
import { APP_SCHEMA_SQL, APP_TABLES } from './schemas.js';

/**
 * Creates the template on the server at `adminUrl` and answers its name and how to drop it. The
 * name is this run's and this project's own, so projects and runs sharing one server
 * (`DATABASE_URL`) never copy each other's.
 */
export async function createAppTemplate(adminUrl: string, project: string): Promise<{ name: string; drop: () => Promise<void> }> {
  const name = `lockstep_app_template_${process.pid}_${project.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    await bootstrapAppSchema(url.toString());
    // No session may connect to it from now on: a copy needs the template alone, and autovacuum
    // skips a database that allows no connections.
    await admin.query(`ALTER DATABASE ${name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`);
  } finally {
    await admin.end();
  }
  // Best effort, and only of use on a server that outlives the run: a failure here must not keep
  // the teardown from stopping the servers that follow.
  const drop = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: adminUrl });
    try {
      await c.connect();
      await c.query(`ALTER DATABASE ${name} WITH IS_TEMPLATE false`);
      await c.query(`DROP DATABASE ${name}`);
    } catch (error) {
      console.warn(`could not drop the test template ${name}: ${String(error)}`);
    } finally {
      await c.end().catch(() => undefined);
    }
  };
  return { name, drop };
}

/**
 * Creates the app schema in the database at `url` and bootstraps it over a direct connection of
 * its own (for tests whose database is not the shared test server's, or is reached directly).
 * `roleBounds`: bootstrap also sets the role's timeouts in the database (RoleTimeouts=on).
 */
export async function bootstrapAppSchema(url: string, bounds?: TimeBounds, roleBounds = false): Promise<void> {
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  await setup.query(APP_SCHEMA_SQL);
  await setup.end();
  const pool = await createPool({ connectionString: url, max: 2, driver: 'pg' });
  try {
    await bootstrap(new Db(pool, defaultLimits), { tables: APP_TABLES, roleBounds, ...(bounds ? { bounds } : {}) });
  } finally {
    await pool.end();
  }
}
