/**
 * Client-side helpers for the read-path suites (test/read-*.pg.test.ts): raw GETs that keep the
 * exact response text (byte budgets, hidden-column greps), and drivers that drain a pull to its
 * frozen ceiling or a snapshot to its end, checking the paging invariants on every page.
 */
import { expect } from 'vitest';
import { sql, type Db } from '../../core/db/index.js';
import { defaultLimits } from '../../core/limits.js';
import { serverWrite } from '../../core/sync/push/server-write.js';
import { ROUND_TRIPS_HEADER } from '../../functions/index.js';
import { signToken, type ApiClient } from './server.js';
import { bundleHash, expectStatus } from './write-helpers.js';

export interface RawAnswer {
  readonly status: number;
  readonly text: string;
  readonly bytes: number;
  readonly body: any;
  readonly roundTrips: number;
}

/** One server-originated bundle for `user`: `n` new lists ('server list 1'…). Its bundle_seq. */
export async function serverLists(db: Db, user: string, n: number, retained = defaultLimits.retainedBundlesPerUser): Promise<number> {
  const { bundle } = await serverWrite(db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: retained }, async (tx, scope) => {
    await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title, position)
      SELECT gen_random_uuid(), ${scope}, 'server list ' || g, g FROM generate_series(1, ${n}) g`);
  });
  return Number(bundle?.bundle_seq);
}

const tokens = new Map<string, Promise<string>>();

/** GET with the client's identity, keeping the body text exactly as sent. */
export function rawGet(url: string, c: ApiClient, path: string): Promise<RawAnswer> {
  return rawRequest(url, c, path);
}

/** POST of `body` as JSON with the client's identity, keeping the answer's text exactly as sent. */
export function rawPost(url: string, c: ApiClient, path: string, body: unknown): Promise<RawAnswer> {
  return rawRequest(url, c, path, body);
}

async function rawRequest(url: string, c: ApiClient, path: string, body?: unknown): Promise<RawAnswer> {
  let token = tokens.get(c.userId);
  if (!token) tokens.set(c.userId, (token = signToken(c.userId)));
  const headers = { authorization: `Bearer ${await token}`, 'sync-source-id': c.sourceId };
  const res = await fetch(url + path, body === undefined ? { headers } : { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const buffer = Buffer.from(await res.arrayBuffer());
  const text = buffer.toString('utf8');
  return { status: res.status, text, bytes: buffer.byteLength, body: text ? JSON.parse(text) : undefined, roundTrips: Number(res.headers.get(ROUND_TRIPS_HEADER)) };
}

export interface PulledLog {
  readonly stable: number;
  readonly bundles: any[];
  readonly pages: RawAnswer[];
}

/**
 * Drains `/sync/pull` from `after` to the ceiling frozen by the first page, completing omitted
 * bundles from `/sync/committed-bundles/{seq}/rows`. Checks on every page: bundles contiguous,
 * complete, hashed as committed; the ceiling unchanged.
 */
export async function pullAll(url: string, c: ApiClient, after: number, maxBundles?: number): Promise<PulledLog> {
  const pages: RawAnswer[] = [];
  const bundles: any[] = [];
  let stable: number | undefined;
  let cursor = after;
  for (;;) {
    const q = `after_bundle_seq=${cursor}${maxBundles ? `&max_bundles=${maxBundles}` : ''}${stable !== undefined ? `&target_bundle_seq=${stable}` : ''}`;
    const page = await rawGet(url, c, `/sync/pull?${q}`);
    expect(page.status, page.text).toBe(200);
    pages.push(page);
    if (stable === undefined) stable = page.body.stable_bundle_seq as number;
    expect(page.body.stable_bundle_seq).toBe(stable);
    if (maxBundles) expect(page.body.bundles.length).toBeLessThanOrEqual(maxBundles);
    for (const b of page.body.bundles) {
      expect(b.bundle_seq).toBe(cursor + 1);
      expect(b.bundle_seq).toBeLessThanOrEqual(stable);
      if (b.rows_omitted) {
        expect(b.rows).toEqual([]);
        b.rows = await bundleRows(url, c, b.bundle_seq);
      }
      expect(b.rows.length).toBe(b.row_count);
      expect(bundleHash(b.rows)).toBe(b.bundle_hash);
      bundles.push(b);
      cursor = b.bundle_seq;
    }
    expect(page.body.has_more).toBe(cursor < stable);
    if (!page.body.has_more) break;
    expect(page.body.bundles.length).toBeGreaterThan(0);
  }
  return { stable: stable as number, bundles, pages };
}

/** Every row of a committed bundle, page by page. */
export async function bundleRows(url: string, c: ApiClient, seq: number, maxRows?: number, pages?: RawAnswer[]): Promise<any[]> {
  const rows: any[] = [];
  let after = 0;
  for (;;) {
    const page = await rawGet(url, c, `/sync/committed-bundles/${seq}/rows?after_row_ordinal=${after}${maxRows ? `&max_rows=${maxRows}` : ''}`);
    expect(page.status, page.text).toBe(200);
    pages?.push(page);
    expect(page.body.rows.length).toBeGreaterThan(0);
    rows.push(...page.body.rows);
    expect(page.body.next_row_ordinal).toBe(after + page.body.rows.length);
    after = page.body.next_row_ordinal;
    if (!page.body.has_more) break;
  }
  return rows;
}

export interface SnapshotRead {
  readonly session: any;
  readonly rows: any[];
  readonly pages: RawAnswer[];
}

/** Creates a snapshot session (optional body) and reads every chunk. */
export async function snapshotAll(url: string, c: ApiClient, options: { body?: unknown; maxRows?: number } = {}): Promise<SnapshotRead> {
  const create = await c.post('/sync/snapshot-sessions', options.body ?? {});
  expectStatus(create, 200);
  return { session: create.body, ...(await readSnapshot(url, c, create.body.snapshot_id, options.maxRows)) };
}

export async function readSnapshot(url: string, c: ApiClient, id: string, maxRows?: number): Promise<{ rows: any[]; pages: RawAnswer[] }> {
  const rows: any[] = [];
  const pages: RawAnswer[] = [];
  let after = 0;
  for (;;) {
    const page = await rawGet(url, c, `/sync/snapshot-sessions/${id}?after_row_ordinal=${after}${maxRows ? `&max_rows=${maxRows}` : ''}`);
    expect(page.status, page.text).toBe(200);
    pages.push(page);
    rows.push(...page.body.rows);
    expect(page.body.next_row_ordinal).toBe(after + page.body.rows.length);
    after = page.body.next_row_ordinal;
    if (!page.body.has_more) break;
    expect(page.body.rows.length).toBeGreaterThan(0);
  }
  return { rows, pages };
}
