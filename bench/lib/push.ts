/** The push protocol driven over HTTP, with the time of each phase. */
import { nowMs } from './stats.js';
import { requestHash, type PushRow } from './rows.js';
import { type HttpClient } from './http-client.js';

export interface PushTiming {
  readonly createMs: number;
  readonly chunksMs: number;
  readonly commitMs: number;
  readonly totalMs: number;
  readonly bundleSeq: number;
  readonly rowCount: number;
}

/** Connects with nothing pending, so the user's scope is initialized empty and accepts pushes. */
export async function initEmpty(client: HttpClient): Promise<void> {
  const answer = await client.post<{ resolution: string }>('/sync/connect', { has_local_pending_rows: false });
  if (!['initialize_empty', 'remote_authoritative'].includes(answer.body.resolution)) {
    throw new Error(`connect answered ${answer.body.resolution}`);
  }
}

/** Push-session create, chunks of `chunkRows`, commit; checks the committed row count. */
export async function pushBundle(client: HttpClient, rows: readonly PushRow[], sourceBundleId: number, chunkRows = 1000): Promise<PushTiming> {
  const hash = requestHash(rows);
  const t0 = nowMs();
  const create = await client.post<{ push_id: string; status: string }>('/sync/push-sessions', {
    source_bundle_id: sourceBundleId,
    planned_row_count: rows.length,
    request_hash: hash,
  });
  if (create.body.status !== 'staging') throw new Error(`push-session create answered ${create.body.status}`);
  const t1 = nowMs();
  for (let start = 0; start < rows.length; start += chunkRows) {
    await client.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: start, rows: rows.slice(start, start + chunkRows) });
  }
  const t2 = nowMs();
  const commit = await client.post<{ status: string; bundle_seq: number; row_count: number }>(`/sync/push-sessions/${create.body.push_id}/commit`);
  const t3 = nowMs();
  if (commit.body.status !== 'committed' || commit.body.row_count !== rows.length) {
    throw new Error(`commit answered ${commit.body.status} with ${commit.body.row_count} rows, expected ${rows.length}`);
  }
  return { createMs: t1 - t0, chunksMs: t2 - t1, commitMs: t3 - t2, totalMs: t3 - t0, bundleSeq: commit.body.bundle_seq, rowCount: commit.body.row_count };
}
