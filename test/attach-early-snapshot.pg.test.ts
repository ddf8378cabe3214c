/**
 * A fresh device asks for its snapshot session together with its connect (coordinator.ts
 * `attach`): with nothing to push, it rebuilds whenever the user has data, so its rows start one
 * round trip sooner. Checked by the order of requests and answers, never by time: the create is
 * sent before the connect is answered, and only one session is created; for a user without data
 * the early session is deleted (or was refused) before the attach answers, so no session stays
 * open and no request of the attach is left going; an early create that
 * fails is replaced by the create the rebuild always made; a device with pending rows connects
 * first, as before.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { clientSuite, openDevice, write, type Device, type DeviceOptions } from './support/client-harness.js';
import { serverLists } from './support/read-helpers.js';
import { type TestServer } from './support/server.js';

interface Recording {
  /** Fails a request on its way out (a network error). */
  readonly fail?: (path: string, method: string) => boolean;
  /** Holds a request on its way out until the promise settles. */
  readonly hold?: (name: string) => Promise<void> | undefined;
  /** Called with each answer's name. */
  readonly answered?: (name: string) => void;
}

/** What a device sent and when each answer came back, in order. */
function recording(events: string[], options: Recording = {}): typeof fetch {
  return async (input, init) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    const method = init?.method ?? 'GET';
    const name = `${method} ${url.pathname.replace(/[0-9a-f-]{36}/, '{id}')}`;
    events.push(`send ${name}`);
    if (options.fail?.(url.pathname, method)) {
      events.push(`failed ${name}`);
      throw new TypeError('fetch failed (injected)');
    }
    await options.hold?.(name);
    const response = await fetch(input, init);
    events.push(`answer ${name} ${response.status}`);
    options.answered?.(name);
    return response;
  };
}

const CONNECT = 'POST /sync/connect';
const CREATE = 'POST /sync/snapshot-sessions';

describe('attach: the snapshot session asked for with the connect', () => {
  let s: TestServer;
  const devices = clientSuite((server) => (s = server));
  const device = async (user: string, events: string[], options: DeviceOptions & { record?: Recording } = {}): Promise<Device> => {
    const d = await openDevice(s, user, { ...options, config: { ...options.config, fetch: recording(events, options.record) } });
    devices.push(d);
    return d;
  };
  /** The user's open snapshot sessions, which its quota counts alike. */
  const openSessions = async (user: string): Promise<number> => {
    const sessions = await s.t.exec('SELECT count(*)::int AS n FROM sync.snapshot_sessions WHERE user_id = $1', [user]);
    const quota = await s.t.exec('SELECT coalesce(sum(open_snapshot_sessions), 0)::int AS n FROM sync.user_quota WHERE user_id = $1', [user]);
    expect(quota.rows[0].n).toBe(sessions.rows[0].n);
    return sessions.rows[0].n as number;
  };
  const seed = (user: string, lists: number) => serverLists(s.t.db, user, lists);

  it('a fresh device of a user with data sends the create before the connect is answered, and creates one session', async () => {
    const user = 'early-data';
    await seed(user, 30);
    const events: string[] = [];
    const d = await device(user, events);
    events.length = 0;
    expect(await d.client.attach(user)).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 30 });
    expect(events.indexOf(`send ${CREATE}`)).toBeGreaterThanOrEqual(0);
    expect(events.indexOf(`send ${CREATE}`)).toBeLessThan(events.indexOf(`answer ${CONNECT} 200`));
    expect(events.filter((e) => e === `send ${CREATE}`)).toHaveLength(1);
    const [{ n }] = (await d.db.query<{ n: number }>('SELECT count(*) AS n FROM lists')) as [{ n: number }];
    expect(n).toBe(30);
    await d.client.close();
    expect(await openSessions(user)).toBe(0);
  });

  it('a first device of a user without data: the early session is refused or deleted, none stays open', async () => {
    const user = 'early-empty';
    const events: string[] = [];
    // The create reaches the server only once the connect has initialized the (empty) user, so a
    // session is created, and must go, every time; refused, it would prove nothing here.
    let connected!: () => void;
    const connectAnswered = new Promise<void>((resolve) => (connected = resolve));
    const d = await device(user, events, {
      record: { hold: (name) => (name === CREATE ? connectAnswered : undefined), answered: (name) => name === CONNECT && connected() },
    });
    events.length = 0;
    expect(await d.client.attach(user)).toMatchObject({ status: 'attached', resolution: 'initialize_empty' });
    expect(events).toContain(`answer ${CREATE} 200`);
    expect(events.at(-1)).toMatch(/^answer DELETE \/sync\/snapshot-sessions\/\{id\} 204$/);
    // Deleted before the attach answered: nothing of it is left going (the next request is the
    // caller's own, which tests that hook requests rely on).
    expect(await openSessions(user)).toBe(0);
    const sent = events.length;
    await d.client.close();
    expect(events.slice(sent)).toEqual([]);
    // The user is attached and syncs as any empty one: a second device hydrates nothing, then rows.
    const other: string[] = [];
    const e = await device(user, other);
    expect(await e.client.attach(user)).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 0 });
  });

  it('an early create that fails is replaced by the rebuild’s own create', async () => {
    const user = 'early-fails';
    await seed(user, 12);
    const events: string[] = [];
    let failures = 0;
    // The first create fails on the way out; the rebuild's create goes through.
    const d = await device(user, events, { record: { fail: (path, method) => method === 'POST' && path.endsWith('/sync/snapshot-sessions') && failures++ === 0 } });
    events.length = 0;
    expect(await d.client.attach(user)).toEqual({ status: 'attached', resolution: 'remote_authoritative', hydratedRows: 12 });
    expect(events.filter((e) => e === `send ${CREATE}`)).toHaveLength(2);
    expect(events.indexOf(`failed ${CREATE}`)).toBeLessThan(events.indexOf(`answer ${CREATE} 200`));
    await d.client.close();
    expect(await openSessions(user)).toBe(0);
  });

  it('a device with pending rows connects first: no create goes out with its connect', async () => {
    const user = 'early-pending';
    await seed(user, 3);
    const events: string[] = [];
    const d = await device(user, events);
    await write.list(d.db, randomUUID(), 'offline list', 1);
    events.length = 0;
    expect(await d.client.attach(user)).toMatchObject({ status: 'attached', resolution: 'remote_authoritative' });
    const create = events.indexOf(`send ${CREATE}`);
    expect(create).toBeGreaterThan(events.indexOf(`answer ${CONNECT} 200`));
    expect(events.filter((e) => e === `send ${CREATE}`)).toHaveLength(1);
  });
});
