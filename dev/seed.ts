/**
 * `npm run seed -- --user <id> --rows <n>`: gives a demo user many rows, to try hydration (a
 * fresh device signing in downloads them with a progress bar). It writes into the demo's tables
 * of the running `npm start` database (the one its record in LOCKSTEP_DATA_DIR names, or DATABASE_URL)
 * through the server write API, so every device of that user receives the rows like any other
 * change: in committed bundles of source `server:seed`, at most 10,000 rows each.
 *
 *   npm run seed -- --user carol --rows 20000     20 lists of 999 to-dos (1 in 100 with a file)
 */
import { parseArgs } from 'node:util';
import { limitsFromEnv } from '../core/limits.js';
import { localDatabase, unreachableMessage } from './start-record.js';
import { Db, createPool, sql } from '../core/db/index.js';
import { serverWrite } from '../core/sync/push/server-write.js';

const TODOS_PER_LIST = 999;
const ROWS_PER_BUNDLE = 10_000;
const USER_ID = /^[A-Za-z0-9._@-]{1,64}$/;

function usage(problem: string): never {
  console.error(`seed: ${problem}\nusage: npm run seed -- --user <id> --rows <n>   (with npm start running, or DATABASE_URL set)`);
  process.exit(2);
}

/** The running `npm start`'s database (its record in LOCKSTEP_DATA_DIR), or DATABASE_URL. */
const target = localDatabase(process.env);

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { user: { type: 'string' }, rows: { type: 'string' } } });
  const userId = values.user ?? usage('--user is required');
  if (!USER_ID.test(userId)) usage('a user id is 1-64 characters of letters, digits and . _ @ - (as the demo\'s sign-in)');
  const rows = Number(values.rows ?? usage('--rows is required'));
  if (!Number.isInteger(rows) || rows < 1 || rows > 1_000_000) usage('--rows is a whole number from 1 to 1000000');

  const limits = limitsFromEnv(process.env);
  const pool = await createPool({ connectionString: target.url, max: 1, driver: 'pg' });
  const db = new Db(pool, { statementTimeoutMs: limits.statementTimeoutMs, lockTimeoutMs: limits.lockTimeoutMs });
  try {
    // One list per 999 to-dos (the list itself is a row too); the last list takes the rest.
    const lists = Math.ceil(rows / (TODOS_PER_LIST + 1));
    const todos = rows - lists;
    const batch = `${Date.now().toString(36)}`;
    let written = 0;
    for (let first = 1; first <= lists; ) {
      const last = Math.min(lists, first + Math.floor(ROWS_PER_BUNDLE / (TODOS_PER_LIST + 1)) - 1);
      const { bundle } = await serverWrite(db, { userId, sourceId: 'server:seed', retainedBundlesPerUser: limits.retainedBundlesPerUser }, async (tx, scope) => {
        await tx.query(sql`INSERT INTO demo.lists (id, _sync_scope_id, title, created_at)
          SELECT md5(${batch} || ':list:' || l)::uuid, ${scope}, 'Seeded list ' || l, now() + l * interval '1 millisecond'
          FROM generate_series(${first}::int, ${last}::int) l`);
        // The to-dos of list l are numbered (l-1)*999+1 .. l*999, up to `todos` in all.
        await tx.query(sql`INSERT INTO demo.todos (id, _sync_scope_id, list_id, title, done, position, attachment, attachment_name)
          SELECT md5(${batch} || ':todo:' || n)::uuid, ${scope}, md5(${batch} || ':list:' || l)::uuid, 'to-do ' || n, n % 3 = 0, t,
                 CASE WHEN n % 100 = 0 THEN decode('00ff', 'hex') END, CASE WHEN n % 100 = 0 THEN 'note.bin' END
          FROM generate_series(${first}::int, ${last}::int) l,
               LATERAL generate_series(1, ${TODOS_PER_LIST}::int) t,
               LATERAL (SELECT (l - 1) * ${TODOS_PER_LIST}::int + t AS n) k
          WHERE n <= ${todos}::int`);
      });
      written += bundle?.row_count ?? 0;
      console.log(`seed: ${written} / ${rows} rows for ${userId}${bundle ? ` (bundle ${bundle.bundle_seq})` : ''}`);
      first = last + 1;
    }
    console.log(`seed: done; sign in as "${userId}" on a fresh device (a private window) to watch it hydrate`);
  } finally {
    await pool.end();
  }
}

main().catch((error: unknown) => {
  const e = error as { code?: string; message?: string };
  console.error(`seed: ${e.code === 'ECONNREFUSED' ? unreachableMessage(target, error) : e.message ?? String(error)}`);
  process.exit(1);
});
