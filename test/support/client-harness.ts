/**
 * Client devices for tests: the real client over wa-sqlite under Node (in memory, or a file so a
 * test can close and reopen it: a restart), talking HTTP to a real test server. Plus readers that
 * put the server's rows and a device's rows into one comparable shape, each with its own
 * independent conversion (not the client's codec), so a codec bug cannot hide itself.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import { type ClientConfig, type SyncClient, type TableConfig } from '../../client-web/api.js';
import { openClient } from '../../client-web/client.js';
import { openNodeSqlite } from '../../client-web/sqlite/node.js';
import { type SqliteDb } from '../../client-web/sqlite/port.js';
import { signToken, startTestServer, type TestServer, type TestServerOptions } from './server.js';

export { LOCAL_APP_SQL, LOCAL_APP_TABLES } from './local-app.js';
import { LOCAL_APP_SQL, LOCAL_APP_TABLES } from './local-app.js';

/** Fast retries: tests inject faults and should not wait seconds for backoff. */
export const TEST_RETRY = { maxAttempts: 5, baseDelayMs: 5, maxDelayMs: 50 } as const;

export interface DeviceOptions {
  /** File path: the device survives `reopen()`; without it the database lives in memory. */
  readonly path?: string;
  readonly tables?: readonly TableConfig[];
  readonly schemaSql?: string;
  readonly config?: Partial<Omit<ClientConfig, 'db' | 'tables' | 'baseUrl' | 'getToken'>>;
  /** Base URL override (a fault proxy in front of the server). */
  readonly url?: string;
}

export interface Device {
  client: SyncClient;
  db: SqliteDb;
  /** Which user's token the device sends. */
  user: string;
  /** Closes and opens the same file again (a restart); only with `path`. */
  reopen(): Promise<void>;
  close(): Promise<void>;
}

export async function openDevice(server: TestServer, user: string, options: DeviceOptions = {}): Promise<Device> {
  const tokens = new Map<string, Promise<string>>();
  const device: Device = {
    user,
    client: undefined as unknown as SyncClient,
    db: undefined as unknown as SqliteDb,
    async reopen() {
      if (!options.path) throw new Error('reopen needs a file-backed device');
      await device.client.close().catch(() => undefined);
      await open();
    },
    async close() {
      await device.client.close().catch(() => undefined);
    },
  };
  const open = async () => {
    // A file without the flush at each commit: what these tests kill is a process, never the
    // power, and a killed process's writes survive in the OS cache (test/sqlite-port.test.ts
    // keeps the flushing VFS under test).
    device.db = await openNodeSqlite(options.path ? { path: options.path, durable: false } : {});
    await device.db.exec(options.schemaSql ?? LOCAL_APP_SQL);
    device.client = await openClient({
      baseUrl: options.url ?? server.url,
      getToken: () => {
        let token = tokens.get(device.user);
        if (!token) tokens.set(device.user, (token = signToken(device.user)));
        return token;
      },
      db: device.db,
      tables: options.tables ?? LOCAL_APP_TABLES,
      retry: TEST_RETRY,
      ...options.config,
    });
  };
  await open();
  return device;
}

const hex = (v: unknown): string | null => (v === null || v === undefined ? null : Buffer.from(v as Uint8Array).toString('hex'));

/** A UUID stored as 16 bytes, as dashed text. */
export function uuidOfBlob(v: unknown): string {
  const h = hex(v) ?? '';
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function blobOfUuid(id: string): Uint8Array {
  return new Uint8Array(Buffer.from(id.replaceAll('-', ''), 'hex'));
}

export interface AppState {
  lists: Record<string, { title: string; position: number | null }>;
  items: Record<string, { list_id: string; body: string; done: boolean; attachment: string | null }>;
}

/** The server's lists and items of one user. */
export async function serverState(server: TestServer, userId: string): Promise<AppState> {
  const lists = await server.t.exec('SELECT id::text, title, position FROM app.lists WHERE _sync_scope_id = $1', [userId]);
  const items = await server.t.exec("SELECT id::text, list_id::text, body, done, encode(attachment, 'hex') AS attachment FROM app.items WHERE _sync_scope_id = $1", [userId]);
  const state: AppState = { lists: {}, items: {} };
  for (const r of lists.rows) state.lists[r.id] = { title: r.title, position: r.position };
  for (const r of items.rows) state.items[r.id] = { list_id: r.list_id, body: r.body, done: r.done, attachment: r.attachment };
  return state;
}

/** A device's lists and items. */
export async function localState(db: SqliteDb): Promise<AppState> {
  const state: AppState = { lists: {}, items: {} };
  for (const r of await db.query('SELECT id, title, position FROM lists')) {
    state.lists[uuidOfBlob(r['id'])] = { title: r['title'] as string, position: r['position'] === null ? null : Number(r['position']) };
  }
  for (const r of await db.query('SELECT id, list_id, body, done, attachment FROM items')) {
    state.items[r['id'] as string] = { list_id: uuidOfBlob(r['list_id']), body: r['body'] as string, done: r['done'] === 1, attachment: hex(r['attachment']) };
  }
  return state;
}

/** Asserts that every device holds exactly the server's rows of the user. */
export async function expectConverged(server: TestServer, userId: string, ...devices: Device[]): Promise<AppState> {
  const expected = await serverState(server, userId);
  for (const d of devices) expect(await localState(d.db)).toEqual(expected);
  return expected;
}

/** Local writes the way an application makes them. */
export const write = {
  async list(db: SqliteDb, id: string, title: string, position: number | null = null): Promise<void> {
    await db.run('INSERT INTO lists (id, title, position) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET title = excluded.title, position = excluded.position', [blobOfUuid(id), title, position]);
  },
  async item(db: SqliteDb, id: string, listId: string, body: string, extra: { done?: boolean; attachment?: Uint8Array | null } = {}): Promise<void> {
    await db.run(
      'INSERT INTO items (id, list_id, body, done, attachment) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET list_id = excluded.list_id, body = excluded.body, done = excluded.done, attachment = excluded.attachment',
      [id, blobOfUuid(listId), body, extra.done ? 1 : 0, extra.attachment ?? null]);
  },
  async deleteList(db: SqliteDb, id: string): Promise<void> {
    await db.run('DELETE FROM lists WHERE id = ?', [blobOfUuid(id)]);
  },
  async deleteItem(db: SqliteDb, id: string): Promise<void> {
    await db.run('DELETE FROM items WHERE id = ?', [id]);
  },
};

/**
 * One test server for the enclosing describe block: started before its tests (handed to
 * `onStart`), closed after them together with every device pushed into the answered array.
 */
export function clientSuite(onStart: (server: TestServer) => void, options: TestServerOptions = {}): Device[] {
  const devices: Device[] = [];
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await startTestServer(options);
    onStart(server);
  });
  afterAll(async () => {
    for (const d of devices) await d.close();
    await server?.close();
  });
  return devices;
}
