/**
 * Issue 10, atomic visibility and order, at the client level (test/read-pull.pg.test.ts proves
 * it for the HTTP pull pages): clients pulling while other clients push concurrently never hold
 * part of a bundle and never move their checkpoint past a bundle they have not applied.
 *
 * Writers commit bundles that either create a list with n items (title `n=<n> v=0`, item bodies
 * `v=0`) or rewrite one of their lists and all of its items to the next version `v=<k>`. After
 * every pull of a reader, for every list it holds: it has exactly n items and every item carries
 * the list's version. Against the acknowledged bundles (bundle_seq per change): every change at
 * or below the reader's checkpoint is there, none above it is, and the checkpoint never goes back.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { clientSuite, expectConverged, localState, openDevice, type Device } from './support/client-harness.js';
import { seededRandom } from './support/fault-proxy.js';
import { type TestServer } from './support/server.js';

const USER = 'atomic';
const WRITERS = 3;
const READERS = 2;
const BUNDLES_PER_WRITER = Number(process.env['ATOMIC_BUNDLES'] ?? 12);

interface Change {
  readonly listId: string;
  readonly version: number;
  readonly seq: number;
}

describe('atomic visibility at the client: concurrent pushes, concurrent pulls', () => {
  let s: TestServer;
  const devices = clientSuite((server) => (s = server));

  it('a reader never holds part of a bundle and its checkpoint never skips one', async () => {
    const writers: Device[] = [];
    const readers: Device[] = [];
    for (let i = 0; i < WRITERS + READERS; i++) {
      // Small pull pages and row pages: a drain spans several requests while commits land.
      const d = await openDevice(s, USER, { config: { pullBundles: 2, pageRows: 7 } });
      devices.push(d);
      await d.client.attach(USER);
      (i < WRITERS ? writers : readers).push(d);
    }
    const acked: Change[] = [];
    let writing = true;

    const writer = async (d: Device, w: number) => {
      const random = seededRandom(1000 + w);
      const mine: { listId: string; n: number; version: number; items: string[] }[] = [];
      for (let b = 0; b < BUNDLES_PER_WRITER; b++) {
        const bump = mine.length > 0 && random() < 0.4 ? mine[Math.floor(random() * mine.length)] : undefined;
        if (bump) {
          bump.version++;
          const v = bump.version;
          await d.db.transaction(async (tx) => {
            await tx.run('UPDATE lists SET title = ? WHERE id = ?', [`n=${bump.n} v=${v}`, Buffer.from(bump.listId.replaceAll('-', ''), 'hex')]);
            await tx.run('UPDATE items SET body = ? WHERE list_id = ?', [`v=${v}`, Buffer.from(bump.listId.replaceAll('-', ''), 'hex')]);
          });
        } else {
          const listId = randomUUID();
          const n = 1 + Math.floor(random() * 25);
          const items = Array.from({ length: n }, () => randomUUID());
          const key = Buffer.from(listId.replaceAll('-', ''), 'hex');
          await d.db.transaction(async (tx) => {
            await tx.run('INSERT INTO lists (id, title) VALUES (?, ?)', [key, `n=${n} v=0`]);
            await tx.runMany('INSERT INTO items (id, list_id, body) VALUES (?, ?, ?)', items.map((id) => [id, key, 'v=0']));
          });
          mine.push({ listId, n, version: 0, items });
        }
        const pushed = await d.client.pushPending();
        if (pushed.status !== 'committed') throw new Error(`writer ${w}: ${pushed.status}`);
        const changed = bump ?? (mine.at(-1) as (typeof mine)[number]);
        acked.push({ listId: changed.listId, version: changed.version, seq: pushed.bundleSeq });
      }
    };

    let pulls = 0;
    let pagesWithNews = 0;
    const reader = async (d: Device) => {
      let last = 0;
      for (;;) {
        const done = !writing;
        const result = await d.client.pullToStable();
        pulls++;
        if (result.bundlesApplied > 0) pagesWithNews++;
        const known = [...acked];
        expect(result.checkpoint).toBeGreaterThanOrEqual(last);
        last = result.checkpoint;
        const local = await localState(d.db);
        const itemsOf = new Map<string, string[]>();
        for (const item of Object.values(local.items)) itemsOf.set(item.list_id, [...(itemsOf.get(item.list_id) ?? []), item.body]);
        const versionOf = new Map<string, number>();
        for (const [listId, list] of Object.entries(local.lists)) {
          const [, n, v] = /^n=(\d+) v=(\d+)$/.exec(list.title) ?? [];
          const bodies = itemsOf.get(listId) ?? [];
          // Never part of a bundle: all n items, all at the list's version.
          expect({ listId, items: bodies.length, bodies: [...new Set(bodies)] }).toEqual({ listId, items: Number(n), bodies: [`v=${v}`] });
          versionOf.set(listId, Number(v));
        }
        for (const c of known) {
          const v = versionOf.get(c.listId);
          if (c.seq <= result.checkpoint) {
            // Every acknowledged change at or below the checkpoint is there (or a later one).
            expect(v, `change ${c.listId} v=${c.version} at seq ${c.seq} ≤ checkpoint ${result.checkpoint}`).toBeGreaterThanOrEqual(c.version);
          } else if (v !== undefined) {
            // None above it (a list created above it is absent: v is undefined).
            expect(v, `change ${c.listId} v=${c.version} at seq ${c.seq} > checkpoint ${result.checkpoint}`).toBeLessThan(c.version);
          }
        }
        if (done) return;
      }
    };

    const writing$ = Promise.all(writers.map((d, w) => writer(d, w))).finally(() => (writing = false));
    await Promise.all([writing$, ...readers.map((d) => reader(d))]);

    for (const d of writers) await d.client.sync();
    const state = await expectConverged(s, USER, ...writers, ...readers);
    expect(Object.keys(state.lists).length).toBeGreaterThan(WRITERS);
    expect(acked).toHaveLength(WRITERS * BUNDLES_PER_WRITER);
    // The readers really raced the writers: many pulls, several of them brought bundles.
    console.log(`atomic visibility: ${acked.length} bundles, ${pulls} pulls, ${pagesWithNews} with news`);
    expect(pagesWithNews).toBeGreaterThan(READERS);
  });
});
