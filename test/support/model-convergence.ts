/**
 * The convergence model (issue 10): a scenario is a list of commands run against real clients
 * (file-backed wa-sqlite) of one user plus one client of another user, through the seeded
 * fault-injecting proxy, against a real server. After the commands the faults stop, every client
 * drains, and `checkScenario` asserts what must hold:
 *
 * - every client of a user holds exactly the server's rows of that user;
 * - every bundle a client was told committed (bundle_seq, source tuple) is in sync.bundle_log
 *   exactly once, under that user, with that bundle_seq; the log is gapless; each device's source
 *   sequence is exactly its committed bundles;
 * - no write is lost: for a key only one device ever wrote (and whose list no other device ever
 *   deleted), the server ends with that device's value after its last write of the key;
 * - the other user's stream holds only its own keys and sources, and the other way round;
 * - every client database passes `PRAGMA integrity_check`.
 *
 * The runner is deterministic for a given (commands, fault seed): commands run one at a time and
 * the proxy draws one fault per request from its seeded generator. Regression tests replay a
 * pinned scenario with `runScenario` directly.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { expect } from 'vitest';
import { type PushResult } from '../../client-web/api.js';
import { ClientError } from '../../client-web/errors.js';
import { SyncHttpError } from '../../client-web/transport.js';
import { type AppState, blobOfUuid, localState, openDevice, serverState, write, type Device } from './client-harness.js';
import { NO_FAULTS, startFaultProxy, type FaultProxy, type FaultRates } from './fault-proxy.js';
import { type TestServer } from './server.js';

/** Devices 0..2 belong to the user under test; device 3 to the other user (isolation). */
export const OTHER = 3;
const DEVICES = 4;
const LIST_SLOTS = 2;
const ITEM_SLOTS = 3;

export type Command =
  | { readonly k: 'putList'; readonly d: number; readonly slot: number; readonly shared: boolean }
  | { readonly k: 'delList'; readonly d: number; readonly slot: number; readonly shared: boolean }
  | { readonly k: 'putItem'; readonly d: number; readonly slot: number; readonly shared: boolean; readonly pick: number }
  | { readonly k: 'delItem'; readonly d: number; readonly slot: number; readonly shared: boolean }
  | { readonly k: 'sync' | 'push' | 'pull' | 'restart' | 'detach' | 'rebuild' | 'discard'; readonly d: number };

export interface Scenario {
  readonly faultSeed: number;
  readonly commands: readonly Command[];
}

export const MODERATE_FAULTS: FaultRates = Object.freeze({ dropRequest: 0.05, dropResponse: 0.06, duplicate: 0.05, unavailable: 0.05 });

/** Two attempts per request: under the fault rates a fair share of calls fail, and their recovery is what is tested. */
const FEW_RETRIES = { maxAttempts: 2, baseDelayMs: 2, maxDelayMs: 10 } as const;

const device = fc.integer({ min: 0, max: DEVICES - 1 });
const slot = (n: number) => fc.integer({ min: 0, max: n - 1 });

/** Commands with weights: about half local writes, the rest sync steps and lifecycle events. */
export const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant('putList' as const), d: device, slot: slot(LIST_SLOTS), shared: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('delList' as const), d: device, slot: slot(LIST_SLOTS), shared: fc.boolean() }) },
  { weight: 8, arbitrary: fc.record({ k: fc.constant('putItem' as const), d: device, slot: slot(ITEM_SLOTS), shared: fc.boolean(), pick: fc.nat(7) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('delItem' as const), d: device, slot: slot(ITEM_SLOTS), shared: fc.boolean() }) },
  { weight: 6, arbitrary: fc.record({ k: fc.constant('sync' as const), d: device }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('push' as const), d: device }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('pull' as const), d: device }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('restart' as const), d: device }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('detach' as const), d: device }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('rebuild' as const), d: device }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('discard' as const), d: device }) },
);

export const scenarioArb = (maxCommands: number): fc.Arbitrary<Scenario> =>
  fc.record({ faultSeed: fc.nat(), commands: fc.array(commandArb, { minLength: Math.ceil(maxCommands / 2), maxLength: maxCommands }) });

/** A compact, replayable form of a command list (printed on failure; pasted into regressions). */
export function formatCommands(commands: readonly Command[]): string {
  return JSON.stringify(commands);
}

