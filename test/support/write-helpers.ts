/**
 * Client-side helpers for the write-path suites (test/write-*.pg.test.ts): the canonical hashes
 * computed the way a client computes them (RFC 8785 via `canonicalize`, then SHA-256 hex), and a
 * push driver that goes through the real HTTP API.
 */
import { createHash, randomUUID } from 'node:crypto';
import canonicalize from 'canonicalize';
import { expect } from 'vitest';
import { type ApiAnswer, type ApiClient } from './server.js';

export interface PushRow {
  schema: string;
  table: string;
  key: Record<string, string>;
  op: 'INSERT' | 'UPDATE' | 'DELETE';
  base_row_version: number;
  payload?: Record<string, unknown> | null;
}

export interface CommittedRow {
  schema: string;
  table: string;
  key: Record<string, string>;
  op: 'INSERT' | 'UPDATE' | 'DELETE';
  row_version: number;
  payload: Record<string, unknown> | null;
}

export const uuid = (): string => randomUUID();

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The canonical request hash (docs/protocol.md §4.3): pushed rows in ordinal order, DELETE payload null. */
export function requestHash(rows: readonly PushRow[]): string {
  const shaped = rows.map((r) => ({
    schema: r.schema,
    table: r.table,
    key: r.key,
    op: r.op,
    base_row_version: r.base_row_version,
    payload: r.op === 'DELETE' ? null : (r.payload ?? null),
  }));
  return sha256Hex(canonicalize(shaped) as string);
}

/** bundle_hash (docs/protocol.md §4.3): committed rows in order, each with its 0-based row_ordinal. */
export function bundleHash(rows: readonly CommittedRow[]): string {
  const shaped = rows.map((r, i) => ({
    schema: r.schema,
    table: r.table,
    key: r.key,
    op: r.op,
    row_version: r.row_version,
    payload: r.payload,
    row_ordinal: i,
  }));
  return sha256Hex(canonicalize(shaped) as string);
}

export const list = (id: string, title: string, base = 0, extra: Record<string, unknown> = {}): PushRow => ({
  schema: 'app',
  table: 'lists',
  key: { id },
  op: base === 0 ? 'INSERT' : 'UPDATE',
  base_row_version: base,
  payload: { id, title, ...extra },
});

export const item = (id: string, listId: string, body: string, base = 0, extra: Record<string, unknown> = {}): PushRow => ({
  schema: 'app',
  table: 'items',
  key: { id },
  op: base === 0 ? 'INSERT' : 'UPDATE',
  base_row_version: base,
  payload: { id, list_id: listId, body, ...extra },
});

export const del = (table: string, key: Record<string, string>, base: number): PushRow => ({
  schema: 'app',
  table,
  key,
  op: 'DELETE',
  base_row_version: base,
  payload: null,
});

export function expectStatus(answer: ApiAnswer, status: number, error?: string): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  if (error !== undefined) expect(answer.body?.error, JSON.stringify(answer.body)).toBe(error);
}

export interface PushOptions {
  readonly sourceBundleId: number;
  readonly initializationId?: string;
  /** `true` (default) sends the client-computed hash; a string sends that; `false` sends none. */
  readonly requestHash?: boolean | string;
  readonly chunkSize?: number;
}

/** Create, upload every chunk, commit; returns the commit answer (whatever its status). */
export async function push(c: ApiClient, rows: readonly PushRow[], options: PushOptions): Promise<ApiAnswer> {
  const hash = options.requestHash === undefined || options.requestHash === true ? requestHash(rows) : options.requestHash || undefined;
  const create = await c.post('/sync/push-sessions', {
    source_bundle_id: options.sourceBundleId,
    planned_row_count: rows.length,
    ...(options.initializationId ? { initialization_id: options.initializationId } : {}),
    ...(hash ? { request_hash: hash } : {}),
  });
  if (create.status !== 200 || create.body.status !== 'staging') return create;
  const size = options.chunkSize ?? 1000;
  for (let start = 0; start < rows.length; start += size) {
    const chunk = await c.post(`/sync/push-sessions/${create.body.push_id}/chunks`, { start_row_ordinal: start, rows: rows.slice(start, start + size) });
    if (chunk.status !== 200) return chunk;
  }
  return c.post(`/sync/push-sessions/${create.body.push_id}/commit`);
}

/** Push that must commit; returns the commit body. */
export async function pushOk(c: ApiClient, rows: readonly PushRow[], options: PushOptions): Promise<any> {
  const answer = await push(c, rows, options);
  expectStatus(answer, 200);
  expect(answer.body.status).toBe('committed');
  return answer.body;
}

/** Every committed row of a bundle, paging with `max_rows`. */
export async function committedRows(c: ApiClient, bundleSeq: number, maxRows?: number): Promise<{ rows: CommittedRow[]; pages: any[] }> {
  const rows: CommittedRow[] = [];
  const pages: any[] = [];
  let after = 0;
  for (;;) {
    const page = await c.get(`/sync/committed-bundles/${bundleSeq}/rows?after_row_ordinal=${after}${maxRows ? `&max_rows=${maxRows}` : ''}`);
    expectStatus(page, 200);
    pages.push(page.body);
    rows.push(...page.body.rows);
    expect(page.body.next_row_ordinal).toBe(after + page.body.rows.length);
    after = page.body.next_row_ordinal;
    if (!page.body.has_more) break;
    expect(page.body.rows.length).toBeGreaterThan(0);
  }
  return { rows, pages };
}

/** Connects with no pending rows, so the scope is initialized empty and pushes are accepted. */
export async function initEmpty(c: ApiClient): Promise<void> {
  const answer = await c.post('/sync/connect', { has_local_pending_rows: false });
  expectStatus(answer, 200);
  expect(['initialize_empty', 'remote_authoritative']).toContain(answer.body.resolution);
}
