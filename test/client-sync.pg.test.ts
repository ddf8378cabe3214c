/**
 * Issue 6 (web client), the everyday paths: a fresh install hydrates, devices of one user converge
 * through interleaved inserts, updates, deletes and cascades, offline writes survive a restart,
 * every wire type round-trips, server data is never captured as a local change, attach and
 * detach follow rules 7–8, and mismatched local tables are refused with a typed error.
 * Real wa-sqlite under Node, real HTTP, real PostgreSQL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientError } from '../client-web/errors.js';
import { openClient } from '../client-web/client.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { sql } from '../core/db/sql.js';
import { defaultLimits } from '../core/limits.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { blobOfUuid, expectConverged, localState, openDevice, serverState, write, type Device } from './support/client-harness.js';
import { signToken, startTestServer, type TestServer } from './support/server.js';

const uuid = () => randomUUID();

describe('web client: everyday sync', () => {
  let s: TestServer;
  let dir: string;
  const devices: Device[] = [];
  const device = async (user: string, options: Parameters<typeof openDevice>[2] = {}) => {
    const d = await openDevice(s, user, options);
    devices.push(d);
    return d;
  };
  beforeAll(async () => {
    s = await startTestServer();
    dir = mkdtempSync(join(tmpdir(), 'lockstep-client-'));
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a first device with offline writes initializes the user; a fresh device hydrates everything', async () => {
    const a = await device('u-hydrate');
    const listId = uuid();
    await write.list(a.db, listId, 'groceries', 1);
    for (let i = 0; i < 250; i++) await write.item(a.db, uuid(), listId, `item ${i}`, { done: i % 3 === 0 });
    expect((await a.client.pendingStatus()).dirtyRows).toBe(251);

    const attached = await a.client.attach('u-hydrate');
    expect(attached).toMatchObject({ status: 'attached', resolution: 'initialize_local' });
    const after = await a.client.pendingStatus();
    expect(after).toMatchObject({ dirtyRows: 0, frozenRows: 0, checkpoint: 1, nextSourceBundleId: 2, attachedUserId: 'u-hydrate' });
    const server = await serverState(s, 'u-hydrate');
    expect(Object.keys(server.items)).toHaveLength(250);

    const progress: number[] = [];
    const b = await device('u-hydrate', { config: { onProgress: (p) => p.phase === 'hydrate' && progress.push(p.rowsDone), pageRows: 40 } });
    const hydrated = await b.client.attach('u-hydrate');
    expect(hydrated).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 251 });
    await expectConverged(s, 'u-hydrate', a, b);
    // Pages of 40 rows: the progress callback moved page by page up to the total.
    expect(progress.at(-1)).toBe(251);
    expect(progress.length).toBeGreaterThanOrEqual(7);
    expect((await b.client.pendingStatus()).dirtyRows).toBe(0);
  });

  /** A fetch that records each snapshot page request (its after_row_ordinal) and the most requests out at once. */
  const snapshotPageLog = () => {
    const log = { afters: [] as number[], out: 0, mostOut: 0 };
    const isPage = (url: URL) => url.pathname.startsWith('/sync/snapshot-sessions/') && url.searchParams.has('after_row_ordinal');
    const track = (input: Parameters<typeof fetch>[0], answer: () => Promise<Response>): Promise<Response> => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (!isPage(url)) return answer();
      log.afters.push(Number(url.searchParams.get('after_row_ordinal')));
      log.mostOut = Math.max(log.mostOut, ++log.out);
      return answer().finally(() => log.out--);
    };
    return { log, track, isPage };
  };

  it('a hydration asks for three snapshot pages while it writes one (one with pagesAhead: 1), each page once', async () => {
    const user = 'u-pages-ahead';
    const a = await device(user);
    for (let i = 0; i < 20; i++) await write.list(a.db, uuid(), `list ${i}`, i);
    await a.client.attach(user);
    for (const [ahead, most] of [[undefined, 3], [1, 1]] as const) {
      const { log, track } = snapshotPageLog();
      const b = await device(user, { config: { pageRows: 2, snapshotFirstPage: false, ...(ahead ? { pagesAhead: ahead } : {}), fetch: (input, init) => track(input, () => fetch(input, init)) } });
      expect(await b.client.attach(user)).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 20 });
      await expectConverged(s, user, a, b);
      // Ten full pages of two rows: every guess lined up, nothing was asked for twice or past the end.
      expect(log.afters).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
      expect(log.mostOut).toBe(most);
    }
  });

  it("a new snapshot session's first pages are asked for together when its mean row size says they come full", async () => {
    const user = 'u-pages-together';
    const a = await device(user);
    for (let i = 0; i < 9; i++) await write.list(a.db, uuid(), `list ${i}`, i);
    await a.client.attach(user);
    let answered = 0;
    const asked: { after: number; answeredBefore: number }[] = [];
    const { track, isPage } = snapshotPageLog();
    const b = await device(user, {
      config: {
        pageRows: 2,
        snapshotFirstPage: false,
        fetch: (input, init) => track(input, async () => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          if (!isPage(url)) return fetch(input, init);
          asked.push({ after: Number(url.searchParams.get('after_row_ordinal')), answeredBefore: answered });
          const res = await fetch(input, init);
          answered++;
          return res;
        }),
      },
    });
    expect(await b.client.attach(user)).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 9 });
    await expectConverged(s, user, a, b);
    // Rows 0, 2 and 4 before any page came back (pagesAhead 3); 6 and 8 once pages came full.
    expect(asked.slice(0, 3)).toEqual([{ after: 0, answeredBefore: 0 }, { after: 2, answeredBefore: 0 }, { after: 4, answeredBefore: 0 }]);
    expect(asked.slice(3).map((r) => r.after)).toEqual([6, 8]);
    expect(asked.slice(3).every((r) => r.answeredBefore > 0)).toBe(true);
  });

  it('a short snapshot page (a byte budget cut it) abandons the pages asked for ahead of it and asks for the one that follows', async () => {
    const user = 'u-short-page';
    const a = await device(user);
    for (let i = 0; i < 12; i++) await write.list(a.db, uuid(), `list ${i}`, i);
    await a.client.attach(user);
    const { log, track, isPage } = snapshotPageLog();
    const abandoned = new Map<number, AbortSignal>();
    const b = await device(user, {
      config: {
        pageRows: 2,
        snapshotFirstPage: false,
        fetch: (input, init) => track(input, async () => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          const after = isPage(url) ? Number(url.searchParams.get('after_row_ordinal')) : -1;
          // The guesses made after the first page answer only when they are abandoned.
          if ((after === 4 || after === 6) && !abandoned.has(after) && init?.signal) {
            abandoned.set(after, init.signal);
            const signal = init.signal;
            return new Promise<Response>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
          }
          const res = await fetch(input, init);
          if (after !== 2) return res;
          // The page after row 2 comes back with one row, as the server's byte budget may cut it.
          const page = (await res.json()) as { rows: unknown[]; next_row_ordinal: number; has_more: boolean };
          const headers = new Headers(res.headers);
          headers.delete('content-encoding');
          headers.delete('content-length');
          return Response.json({ ...page, rows: page.rows.slice(0, 1), next_row_ordinal: 3, has_more: true }, { status: res.status, headers });
        }),
      },
    });
    expect(await b.client.attach(user)).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 12 });
    await expectConverged(s, user, a, b);
    expect([...abandoned.keys()]).toEqual([4, 6]);
    expect([...abandoned.values()].every((signal) => signal.aborted)).toBe(true);
    // The full first page asked for three (2, 4, 6); the short one for 3 alone; full pages again from there.
    expect(log.afters).toEqual([0, 2, 4, 6, 3, 5, 7, 9, 11]);
  });

  it("a snapshot create's answer carries the first page: a small user hydrates without a page request, a larger one asks from the second page on", async () => {
    const user = 'u-first-page';
    const a = await device(user);
    for (let i = 0; i < 9; i++) await write.list(a.db, uuid(), `list ${i}`, i);
    await a.client.attach(user);
    const creates: string[] = [];
    /** `strip`: the create's answer loses its first page, as a server that did not render one (a container's first request). */
    const hydrate = async (pageRows: number, strip = false) => {
      const { log, track } = snapshotPageLog();
      const b = await device(user, {
        config: {
          pageRows,
          fetch: (input, init) => track(input, async () => {
            const url = new URL(input instanceof Request ? input.url : String(input));
            if (url.pathname !== '/sync/snapshot-sessions' || init?.method !== 'POST') return fetch(input, init);
            creates.push(String(init.body));
            const res = await fetch(input, init);
            if (!strip) return res;
            const { first_page: _, ...session } = (await res.json()) as Record<string, unknown>;
            const headers = new Headers(res.headers);
            headers.delete('content-encoding');
            headers.delete('content-length');
            return Response.json(session, { status: res.status, headers });
          }),
        },
      });
      expect(await b.client.attach(user)).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 9 });
      await expectConverged(s, user, a, b);
      return log;
    };
    // Pages of 10: the 9 rows came with the create.
    expect((await hydrate(10)).afters).toEqual([]);
    // Pages of 2: rows 0–1 came with the create; 2, 4 and 6 were asked for together, then 8.
    const paged = await hydrate(2);
    expect(paged.afters).toEqual([2, 4, 6, 8]);
    expect(paged.mostOut).toBe(3);
    // An answer without the page: the page is asked for.
    expect((await hydrate(2, true)).afters).toEqual([0, 2, 4, 6, 8]);
    expect(creates.map((body) => JSON.parse(body).first_page_rows)).toEqual([10, 2, 2]);
  });

  it('a snapshot create refused as invalid_request for its row_form (a handler of an older build, mid-deploy) is asked again without it, and hydrates objects', async () => {
    const user = 'u-row-form-refused';
    const a = await device(user);
    const listId = uuid();
    await write.list(a.db, listId, 'mid-deploy', 1);
    for (let i = 0; i < 30; i++) await write.item(a.db, uuid(), listId, `item ${i}`);
    await a.client.attach(user);
    // What an older handler answers, whose strict schema knows no row_form: this build's answer to
    // a field it does not know.
    const refusal = await s.client(user, 'probe').post('/sync/snapshot-sessions', { row_shape: 'arrays' });
    expect(refusal).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
    const creates: string[] = [];
    const pages: string[] = [];
    const b = await device(user, {
      config: {
        fetch: async (input, init) => {
          const url = new URL(String(input instanceof Request ? input.url : input));
          if (url.pathname === '/sync/snapshot-sessions' && init?.method === 'POST') {
            const body = String(init.body ?? '');
            creates.push(body);
            if (body.includes('row_form')) return new Response(JSON.stringify(refusal.body), { status: 400, headers: { 'content-type': 'application/json' } });
          }
          if (url.pathname.startsWith('/sync/snapshot-sessions/')) pages.push(url.search);
          return fetch(input, init);
        },
      },
    });
    expect(await b.client.attach(user)).toMatchObject({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 31 });
    expect(creates.map((c) => c.includes('row_form'))).toEqual([true, false]);
    expect(creates.map((c) => c.includes('first_page_rows'))).toEqual([true, false]);
    expect(pages.length).toBeGreaterThan(0);
    await expectConverged(s, user, a, b);
  });

  it('two devices converge through interleaved inserts, updates, deletes and a cascade', async () => {
    const a = await device('u-two');
    const b = await device('u-two');
    expect((await a.client.attach('u-two')).status).toBe('attached');
    expect((await b.client.attach('u-two')).status).toBe('attached');
    const [l1, l2] = [uuid(), uuid()];
    const items = Array.from({ length: 6 }, () => uuid());
    await write.list(a.db, l1, 'one');
    await write.list(a.db, l2, 'two');
    for (const [i, id] of items.entries()) await write.item(a.db, id, i < 3 ? l1 : l2, `a${i}`);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 8 });
    await b.client.sync();
    await expectConverged(s, 'u-two', a, b);

    // B edits and deletes; A edits other rows meanwhile; both sync twice.
    await write.item(b.db, items[0] as string, l1, 'b-edited', { done: true });
    await write.deleteItem(b.db, items[1] as string);
    await write.list(a.db, l2, 'two (renamed)', 7);
    await write.item(a.db, items[4] as string, l2, 'a-edited');
    await b.client.sync();
    await a.client.sync();
    await b.client.sync();
    const state = await expectConverged(s, 'u-two', a, b);
    expect(state.items[items[0] as string]).toMatchObject({ body: 'b-edited', done: true });
    expect(state.items[items[1] as string]).toBeUndefined();
    expect(state.lists[l2]).toEqual({ title: 'two (renamed)', position: 7 });

    // A deletes a list: SQLite cascades locally, PostgreSQL cascades on the server, and B gets
    // one bundle with the list and its items gone.
    await write.deleteList(a.db, l1);
    expect(await a.db.query('SELECT id FROM items WHERE list_id = ?', [blobOfUuid(l1)])).toHaveLength(0);
    await a.client.sync();
    const pulled = await b.client.sync();
    expect(pulled.pull?.bundlesApplied).toBe(1);
    const final = await expectConverged(s, 'u-two', a, b);
    expect(Object.keys(final.lists)).toEqual([l2]);
    expect(Object.keys(final.items).sort()).toEqual(items.slice(3).sort());
    // Nothing the pulls applied was captured as a local change.
    expect((await a.client.pendingStatus()).dirtyRows).toBe(0);
    expect((await b.client.pendingStatus()).dirtyRows).toBe(0);
  });

  it('a pull of several pages asks for the next three pages while it applies the current one (the next one with pagesAhead: 1)', async () => {
    const a = await device('u-pages');
    await a.client.attach('u-pages');
    const lists = Array.from({ length: 4 }, () => uuid());
    for (const [i, ahead, sent] of [[0, undefined, [0, 0, 0, 0]], [1, 1, [0, 0, 1, 2]]] as const) {
      // Every pull request, with the pull pages the client had applied when it was sent.
      const applied: number[] = [];
      const asked: { after: number; appliedBefore: number }[] = [];
      const b = await device('u-pages', {
        config: {
          pullBundles: 1,
          ...(ahead ? { pagesAhead: ahead } : {}),
          onProgress: (p) => p.phase === 'pull' && applied.push(p.rowsDone),
          fetch: (input, init) => {
            const url = new URL(input instanceof Request ? input.url : String(input));
            if (url.pathname === '/sync/pull') asked.push({ after: Number(url.searchParams.get('after_bundle_seq')), appliedBefore: applied.length });
            return fetch(input, init);
          },
        },
      });
      await b.client.attach('u-pages');
      for (const id of lists) {
        await write.list(a.db, id, `list ${i}`);
        expect((await a.client.sync()).push).toMatchObject({ status: 'committed' });
      }
      const start = (await b.client.pendingStatus()).checkpoint;
      expect(await b.client.pullToStable()).toMatchObject({ bundlesApplied: 4, rowsApplied: 4, checkpoint: start + 4 });
      await expectConverged(s, 'u-pages', a, b);
      // One request per page, in order; with three ahead the first page's arrival sends the other
      // three before it is applied, with one ahead each goes when the page before it arrives.
      expect(asked.map((r) => r.after)).toEqual([start, start + 1, start + 2, start + 3]);
      expect(asked.map((r) => r.appliedBefore)).toEqual(sent);
      expect(applied).toEqual([1, 2, 3, 4]);
    }
  });

  it('without pullBundles, a pull asks for 25 bundles first and sizes the pages after it from the rows a bundle carried', async () => {
    const user = 'u-pull-sized';
    const a = await device(user);
    await a.client.attach(user);
    const asked: { after: number; max: number; appliedBefore: number }[] = [];
    const applied: number[] = [];
    const b = await device(user, {
      config: {
        onProgress: (p) => p.phase === 'pull' && applied.push(p.rowsDone),
        fetch: (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          if (url.pathname === '/sync/pull') {
            asked.push({ after: Number(url.searchParams.get('after_bundle_seq')), max: Number(url.searchParams.get('max_bundles')), appliedBefore: applied.length });
          }
          return fetch(input, init);
        },
      },
    });
    await b.client.attach(user);
    /** `count` server bundles of one list and `items` items each. */
    const commit = async (count: number, items: number) => {
      for (let n = 0; n < count; n++) {
        await serverWrite(s.t.db, { userId: user, sourceId: 'server:test', retainedBundlesPerUser: 10_000 }, async (tx, scope) => {
          const list = uuid();
          await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES (${list}, ${scope}, 'sized')`);
          await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body)
            SELECT gen_random_uuid(), ${scope}, ${list}, 'item ' || i FROM generate_series(1, ${items - 1}::int) AS i`);
        });
      }
    };
    // 80 bundles of 50 rows: a first page of 25 bundles (1,250 rows), then pages of 2,500 rows'
    // worth (50 bundles), both asked for while the first is applied.
    await commit(80, 50);
    const start = (await b.client.pendingStatus()).checkpoint;
    expect(await b.client.pullToStable()).toMatchObject({ bundlesApplied: 80, rowsApplied: 4_000, checkpoint: start + 80 });
    expect(asked).toEqual([
      { after: start, max: 25, appliedBefore: 0 },
      { after: start + 25, max: 50, appliedBefore: 0 },
      { after: start + 75, max: 50, appliedBefore: 0 },
    ]);
    await expectConverged(s, user, b);
    // The next pull starts at the size it learned: 10 bundles of 250 rows fit in a page of 50.
    asked.length = 0;
    await commit(10, 250);
    expect(await b.client.pullToStable()).toMatchObject({ bundlesApplied: 10, rowsApplied: 2_500, checkpoint: start + 90 });
    expect(asked.map((r) => [r.after, r.max])).toEqual([[start + 80, 50]]);
    // And the one after that from the 250 rows a bundle carried then: pages of 10 bundles.
    asked.length = 0;
    await commit(12, 250);
    expect(await b.client.pullToStable()).toMatchObject({ bundlesApplied: 12, checkpoint: start + 102 });
    expect(asked.map((r) => [r.after, r.max])).toEqual([[start + 90, 10], [start + 100, 10]]);
    await expectConverged(s, user, b);
  });

  it('a pull whose page fails to apply abandons the page it asked for ahead', async () => {
    const a = await device('u-ahead');
    await a.client.attach('u-ahead');
    let ahead: AbortSignal | undefined;
    let start = 0;
    const b = await device('u-ahead', {
      config: {
        pullBundles: 1,
        // The request for the page after the failing one answers only when it is abandoned.
        fetch: (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          if (url.pathname !== '/sync/pull' || Number(url.searchParams.get('after_bundle_seq')) !== start + 1) return fetch(input, init);
          ahead = init?.signal ?? undefined;
          return new Promise((_, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }));
        },
      },
    });
    await b.client.attach('u-ahead');
    // The app's own trigger refuses one title: the page carrying it cannot be applied.
    await b.db.exec(`CREATE TRIGGER refuse_title BEFORE INSERT ON lists WHEN NEW.title = 'refused' BEGIN SELECT RAISE(ABORT, 'refused by the app'); END`);
    start = (await b.client.pendingStatus()).checkpoint;
    for (const title of ['refused', 'fine']) {
      await write.list(a.db, uuid(), title);
      await a.client.sync();
    }
    await expect(b.client.pullToStable()).rejects.toThrow(/refused by the app/);
    expect(ahead?.aborted).toBe(true);
    expect((await b.client.pendingStatus()).checkpoint).toBe(start);
  });

  it("a replay asks for its bundle's pages at once, from the row count its commit answered", async () => {
    const user = 'u-replay-ahead';
    const asked: { after: number; answeredBefore: number }[] = [];
    let answered = 0;
    const a = await device(user, {
      config: {
        pageRows: 100,
        // The replay reads its bundle back (no prediction from the pushed rows).
        predictReplay: false,
        fetch: async (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          if (!url.pathname.startsWith('/sync/committed-bundles/')) return fetch(input, init);
          asked.push({ after: Number(url.searchParams.get('after_row_ordinal')), answeredBefore: answered });
          const response = await fetch(input, init);
          answered++;
          return response;
        },
      },
    });
    await a.client.attach(user);
    const listId = uuid();
    await write.list(a.db, listId, 'replayed in pages');
    for (let i = 0; i < 349; i++) await write.item(a.db, uuid(), listId, `item ${i}`);
    expect((await a.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 350 });
    // 350 rows in pages of 100: three asked for before any answer (pagesAhead), the fourth when
    // the first came back full.
    expect(asked.slice(0, 3)).toEqual([{ after: 0, answeredBefore: 0 }, { after: 100, answeredBefore: 0 }, { after: 200, answeredBefore: 0 }]);
    expect(asked.slice(3).map((r) => r.after)).toEqual([300]);
    expect(asked[3]?.answeredBefore).toBeGreaterThan(0);
    await expectConverged(s, user, a);
  });

  it('writes made offline survive a restart and reach the other device', async () => {
    const path = join(dir, 'restart.db');
    const a = await device('u-restart', { path });
    const b = await device('u-restart');
    await a.client.attach('u-restart');
    await b.client.attach('u-restart');
    const listId = uuid();
    await write.list(a.db, listId, 'before restart');
    await write.item(a.db, uuid(), listId, 'offline 1');
    await a.reopen();
    expect((await a.client.pendingStatus()).dirtyRows).toBe(2);
    expect((await a.client.sync()).push.status).toBe('committed');
    await a.reopen();
    const status = await a.client.pendingStatus();
    expect(status).toMatchObject({ attachedUserId: 'u-restart', dirtyRows: 0, checkpoint: 1, nextSourceBundleId: 2 });
    await b.client.sync();
    await expectConverged(s, 'u-restart', a, b);
  });

  it('UUID BLOB and TEXT keys, binary attachments and every wire type round-trip exactly', async () => {
    const a = await device('u-types');
    const b = await device('u-types');
    await a.client.attach('u-types');
    await b.client.attach('u-types');
    const listId = uuid();
    const itemId = uuid();
    const bytes = new Uint8Array(256 * 40).map((_, i) => (i * 7) % 256);
    await write.list(a.db, listId, 'binary');
    await write.item(a.db, itemId, listId, 'with attachment', { attachment: bytes });
    await a.db.run(
      'INSERT INTO kinds (code, big, amount, ratio, meta, seen_at, flag, blob, label) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ['k1', 9007199254740993n, '12345678901234.5678', 0.1 + 0.2, '{"a":[1,2,{"b":null}],"u":"ü"}', '2026-11-23T10:00:00.123456+00:00', 1, new Uint8Array([0, 255, 1]), 'ünïcødé ✓']);
    await a.db.run('INSERT INTO kinds (code) VALUES (?)', ['k-null']);
    // Text keys that look like numbers stay text end to end (no numeric affinity anywhere).
    for (const code of ['007', '1e3', '3.0', ' 12']) await a.db.run('INSERT INTO kinds (code, label) VALUES (?, ?)', [code, `numeric-looking ${code}`]);
    await a.client.sync();
    await b.client.sync();
    await expectConverged(s, 'u-types', a, b);

    const server = await s.t.exec("SELECT big::text, amount::text, ratio, meta, seen_at, flag, encode(blob, 'hex') AS blob, label FROM app.kinds WHERE _sync_scope_id = 'u-types' AND code = 'k1'");
    expect(server.rows[0]).toMatchObject({ big: '9007199254740993', amount: '12345678901234.5678', ratio: 0.1 + 0.2, meta: { a: [1, 2, { b: null }], u: 'ü' }, flag: true, blob: '00ff01', label: 'ünïcødé ✓' });
    expect(new Date(server.rows[0].seen_at).toISOString()).toBe('2026-11-23T10:00:00.123Z');
    const [k1] = await b.db.query('SELECT * FROM kinds WHERE code = ?', ['k1']);
    expect(k1).toMatchObject({ big: 9007199254740993n, amount: '12345678901234.5678', ratio: 0.1 + 0.2, flag: 1, label: 'ünïcødé ✓' });
    expect(JSON.parse(k1?.['meta'] as string)).toEqual({ a: [1, 2, { b: null }], u: 'ü' });
    expect(Date.parse(k1?.['seen_at'] as string)).toBe(Date.parse('2026-11-23T10:00:00.123456+00:00'));
    expect(Buffer.from(k1?.['blob'] as Uint8Array).toString('hex')).toBe('00ff01');
    const [kNull] = await b.db.query('SELECT big, amount, ratio, meta, seen_at, flag, blob, label FROM kinds WHERE code = ?', ['k-null']);
    expect(Object.values(kNull ?? {}).every((v) => v === null)).toBe(true);
    const codes = await s.t.exec("SELECT code FROM app.kinds WHERE _sync_scope_id = 'u-types' AND label LIKE 'numeric-looking%' ORDER BY code");
    expect(codes.rows.map((r) => r.code)).toEqual([' 12', '007', '1e3', '3.0']);
    expect(await b.db.query("SELECT code, typeof(code) AS t FROM kinds WHERE label LIKE 'numeric-looking%' ORDER BY code")).toEqual(
      [' 12', '007', '1e3', '3.0'].map((code) => ({ code, t: 'text' })));
    // An update of such a key on B reaches the same row on A (the dirty key kept its text).
    await b.db.run("UPDATE kinds SET label = 'changed on B' WHERE code = '007'");
    expect((await b.client.sync()).push).toMatchObject({ status: 'committed', rowCount: 1 });
    await a.client.sync();
    expect(await a.db.query("SELECT label FROM kinds WHERE code = '007'")).toEqual([{ label: 'changed on B' }]);
    const [item] = await b.db.query('SELECT attachment, typeof(list_id) AS t FROM items WHERE id = ?', [itemId]);
    expect(Buffer.from(item?.['attachment'] as Uint8Array).equals(Buffer.from(bytes))).toBe(true);
    expect(item?.['t']).toBe('blob');
  });

  it('server-originated writes reach every device as one bundle', async () => {
    const a = await device('u-server');
    await a.client.attach('u-server');
    const listId = uuid();
    await serverWrite(s.t.db, { userId: 'u-server', sourceId: 'server:test', retainedBundlesPerUser: 10_000 }, async (tx, scope) => {
      await tx.query(sql`INSERT INTO app.lists (id, _sync_scope_id, title) VALUES (${listId}, ${scope}, 'from the backend')`);
      await tx.query(sql`INSERT INTO app.items (id, _sync_scope_id, list_id, body) VALUES (${uuid()}, ${scope}, ${listId}, 'server item')`);
    });
    const result = await a.client.sync();
    expect(result.pull).toMatchObject({ bundlesApplied: 1, rowsApplied: 2 });
    await expectConverged(s, 'u-server', a);
  });

  it('watch (long poll) wakes when another device commits; with watch off it is a typed error', async () => {
    const a = await device('u-watch', { config: { watch: 'long-poll' } });
    const b = await device('u-watch');
    await a.client.attach('u-watch');
    await b.client.attach('u-watch');
    const started = Date.now();
    const waiting = a.client.watch();
    await new Promise((r) => setTimeout(r, 300));
    await write.list(b.db, uuid(), 'wake up');
    await b.client.sync();
    expect(await waiting).toEqual({ changed: true, latestBundleSeq: 1 });
    // Woken by the commit, not ended by the poll's own deadline (watch_max_wait_seconds, 25 s):
    // the one bound here is that deadline, two orders of magnitude above a wake-up's cost.
    expect(Date.now() - started).toBeLessThan(defaultLimits.watchMaxWaitSeconds * 1000);
    const aborted = new AbortController();
    const idle = a.client.watch(aborted.signal);
    aborted.abort();
    await expect(idle).rejects.toBeTruthy();
    await expect(b.client.watch()).rejects.toMatchObject({ code: 'watch_disabled' });
    await a.client.sync();
    await expectConverged(s, 'u-watch', a, b);
  });

  it('detach is blocked while rows are pending, then clears the cache; anonymous writes land after a later attach', async () => {
    const a = await device('u-detach');
    await a.client.attach('u-detach');
    const listId = uuid();
    await write.list(a.db, listId, 'mine');
    expect(await a.client.detach()).toEqual({ status: 'blocked', pendingRows: 1 });
    await a.client.sync();
    const before = (await a.client.pendingStatus()).sourceId;
    expect(await a.client.detach()).toEqual({ status: 'detached' });
    expect(await localState(a.db)).toEqual({ lists: {}, items: {} });
    const detached = await a.client.pendingStatus();
    expect(detached).toMatchObject({ attachedUserId: null, checkpoint: 0, dirtyRows: 0, nextSourceBundleId: 1 });
    expect(detached.sourceId).not.toBe(before);

    // Capture is back on: an anonymous write is pending and goes to whoever attaches next.
    const anon = uuid();
    await write.list(a.db, anon, 'written while detached');
    expect((await a.client.pendingStatus()).dirtyRows).toBe(1);
    a.user = 'u-detach-2';
    expect(await a.client.attach('u-detach-2')).toMatchObject({ status: 'attached', resolution: 'initialize_local' });
    expect(Object.keys((await serverState(s, 'u-detach-2')).lists)).toEqual([anon]);
    // The first user's data did not leak into the second stream, nor the other way round.
    expect(Object.keys((await serverState(s, 'u-detach')).lists)).toEqual([listId]);
    await expect(a.client.attach('u-detach')).rejects.toMatchObject({ code: 'attached_to_other_user' });
  });

  it('refuses local tables that do not match the server, naming every problem', async () => {
    const db = await openNodeSqlite();
    await db.exec(`
      CREATE TABLE lists (id INTEGER PRIMARY KEY, title TEXT NOT NULL, colour TEXT);
      CREATE TABLE items (id TEXT PRIMARY KEY, list_id BLOB REFERENCES lists(id), body TEXT NOT NULL, done INTEGER, attachment BLOB, notes TEXT NOT NULL);`);
    const error = await openClient({ baseUrl: s.url, getToken: () => signToken('u-schema'), db, tables: [{ schema: 'app', table: 'lists' }, { schema: 'app', table: 'items' }, { schema: 'app', table: 'nope' }] })
      .then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).code).toBe('local_schema_mismatch');
    const problems = ((error as ClientError).details as { problems: string[] }).problems.join('\n');
    expect(problems).toMatch(/app\.nope: the server does not register this table/);
    expect(problems).toMatch(/lists\.id: .*INTEGER/);
    expect(problems).toMatch(/lists\.colour: the server table app\.lists has no such column/);
    expect(problems).toMatch(/items\.notes/);
    await db.close();
  });
});