/** A deterministic UUID for a named key of one user's run. */
export function keyUuid(tag: string): string {
  const h = createHash('sha256').update(tag).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

interface Ack {
  readonly user: string;
  readonly device: number;
  readonly sourceId: string;
  readonly sourceBundleId: number;
  readonly bundleSeq: number;
}

/** A value of one key as the model compares it: a list or item row, or null when absent. */
type Value = AppState['lists'][string] | AppState['items'][string] | null;

interface KeyRecord {
  /** Devices whose own write commands changed this key (directly or by a local cascade). */
  readonly writers: Set<number>;
  /** Per device: the key's local value right after that device's last write that changed it. */
  readonly last: Map<number, { value: Value; step: number; checkable: boolean }>;
  /** Lists an item was ever placed in (by any device). */
  readonly lists: Set<string>;
}

export interface RunStats {
  commands: number;
  failures: Record<string, number>;
  acks: number;
  /** Keys the no-lost-write check covered. */
  keysChecked: number;
  faults: FaultProxy['counts'] | null;
  durationMs: number;
}

/** Failures a command may end with while faults are on: the network and 503s, and pull/rebuild refused over a frozen bundle. */
function expectedFailure(error: unknown): string | null {
  if (error instanceof SyncHttpError && (error.code === 'network_error' || error.status === 503)) return error.code;
  if (error instanceof ClientError && error.code === 'outbox_pending') return error.code;
  return null;
}

function diff(before: AppState, after: AppState): Map<string, Value> {
  const changed = new Map<string, Value>();
  for (const kind of ['lists', 'items'] as const) {
    const keys = new Set([...Object.keys(before[kind]), ...Object.keys(after[kind])]);
    for (const k of keys) {
      const a = before[kind][k] ?? null;
      const b = after[kind][k] ?? null;
      if (JSON.stringify(a) !== JSON.stringify(b)) changed.set(k, b);
    }
  }
  return changed;
}

/** Whether the device knows a base version (live or tombstone) for a key. */
async function hasMeta(d: Device, table: 'lists' | 'items', id: string): Promise<boolean> {
  const key = table === 'lists' ? blobOfUuid(id) : id;
  return (await d.db.query('SELECT 1 AS m FROM _sync_row_meta WHERE tbl = ? AND key = ?', [table, key])).length > 0;
}

async function integrityOk(d: Device): Promise<void> {
  const rows = await d.db.query('PRAGMA integrity_check');
  expect(rows.map((r) => Object.values(r)[0])).toEqual(['ok']);
}

export interface ScenarioOptions {
  readonly rates?: FaultRates;
  /** Log each command and its outcome (debugging a pinned scenario). */
  readonly trace?: boolean;
}

/**
 * Runs one scenario against `server` for a fresh pair of users named after `tag`, then heals,
 * drains and checks. Throws (with the commands printed) on any violation.
 */
export async function runScenario(server: TestServer, tag: string, scenario: Scenario, options: ScenarioOptions = {}): Promise<RunStats> {
  const started = Date.now();
  const user = `conv-${tag}`;
  const other = `${user}-other`;
  const userOf = (d: number) => (d === OTHER ? other : user);
  const dir = mkdtempSync(join(tmpdir(), 'lockstep-conv-'));
  const proxy = await startFaultProxy(server.url, scenario.faultSeed, NO_FAULTS);
  const devices: Device[] = [];
  const stats: RunStats = { commands: 0, failures: {}, acks: 0, keysChecked: 0, faults: null, durationMs: 0 };
  const acks: Ack[] = [];
  const sources = new Map<string, Set<string>>([[user, new Set()], [other, new Set()]]);
  const keys = new Map<string, KeyRecord>();
  const discardedAt = new Map<number, number[]>();
  const everDeleted = new Set<string>();
  const log: string[] = [];
  const key = (d: number, kind: 'L' | 'I', shared: boolean, n: number) => keyUuid(`${userOf(d)}:${kind}:${shared && d !== OTHER ? 's' : `d${d}`}:${n}`);
  const record = (k: string): KeyRecord => {
    let r = keys.get(k);
    if (!r) keys.set(k, (r = { writers: new Set(), last: new Map(), lists: new Set() }));
    return r;
  };
  const noteSource = async (d: number) => {
    const status = await (devices[d] as Device).client.pendingStatus();
    sources.get(userOf(d))?.add(status.sourceId);
    return status;
  };
  const ack = (d: number, sourceId: string, result: PushResult) => {
    if (result.status !== 'committed') return;
    acks.push({ user: userOf(d), device: d, sourceId, sourceBundleId: result.sourceBundleId, bundleSeq: result.bundleSeq });
  };

  try {
    for (let d = 0; d < DEVICES; d++) devices.push(await openDevice(server, userOf(d), { path: join(dir, `d${d}.db`), url: proxy.url, config: { retry: FEW_RETRIES } }));
    // Every device attaches before the faults start: the first one initializes each user.
    for (let d = 0; d < DEVICES; d++) {
      const attached = await (devices[d] as Device).client.attach(userOf(d));
      expect(attached.status).toBe('attached');
      await noteSource(d);
    }
    proxy.rates = options.rates ?? MODERATE_FAULTS;

    /** Attaches a device a failed attach left detached; false when that fails again. */
    const ensureAttached = async (d: number): Promise<boolean> => {
      const dev = devices[d] as Device;
      if ((await dev.client.pendingStatus()).attachedUserId !== null) return true;
      const result = await dev.client.attach(userOf(d));
      await noteSource(d);
      return result.status === 'attached';
    };

    for (const [step, c] of scenario.commands.entries()) {
      const dev = devices[c.d] as Device;
      let outcome = 'ok';
      try {
        switch (c.k) {
          case 'putList':
          case 'delList':
          case 'putItem':
          case 'delItem': {
            // A write made while detached or before a pending rebuild is uninformed: it may
            // legitimately lose a conflict against this device's own earlier writes.
            const informed = (await ensureAttached(c.d).catch(() => false)) && !(await dev.client.pendingStatus()).rebuildRequired;
            const before = await localState(dev.db);
            // Re-inserting a key deleted earlier without knowing its tombstone (a fresh hydrate
            // after detach: snapshots carry no tombstones) is a conflict with that deletion by
            // design; the write may lose under the default policy.
            let blind: string | null = null;
            if (c.k === 'putList' || c.k === 'putItem') {
              const k = key(c.d, c.k === 'putList' ? 'L' : 'I', c.shared, c.slot);
              const absent = c.k === 'putList' ? !before.lists[k] : !before.items[k];
              if (absent && everDeleted.has(k) && !(await hasMeta(dev, c.k === 'putList' ? 'lists' : 'items', k))) blind = k;
            }
            if (c.k === 'putList') {
              await write.list(dev.db, key(c.d, 'L', c.shared, c.slot), `t${step}`, step);
            } else if (c.k === 'delList') {
              await write.deleteList(dev.db, key(c.d, 'L', c.shared, c.slot));
            } else if (c.k === 'putItem') {
              const lists = Object.keys(before.lists).sort();
              if (lists.length === 0) {
                outcome = 'skipped (no list)';
                break;
              }
              const listId = lists[c.pick % lists.length] as string;
              await write.item(dev.db, key(c.d, 'I', c.shared, c.slot), listId, `b${step}`, { done: step % 2 === 0 });
            } else {
              await write.deleteItem(dev.db, key(c.d, 'I', c.shared, c.slot));
            }
            const after = await localState(dev.db);
            for (const [k, value] of diff(before, after)) {
              const r = record(k);
              r.writers.add(c.d);
              r.last.set(c.d, { value, step, checkable: informed && k !== blind });
              if (value === null) everDeleted.add(k);
              if (value && 'list_id' in value) r.lists.add(value.list_id);
            }
            break;
          }
          case 'sync': {
            if (!(await ensureAttached(c.d))) break;
            const { sourceId } = await noteSource(c.d);
            const result = await dev.client.sync();
            ack(c.d, sourceId, result.push);
            outcome = `push ${result.push.status}, pull ${result.pull ? `→${result.pull.checkpoint}` : 'none'}`;
            break;
          }
          case 'push': {
            if (!(await ensureAttached(c.d))) break;
            const { sourceId } = await noteSource(c.d);
            const result = await dev.client.pushPending();
            ack(c.d, sourceId, result);
            outcome = `push ${result.status}`;
            break;
          }
          case 'pull': {
            if (!(await ensureAttached(c.d))) break;
            outcome = `pull →${(await dev.client.pullToStable()).checkpoint}`;
            break;
          }
          case 'restart':
            await dev.reopen();
            break;
          case 'detach': {
            const result = await dev.client.detach();
            outcome = `detach ${result.status}`;
            if (result.status === 'detached') {
              const attached = await dev.client.attach(userOf(c.d));
              outcome += `, attach ${attached.status}`;
            }
            await noteSource(c.d);
            break;
          }
          case 'rebuild': {
            if (!(await ensureAttached(c.d))) break;
            outcome = `rebuild →${(await dev.client.rebuild()).snapshotBundleSeq}`;
            await noteSource(c.d);
            break;
          }
          case 'discard': {
            const { discardedRows } = await dev.client.discardRejected();
            if (discardedRows > 0) discardedAt.set(c.d, [...(discardedAt.get(c.d) ?? []), step]);
            outcome = `discarded ${discardedRows}`;
            break;
          }
        }
      } catch (error) {
        const code = expectedFailure(error);
        if (code === null) {
          log.push(`#${step} ${JSON.stringify(c)} → UNEXPECTED ${String(error)}`);
          throw error;
        }
        stats.failures[code] = (stats.failures[code] ?? 0) + 1;
        outcome = `failed: ${code}`;
        // A reopen that failed leaves the old, closed client: open again at once (faults off for it).
        if (c.k === 'restart') {
          const rates = proxy.rates;
          proxy.rates = NO_FAULTS;
          await dev.reopen();
          proxy.rates = rates;
        }
      }
      log.push(`#${step} ${JSON.stringify(c)} → ${outcome}`);
      if (options.trace) console.log(log.at(-1));
      stats.commands++;
    }

    // Heal and drain: no faults, every device syncs until nothing is pending anywhere and every
    // checkpoint is its user's latest bundle.
    proxy.rates = NO_FAULTS;
    stats.faults = { ...proxy.counts };
    let settled = false;
    for (let round = 0; round < 12 && !settled; round++) {
      let pushed = false;
      for (let d = 0; d < DEVICES; d++) {
        const dev = devices[d] as Device;
        await ensureAttached(d);
        let status = await noteSource(d);
        if (status.rejected) {
          const { discardedRows } = await dev.client.discardRejected();
          if (discardedRows > 0) discardedAt.set(d, [...(discardedAt.get(d) ?? []), scenario.commands.length + round]);
          log.push(`drain ${round}: d${d} discarded a rejected bundle of ${discardedRows} rows`);
        }
        if (status.sourceRecovery) {
          log.push(`drain ${round}: d${d} source recovery ${status.sourceRecovery}`);
          await dev.client.rebuild();
          status = await noteSource(d);
        }
        const result = await dev.client.sync();
        ack(d, status.sourceId, result.push);
        if (result.push.status === 'committed' || result.push.status === 'resolved_without_commit') pushed = true;
        if (result.push.status === 'rejected') pushed = true;
      }
      if (pushed) continue;
      settled = true;
      for (let d = 0; d < DEVICES; d++) {
        const status = await (devices[d] as Device).client.pendingStatus();
        const latest = await latestSeq(server, userOf(d));
        if (status.dirtyRows + status.frozenRows > 0 || status.checkpoint !== latest || status.rebuildRequired || status.rejected) settled = false;
      }
    }
    expect(settled, 'every device drained within 12 rounds').toBe(true);
    stats.acks = acks.length;

    stats.keysChecked = await checkScenario(server, { user, other, devices, acks, sources, keys, discardedAt });
    stats.durationMs = Date.now() - started;
    return stats;
  } catch (error) {
    console.error(
      `convergence scenario ${tag} failed: faultSeed=${scenario.faultSeed}\ncommands=${formatCommands(scenario.commands)}\n${log.join('\n')}\nfaults=${JSON.stringify(proxy.counts)}`,
    );
    throw error;
  } finally {
    for (const d of devices) await d.close();
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function latestSeq(server: TestServer, user: string): Promise<number> {
  const r = await server.t.exec('SELECT latest_bundle_seq::int AS n FROM sync.user_state WHERE user_id = $1', [user]);
  return r.rows[0]?.n ?? 0;
}

interface CheckInput {
  readonly user: string;
  readonly other: string;
  readonly devices: readonly Device[];
  readonly acks: readonly Ack[];
  readonly sources: ReadonlyMap<string, ReadonlySet<string>>;
  readonly keys: ReadonlyMap<string, KeyRecord>;
  readonly discardedAt: ReadonlyMap<number, readonly number[]>;
}

async function checkScenario(server: TestServer, input: CheckInput): Promise<number> {
  const { user, other, devices, acks, sources, keys, discardedAt } = input;
  const state = { [user]: await serverState(server, user), [other]: await serverState(server, other) };

  // Every device of a user holds exactly the server's rows of that user.
  for (const [d, dev] of devices.entries()) {
    const u = d === OTHER ? other : user;
    expect(await localState(dev.db), `device ${d} equals the server's rows of ${u}`).toEqual(state[u]);
    await integrityOk(dev);
  }

  // Isolation: no key of one user's run appears in the other's stream.
  const keysOf = (s: AppState) => new Set([...Object.keys(s.lists), ...Object.keys(s.items)]);
  const mine = keysOf(state[user] as AppState);
  for (const k of keysOf(state[other] as AppState)) expect(mine.has(k), `key ${k} of ${other} is not in ${user}`).toBe(false);

  for (const u of [user, other]) {
    const log = await server.t.exec(
      `SELECT b.bundle_seq::int AS seq, b.source_id, b.source_bundle_id::int AS sbid, b.row_count,
              (SELECT count(*)::int FROM sync.bundle_rows r WHERE r.user_id = b.user_id AND r.bundle_seq = b.bundle_seq) AS rows
         FROM sync.bundle_log b JOIN sync.user_state s USING (user_id) WHERE s.user_id = $1 ORDER BY b.bundle_seq`,
      [u]);
    const rows = log.rows as { seq: number; source_id: string; sbid: number; row_count: number; rows: number }[];
    // Gapless, complete bundles.
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    for (const r of rows) expect(r.rows, `bundle ${r.seq} holds row_count rows`).toBe(r.row_count);
    // Every bundle came from one of this user's devices' sources (the initial one included).
    const known = sources.get(u) ?? new Set<string>();
    for (const r of rows) expect(known.has(r.source_id), `bundle ${r.seq} of ${u} from a source of ${u}`).toBe(true);
    // Every acknowledged bundle is present exactly once, with the bundle_seq the client was told.
    for (const a of acks.filter((x) => x.user === u)) {
      const found = rows.filter((r) => r.source_id === a.sourceId && r.sbid === a.sourceBundleId);
      expect(found.map((r) => r.seq), `acknowledged ${a.sourceId}/${a.sourceBundleId} (device ${a.device})`).toEqual([a.bundleSeq]);
    }
    // Each device's current source: its committed source bundle ids are exactly 1..next-1.
    for (const [d, dev] of devices.entries()) {
      if ((d === OTHER ? other : user) !== u) continue;
      const status = await dev.client.pendingStatus();
      const ids = rows.filter((r) => r.source_id === status.sourceId).map((r) => r.sbid);
      expect(ids, `device ${d} source ${status.sourceId} committed 1..${status.nextSourceBundleId - 1}`).toEqual(
        Array.from({ length: status.nextSourceBundleId - 1 }, (_, i) => i + 1));
    }
  }

  // No lost write: a key only one device wrote ends with that device's last value.
  let checked = 0;
  for (const [k, r] of keys) {
    if (r.writers.size !== 1) continue;
    const [d] = [...r.writers] as [number];
    const last = r.last.get(d);
    if (!last || !last.checkable) continue;
    if ((discardedAt.get(d) ?? []).some((step) => step > last.step)) continue;
    // An item in a list another device also wrote may have lost that list to the other device's delete.
    if ([...r.lists].some((l) => [...(keys.get(l)?.writers ?? [])].some((w) => w !== d))) continue;
    const u = d === OTHER ? other : user;
    const s = state[u] as AppState;
    const actual = s.lists[k] ?? s.items[k] ?? null;
    expect(actual, `key ${k}: only device ${d} wrote it; its last write (#${last.step}) must be on the server`).toEqual(last.value);
    checked++;
  }
  return checked;
}
