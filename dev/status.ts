/**
 * `npm run status -- --user <id>`: one user's status for an operator (issue 17 item 7), read
 * straight from the database (DATABASE_URL, or the running `npm start` database its record in
 * LOCKSTEP_DATA_DIR names) with the same function the IAM-authorized route
 * GET /syncx/operator/users/{user_id} answers with. `--json` prints it as JSON.
 *
 *   npm run status -- --user alice
 *
 * Exit 0 with the status, 3 for a user the server has never seen, 2 for bad arguments, 1 for
 * anything else.
 */
import { parseArgs } from 'node:util';
import { limitsFromEnv } from '../core/limits.js';
import { localDatabase, unreachableMessage } from './start-record.js';
import { Db, createPool } from '../core/db/index.js';
import { SyncError } from '../core/errors.js';
import { userStatus } from '../core/sync/status/user-status.js';

function usage(problem: string): never {
  console.error(`status: ${problem}\nusage: npm run status -- --user <id> [--json]   (with npm start running, or DATABASE_URL set)`);
  process.exit(2);
}

type Status = Record<string, any>;

const when = (v: unknown): string => (typeof v === 'string' ? v : 'never');

/** The status as an operator reads it: the stream, then one line per source, then what went wrong. */
export function describeStatus(s: Status): string {
  const lines = [
    `user ${s['user_id']} (since ${s['created_at']})`,
    `  stream: latest bundle ${s['latest_bundle_seq']} (${when(s['latest_committed_at'])}), retained floor ${s['retained_floor']}, pruned through ${s['pruned_through']}` +
      (s['scope'] ? `, scope ${s['scope'].status}` : ''),
    `  sessions: ${s['open_push_sessions']} push open, ${s['open_snapshot_sessions']} snapshot open, ${s['staged_bytes']} bytes staged`,
    `  sources: ${s['source_count']}${s['source_count'] > s['sources'].length ? ` (newest ${s['sources'].length} shown)` : ''}`,
  ];
  for (const src of s['sources'] as Status[]) {
    const last = src['last_bundle_seq'] === null ? 'no bundle yet'
      : `last bundle ${src['last_bundle_seq']} (source bundle ${src['last_source_bundle_id']}, ${src['last_row_count']} rows, ${src['last_committed_at']}), ${src['bundles_since_last_push']} bundle(s) since`;
    lines.push(`    ${src['source_id']} [${src['status']}${src['replaced_by_source_id'] ? ` → ${src['replaced_by_source_id']}` : ''}]: ${last}`);
  }
  const c = s['last_conflict'];
  lines.push(c ? `  last conflict: ${c.at} from ${c.source_id}: ${c.message}` : '  last conflict: none');
  const r = s['last_rejection'];
  lines.push(r ? `  last rejection: ${r.at} from ${r.source_id}: ${r.message}` : '  last rejection: none');
  return lines.join('\n');
}

/** The running `npm start`'s database (its record in LOCKSTEP_DATA_DIR), or DATABASE_URL. */
const target = localDatabase(process.env);

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { user: { type: 'string' }, json: { type: 'boolean' } } });
  const userId = values.user ?? usage('--user is required');
  const limits = limitsFromEnv(process.env);
  const pool = await createPool({ connectionString: target.url, max: 1, driver: 'pg' });
  const db = new Db(pool, { statementTimeoutMs: limits.statementTimeoutMs, lockTimeoutMs: limits.lockTimeoutMs });
  try {
    const status = await userStatus(db, userId);
    console.log(values.json ? JSON.stringify(status, null, 2) : describeStatus(status));
    return 0;
  } catch (error) {
    if (error instanceof SyncError && error.code === 'user_not_found') {
      console.error(`status: ${error.message}`);
      return 3;
    }
    throw error;
  } finally {
    await pool.end();
  }
}

main().then((code) => process.exit(code), (error: unknown) => {
  const e = error as { code?: string; message?: string };
  console.error(`status: ${e.code === 'ECONNREFUSED' ? unreachableMessage(target, error) : e.message ?? String(error)}`);
  process.exit(1);
});
