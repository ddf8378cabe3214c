/**
 * Push notifications in AWS: after a commit, the function that committed posts
 * `{"type":"changed","latest_bundle_seq":n}` to each of the user's WebSocket connections through
 * the API Gateway management API (`POST {endpoint}/@connections/{id}`, SigV4-signed with the
 * function's own role), and forgets the connections API Gateway answers 410 Gone for. The posts
 * run in parallel and are bounded in time: a slow or failing notification never fails or stalls a
 * commit's answer for long. A failed post is reported (`onOutcome`: the runtime logs
 * `notification_failed` and counts `NotificationFailures`, which the template alarms on), and the
 * device still learns of the commit at its next ping, which the ws function answers with the
 * latest bundle when the device is behind (functions/ws.ts).
 */
import { type Queryable } from '../../core/db/index.js';
import { dropConnections, notifyTargets, type CommitNotifier } from '../../core/sync/notify/connections.js';
import { type ChangedMessage } from '../../core/protocol/notify.js';
import { AwsClient } from 'aws4fetch';

/** The role's credentials, as Lambda puts them in the environment. */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
}

export interface ManagementApiOptions {
  /** `https://{api-id}.execute-api.{region}.amazonaws.com/{stage}` (SYNC_WS_ENDPOINT). */
  readonly endpoint: string;
  readonly region: string;
  /** Read on every post: Lambda rotates the role's credentials in the environment. */
  readonly credentials: () => AwsCredentials;
  readonly timeoutMs: number;
  /** Observability hook: posts made, connections pruned, failures. */
  readonly onOutcome?: (outcome: NotifyOutcome) => void;
}

export interface NotifyOutcome {
  readonly userId: string;
  readonly posted: number;
  readonly gone: number;
  readonly failed: number;
  /** How many posts ended with each HTTP status; `0` counts posts that got no answer (timeout, network). */
  readonly statuses: Readonly<Record<string, number>>;
}

/** Lambda's credentials and region from its environment. */
export function lambdaCredentials(env: Record<string, string | undefined> = process.env): AwsCredentials {
  return {
    accessKeyId: env['AWS_ACCESS_KEY_ID'] ?? '',
    secretAccessKey: env['AWS_SECRET_ACCESS_KEY'] ?? '',
    sessionToken: env['AWS_SESSION_TOKEN'],
  };
}

export function managementApiNotifier(options: ManagementApiOptions): CommitNotifier {
  const base = options.endpoint.replace(/\/+$/, '');
  async function post(connectionId: string, body: string, signal: AbortSignal): Promise<number> {
    // SigV4 by aws4fetch; a client per post, as the role's credentials rotate in the environment.
    const credentials = options.credentials();
    const client = new AwsClient({ ...credentials, sessionToken: credentials.sessionToken ?? '', service: 'execute-api', region: options.region, retries: 0 });
    const url = `${base}/@connections/${encodeURIComponent(connectionId)}`;
    const response = await client.fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal });
    await response.arrayBuffer().catch(() => undefined);
    return response.status;
  }
  return {
    async committed(db: Queryable, userId: string): Promise<void> {
      const targets = await notifyTargets(db, userId);
      if (targets.connectionIds.length === 0) return;
      const message: ChangedMessage = { type: 'changed', latest_bundle_seq: targets.latestBundleSeq };
      const body = JSON.stringify(message);
      const signal = AbortSignal.timeout(options.timeoutMs);
      const statuses = await Promise.all(targets.connectionIds.map((id) => post(id, body, signal).catch(() => 0)));
      const gone = targets.connectionIds.filter((_, i) => statuses[i] === 410);
      if (gone.length) await dropConnections(db, userId, gone);
      const byStatus: Record<string, number> = {};
      for (const s of statuses) byStatus[String(s)] = (byStatus[String(s)] ?? 0) + 1;
      options.onOutcome?.({
        userId,
        posted: statuses.filter((s) => s >= 200 && s < 300).length,
        gone: gone.length,
        failed: statuses.filter((s) => s !== 410 && (s < 200 || s >= 300)).length,
        statuses: byStatus,
      });
    },
  };
}
