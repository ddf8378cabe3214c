/**
 * WebSocket connections of each user, kept in `sync.ws_connections` (layout 10): API Gateway owns
 * the sockets, Lambda keeps nothing between invocations, so `$connect` records the connection id
 * and every commit reads its user's ids to post to. Each call is one statement.
 */
import { sql, type Queryable } from '../../db/index.js';
import { SyncError } from '../../errors.js';
import { type Limits } from '../../limits.js';
import { unwrap, type Actor } from '../context.js';

/** The first layout that has `sync.ws_connections` (migration 0010). */
export const NOTIFY_LAYOUT_VERSION = 10;

/** Refuses a notification feature on an older layout with the operator's next step. */
export function requireNotifyLayout(layoutVersion: number): void {
  if (layoutVersion < NOTIFY_LAYOUT_VERSION) {
    throw new SyncError('service_unavailable', `push notifications need sync layout ${NOTIFY_LAYOUT_VERSION} (the database is at ${layoutVersion}): run bootstrap`, {
      reason: 'layout_upgrade_required',
    });
  }
}

/**
 * Registers `connectionId` for the actor at `$connect`; answers the user's latest bundle_seq.
 * `tokenExpiresAt` (seconds since the epoch, the token's `exp`) ends the registration no later
 * than the token: no notification goes to the connection after it (a socket outlives no token).
 */
export async function registerConnection(db: Queryable, limits: Limits, actor: Actor, connectionId: string, tokenExpiresAt?: number): Promise<{ latest_bundle_seq: number }> {
  const tokenLeft = tokenExpiresAt === undefined ? Infinity : Math.floor(tokenExpiresAt - Date.now() / 1000);
  const ttl = Math.max(1, Math.min(limits.wsConnectionTtlSeconds, tokenLeft));
  const [row] = await db.query<{ answer: unknown }>(sql`
    SELECT sync.ws_connect(${actor.userId}, ${actor.sourceId}, ${connectionId}, ${ttl}, ${limits.maxWsConnectionsPerUser}) AS answer`);
  const answer = unwrap<{ latest_bundle_seq: number | string }>(row?.answer);
  return { latest_bundle_seq: Number(answer.latest_bundle_seq) };
}

/** Forgets a user's connections (gone: 410 from the management API, which posted to that user's sockets). */
export async function dropConnections(db: Queryable, userId: string, connectionIds: readonly string[]): Promise<number> {
  if (connectionIds.length === 0) return 0;
  const [row] = await db.query<{ n: number }>(sql`SELECT sync.ws_disconnect(${userId}, ${[...connectionIds]}::text[]) AS n`);
  return Number(row?.n ?? 0);
}

/**
 * Forgets a connection at `$disconnect`, whose event names no user (the socket's token was read at
 * `$connect`): the connection's user is found by its id first (an index probe; on Citus a query of
 * every shard, see docs/scale-out.md), then it is dropped as that user's.
 */
export async function dropConnection(db: Queryable, connectionId: string): Promise<number> {
  const [row] = await db.query<{ n: number | null }>(sql`
    SELECT sum(sync.ws_disconnect(c.user_id, ARRAY[c.connection_id]))::integer AS n FROM sync.ws_connections c WHERE c.connection_id = ${connectionId}`);
  return Number(row?.n ?? 0);
}

export interface NotifyTargets {
  readonly connectionIds: readonly string[];
  readonly latestBundleSeq: number;
}

/** The user's open connections and the bundle_seq to announce. */
export async function notifyTargets(db: Queryable, userId: string): Promise<NotifyTargets> {
  const rows = await db.query<{ connection_id: string; latest_bundle_seq: string }>(sql`
    SELECT connection_id, latest_bundle_seq FROM sync.ws_targets(${userId})`);
  return { connectionIds: rows.map((r) => r.connection_id), latestBundleSeq: Number(rows[0]?.latest_bundle_seq ?? 0) };
}

/**
 * The latest bundle_seq of the user a live connection belongs to, or null for a connection this
 * server does not know (expired, or never registered): a ping's answer (protocol §5.9). One probe
 * of the connection's primary key and one of the user's state row.
 */
export async function connectionLatest(db: Queryable, connectionId: string): Promise<number | null> {
  const [row] = await db.query<{ latest: string }>(sql`
    SELECT u.latest_bundle_seq AS latest
      FROM sync.ws_connections c JOIN sync.user_state u ON u.user_id = c.user_id
     WHERE c.connection_id = ${connectionId} AND c.expires_at > now()`);
  return row ? Number(row.latest) : null;
}

/** Deletes up to `batch` connections past their expiry (maintenance); answers how many. */
export async function expireConnections(db: Queryable, batch: number): Promise<number> {
  const [row] = await db.query<{ n: number }>(sql`
    SELECT coalesce(sum(n), 0)::integer AS n FROM (
      SELECT sync.ws_disconnect(e.user_id, array_agg(e.connection_id)) AS n
        FROM (SELECT user_id, connection_id FROM sync.ws_connections WHERE expires_at <= now() ORDER BY expires_at LIMIT ${batch}) e
       GROUP BY e.user_id) d`);
  return Number(row?.n ?? 0);
}

/**
 * Tells a user's devices that a commit happened, after it committed. In AWS this posts to the
 * API Gateway management API (functions/edge/ws-notifier.ts); a long-running server needs none,
 * since its commit feed hears every commit from PostgreSQL itself.
 */
export interface CommitNotifier {
  committed(db: Queryable, userId: string): Promise<void>;
}
