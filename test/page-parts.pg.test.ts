/**
 * Layout 27's page readers answer a page's body as its parts in order (sync.pull_parts,
 * sync.committed_rows_parts, sync.snapshot_page_parts); the edge joins them. The old names, which
 * the builds before layout 27 still call during a rolling deploy, join the same parts in SQL. Both
 * must be the same page, byte for byte, whatever the page: several bundles or one, rows in several
 * runs of 128, a budget that omits a bundle's rows or ends a snapshot page inside a stored chunk,
 * an empty page, an error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer, type ApiClient } from './support/server.js';
import { expectStatus, initEmpty, list, pushOk, uuid } from './support/write-helpers.js';
import { PROTOCOL_HEADER } from '../core/protocol/index.js';

interface Part {
  readonly error: unknown;
  readonly body: string | null;
}

describe('page bodies in parts (layout 27)', () => {
  let s: TestServer;
  let c: ApiClient;
  const user = 'parts-user';

  /** The parts in order, and the old name's one text of the same page. */
  async function both(reader: 'pull' | 'committed_rows' | 'snapshot_page', args: string, values: unknown[]): Promise<{ parts: Part[]; whole: Part }> {
    const parts = (await s.t.exec(`SELECT p.error, p.body FROM sync.${reader}_parts(${args}) WITH ORDINALITY AS p(error, body, n) ORDER BY p.n`, values)).rows as Part[];
    const whole = (await s.t.exec(`SELECT error, body FROM sync.${reader}(${args})`, values)).rows as Part[];
    expect(whole).toHaveLength(1);
    return { parts, whole: whole[0] as Part };
  }

  function joined(parts: readonly Part[]): string {
    expect(parts.filter((p) => p.error !== null || typeof p.body !== 'string')).toEqual([]);
    return parts.map((p) => p.body).join('');
  }

  beforeAll(async () => {
    s = await startTestServer();
    c = s.client(user);
    await initEmpty(c);
    // Bundles 1-3 of 2 rows, bundle 4 of 300 rows (three runs of 128), bundle 5 of 1 row.
    for (let b = 1; b <= 3; b++) await pushOk(c, [list(uuid(), `a${b}`), list(uuid(), `b${b}`)], { sourceBundleId: b });
    await pushOk(c, Array.from({ length: 300 }, (_, i) => list(uuid(), `big ${i} ${'x'.repeat(i % 40)}`)), { sourceBundleId: 4 });
    await pushOk(c, [list(uuid(), 'last')], { sourceBundleId: 5 });
  });
  afterAll(async () => s?.close());

  it('a pull page is its head, each bundle and its tail, and joins to the old one-text page', async () => {
    const pages: [number, number, number][] = [[0, 100, 4_000_000], [0, 2, 4_000_000], [2, 1, 4_000_000], [3, 100, 4_000_000], [5, 100, 4_000_000], [3, 100, 2_000]];
    for (const [after, max, budget] of pages) {
      for (const form of [1, 2]) {
        const { parts, whole } = await both('pull', '$1, $2, $3, $4, NULL, $5, $6::smallint', [user, c.sourceId, after, max, budget, form]);
        const body = joined(parts);
        expect(body).toBe(whole.body);
        const page = JSON.parse(body) as { bundles: { bundle_seq: number; row_count: number; rows_omitted: boolean }[]; has_more: boolean };
        // Head and tail around one part per bundle.
        expect(parts).toHaveLength(page.bundles.length + 2);
        expect(page.bundles.map((b) => b.bundle_seq)).toEqual(page.bundles.map((_, i) => after + 1 + i));
        if (budget === 2_000) expect(page.bundles.some((b) => b.rows_omitted)).toBe(true);
        const log = (await s.t.exec('SELECT bundle_seq::int, row_count FROM sync.bundle_log WHERE user_id = $1 AND bundle_seq > $2 ORDER BY bundle_seq', [user, after])).rows;
        expect(page.bundles.map((b) => ({ bundle_seq: b.bundle_seq, row_count: b.row_count }))).toEqual(log.slice(0, page.bundles.length));
        if (after === 5) expect(page).toEqual({ stable_bundle_seq: 5, bundles: [], has_more: false });
      }
    }
  });

  it('a page of one bundle comes in runs of 128 rows and joins to the old one-text page', async () => {
    for (const [after, max] of [[0, 1000], [0, 128], [0, 129], [100, 150], [299, 10], [300, 10]] as const) {
      const { parts, whole } = await both('committed_rows', '$1, 4, $2, $3, 4000000, 2::smallint', [user, after, max]);
      const body = joined(parts);
      expect(body).toBe(whole.body);
      const page = JSON.parse(body) as { rows: { key: { id: string } }[]; next_row_ordinal: number; has_more: boolean };
      const rows = Math.max(0, Math.min(300, after + max) - after);
      expect(page.rows).toHaveLength(rows);
      expect(page.next_row_ordinal).toBe(after + rows);
      expect(parts).toHaveLength(2 + Math.ceil(rows / 128));
    }
    // The bundle's rows, page after page, are its committed rows in order.
    const all = JSON.parse(joined((await both('committed_rows', '$1, 4, 0, 1000, 4000000, 2::smallint', [user])).parts)) as { rows: unknown[] };
    let paged: unknown[] = [];
    for (let after = 0; after < 300; after += 77) {
      paged = paged.concat((JSON.parse(joined((await both('committed_rows', '$1, 4, $2, 77, 4000000, 2::smallint', [user, after])).parts)) as { rows: unknown[] }).rows);
    }
    expect(paged).toEqual(all.rows);
    // … and the rows as the commit stored them.
    const stored = (await s.t.exec('SELECT row_text FROM sync.bundle_rows WHERE user_id = $1 AND bundle_seq = 4 ORDER BY row_ordinal', [user])).rows;
    expect(all.rows).toEqual(stored.map((r: { row_text: string }) => JSON.parse(r.row_text)));
  });

  it('a snapshot page joins its chunks and runs of rows as the old one-text page does, in both row forms', async () => {
    for (const rowForm of ['objects', 'arrays'] as const) {
      // Protocol 2: rows as arrays are protocol 2's (a protocol 1 reader is answered objects).
      const create = await c.request('POST', '/sync/snapshot-sessions', rowForm === 'arrays' ? { row_form: 'arrays' } : {}, { [PROTOCOL_HEADER]: '2' });
      expectStatus(create, 200);
      const id = create.body.snapshot_id as string;
      const form = rowForm === 'arrays' ? 3 : 2;
      expect(create.body.row_count).toBe(307);
      // Whole chunks, a page ending inside a chunk (rows, then budget), one starting inside one, past the end.
      for (const [after, max, budget] of [[0, 5000, 4_000_000], [0, 250, 4_000_000], [0, 5000, 20_000], [123, 300, 4_000_000], [307, 10, 4_000_000]] as const) {
        const { parts, whole } = await both('snapshot_page', '$1, $2::uuid, $3, $4, $5, $6::smallint', [user, id, after, max, budget, form]);
        const body = joined(parts);
        expect(body).toBe(whole.body);
        const page = JSON.parse(body) as { rows: unknown[]; next_row_ordinal: number };
        expect(page.next_row_ordinal).toBe(after + page.rows.length);
        expect(parts.length).toBeGreaterThanOrEqual(page.rows.length > 0 ? 3 : 2);
      }
      const paged: unknown[] = [];
      for (let after = 0; after < 307;) {
        const page = JSON.parse(joined((await both('snapshot_page', '$1, $2::uuid, $3, 100, 4000000, $4::smallint', [user, id, after, form])).parts)) as { rows: unknown[]; next_row_ordinal: number };
        paged.push(...page.rows);
        after = page.next_row_ordinal;
      }
      const all = JSON.parse(joined((await both('snapshot_page', '$1, $2::uuid, 0, 5000, 4000000, $3::smallint', [user, id, form])).parts)) as { rows: unknown[] };
      expect(paged).toEqual(all.rows);
      expect(paged).toHaveLength(307);
    }
  });

  it('an error is one part, as the old reader answers it', async () => {
    const cases = [
      ['pull', '$1, $2, 0, 10, NULL, 4000000, 2::smallint', ['nobody', 'nowhere']],
      ['committed_rows', '$1, 99, 0, 10, 4000000, 2::smallint', [user]],
      ['snapshot_page', '$1, $2::uuid, 0, 10, 4000000, 2::smallint', [user, uuid()]],
    ] as const;
    for (const [reader, args, values] of cases) {
      const { parts, whole } = await both(reader, args, [...values]);
      expect(parts).toHaveLength(1);
      expect(parts[0]?.body).toBeNull();
      expect(parts[0]?.error).toEqual(whole.error);
      expect((whole.error as { error: string }).error).toMatch(/^(scope_uninitialized|committed_bundle_not_found|snapshot_session_not_found)$/);
    }
  });
});
