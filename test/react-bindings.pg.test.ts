// @vitest-environment happy-dom
/**
 * Issue 24 item 2, the React bindings (client-web/react) rendered by React DOM into a DOM library
 * (happy-dom), over the real client (wa-sqlite under Node) against a real server: the provider
 * owns the client under StrictMode (one client for a double mount, a new one when the user
 * changes, closed on unmount), `useQuery` re-renders only the rows that changed, `useStatus`
 * re-renders only when the selected part changes, `usePending`, `useQuarantine`, `useConflicts`
 * and the Suspense variant follow the database, and a token provider that throws leaves the local
 * data usable. The same hooks run in chromium in the demo (test/demo.web.test.ts).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createElement as h, memo, StrictMode, Suspense, type ReactNode } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { type SyncClient, type TableConfig } from '../client-web/api.js';
import { openClient } from '../client-web/client.js';
import { openNodeSqlite } from '../client-web/sqlite/node.js';
import { type SqlRow } from '../client-web/sqlite/port.js';
import { LockstepProvider, useConflicts, useLockstep, usePending, useQuarantine, useQuery, useStatus, useSuspenseQuery, type BindableClient } from '../client-web/react/index.js';
import { parseTables } from '../core/config.js';
import { signToken, startTestServer, type TestServer } from './support/server.js';

const SCHEMA_SQL = `
CREATE SCHEMA app;
CREATE TABLE app.tasks (
  id text NOT NULL,
  _sync_scope_id text NOT NULL,
  title text NOT NULL,
  priority integer NOT NULL DEFAULT 0,
  PRIMARY KEY (_sync_scope_id, id),
  UNIQUE (_sync_scope_id, title)
);`;
const LOCAL_SQL = 'CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, title TEXT NOT NULL, priority INTEGER NOT NULL DEFAULT 0)';
const TABLES: readonly TableConfig[] = [{ schema: 'app', table: 'tasks' }];
const TASKS_SQL = 'SELECT id, title, priority FROM tasks ORDER BY title';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Lets React and the client work until `check` holds (or fails naming what the page shows). No
 * act(): updates come from the client whenever its transactions commit, as in a browser.
 */
async function eventually(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms; the page shows ${document.body.innerHTML.slice(0, 500)}`);
    await sleep(20);
  }
}

const text = (testid: string) => document.querySelector(`[data-testid="${testid}"]`)?.textContent ?? null;

describe('React bindings', () => {
  let s: TestServer;
  let root: Root;
  const opened: { user: string; client: SyncClient; closed: boolean }[] = [];
  const tokenFails = { now: false };
  const renders = new Map<string, number>();
  const rendered = (what: string) => renders.set(what, (renders.get(what) ?? 0) + 1);

  async function open(user: string): Promise<BindableClient> {
    const db = await openNodeSqlite();
    await db.exec(LOCAL_SQL);
    const token = await signToken(user);
    const client = await openClient({
      baseUrl: s.url,
      getToken: () => {
        if (tokenFails.now) throw new Error('the identity provider is down');
        return token;
      },
      db,
      tables: TABLES,
      watch: 'long-poll',
      onRejected: 'quarantine',
      retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20 },
    });
    const entry = { user, client, closed: false };
    opened.push(entry);
    const close = client.close.bind(client);
    return Object.assign(Object.create(client) as SyncClient, {
      close: async () => {
        entry.closed = true;
        await close();
      },
    });
  }

  /** Another device of the user, writing through the server. */
  async function otherDevice(user: string): Promise<SyncClient> {
    const db = await openNodeSqlite();
    await db.exec(LOCAL_SQL);
    const token = await signToken(user);
    const client = await openClient({ baseUrl: s.url, getToken: () => token, db, tables: TABLES });
    await client.attach(user);
    return client;
  }

  const Row = memo(function Row({ task }: { task: SqlRow }): ReactNode {
    rendered(`row ${String(task['title'])}`);
    return h('li', { 'data-testid': `task-${String(task['title'])}` }, `${String(task['title'])} (${String(task['priority'])})`);
  });

  function Tasks(): ReactNode {
    const { rows, loading, complete } = useQuery(TASKS_SQL);
    rendered('tasks');
    return h('div', null,
      h('span', { 'data-testid': 'loading' }, String(loading)),
      h('span', { 'data-testid': 'complete' }, String(complete)),
      h('ul', null, rows.map((task) => h(Row, { key: String(task['id']), task }))));
  }

  function Phase(): ReactNode {
    const phase = useStatus((st) => st?.phase ?? 'none');
    rendered('phase');
    return h('span', { 'data-testid': 'phase' }, phase);
  }

  function LastError(): ReactNode {
    const error = useStatus((st) => st?.lastError?.message ?? '');
    return h('span', { 'data-testid': 'last-error' }, error);
  }

  function Pending(): ReactNode {
    const { pendingRows, quarantinedRows } = usePending();
    return h('span', { 'data-testid': 'pending' }, `${pendingRows}/${quarantinedRows}`);
  }

  function Quarantine(): ReactNode {
    const { rows, drop } = useQuarantine();
    return h('ul', null, rows.map((r) => h('li', { key: r.id, 'data-testid': 'quarantined' },
      String(r.row?.['title']), h('button', { 'data-testid': 'drop', onClick: () => void drop(r.id) }, 'drop'))));
  }

  function Conflicts(): ReactNode {
    const { conflicts, dismiss } = useConflicts();
    return h('ul', null, conflicts.map((c) => h('li', { key: c.id, 'data-testid': 'conflict' },
      `${c.key}: kept ${c.keptLocal.join(',')}; took ${c.tookServer.join(',')}`, h('button', { 'data-testid': 'dismiss', onClick: () => void dismiss([c.id]) }, 'ok'))));
  }

  function Opening(): ReactNode {
    const { phase, user } = useLockstep();
    return h('span', { 'data-testid': 'provider' }, `${phase}:${user ?? ''}`);
  }

  function App({ user }: { user: string | null }): ReactNode {
    return h(LockstepProvider, { user, open, start: { debounceMs: 10, periodicMs: 0 } },
      h(Opening), h(Tasks), h(Phase), h(LastError), h(Pending), h(Quarantine), h(Conflicts));
  }
  /** StrictMode at the root: React runs every effect's setup and cleanup twice on mount only when it is there. */
  const strict = (user: string | null) => h(StrictMode, null, h(App, { user }));

  beforeAll(async () => {
    s = await startTestServer({ schemaSql: SCHEMA_SQL, tables: parseTables('app.tasks:id') });
    document.body.innerHTML = '<div id="root"></div>';
    root = createRoot(document.getElementById('root') as HTMLElement);
  });
  afterAll(async () => {
    root?.unmount();
    await sleep(50);
    for (const o of opened) await o.client.close().catch(() => undefined);
    await s?.close();
  });

  let alice: SyncClient;
  let other: SyncClient;

  it('under StrictMode the provider opens one client, starts its loop and the hooks show its data', async () => {
    root.render(strict('alice'));
    await eventually('the client is open and synced', () => text('provider') === 'open:alice' && text('phase') === 'idle' && text('complete') === 'true');
    // StrictMode mounted every effect twice: still one client.
    expect(opened.map((o) => o.user)).toEqual(['alice']);
    alice = (opened[0] as { client: SyncClient }).client;
    expect(text('loading')).toBe('false');
    expect(text('pending')).toBe('0/0');
  });

  it('a local write shows at once and counts as pending until synced; another device\'s write arrives; unchanged rows are not re-rendered', async () => {
    await alice.db.run("INSERT INTO tasks (id, title, priority) VALUES ('a1', 'alpha', 1)");
    await eventually('the new row', () => text('task-alpha') === 'alpha (1)');
    await eventually('synced', () => text('pending') === '0/0');
    other = await otherDevice('alice');
    await other.sync();
    await other.db.run("INSERT INTO tasks (id, title, priority) VALUES ('b1', 'beta', 2)");
    const alphaRenders = renders.get('row alpha');
    const phaseRenders = renders.get('phase') ?? 0;
    await other.sync();
    await eventually('the other device\'s row', () => text('task-beta') === 'beta (2)');
    // alpha did not change: its row component did not render again.
    expect(renders.get('row alpha')).toBe(alphaRenders);
    // The phase went through syncing and back; a status change that keeps the phase renders nothing.
    await eventually('idle again', () => text('phase') === 'idle');
    const settled = renders.get('phase') ?? 0;
    expect(settled).toBeGreaterThan(phaseRenders);
    alice.requestSync();
    await sleep(300);
    expect(text('phase')).toBe('idle');
    expect((renders.get('phase') ?? 0) - settled).toBeLessThanOrEqual(2 * 2); // syncing and idle again, rendered twice each under StrictMode
  });

  it('the quarantine and the conflict log follow the database, with drop and dismiss', async () => {
    // The other device takes the title 'gamma' first: alice's 'gamma' breaks the unique title.
    await other.db.run("INSERT INTO tasks (id, title) VALUES ('o-g', 'gamma')");
    await other.sync();
    await alice.stop();
    await alice.db.run("INSERT INTO tasks (id, title) VALUES ('a-g', 'gamma')");
    await alice.sync();
    await eventually('set aside', () => document.querySelectorAll('[data-testid="quarantined"]').length === 1 && text('pending') === '0/1');
    (document.querySelector('[data-testid="drop"]') as HTMLButtonElement).click();
    await eventually('dropped', () => document.querySelectorAll('[data-testid="quarantined"]').length === 0 && text('pending') === '0/0');

    // A conflict merged column by column is logged; dismissing it clears it.
    await alice.sync();
    await alice.db.run("UPDATE tasks SET priority = 9 WHERE id = 'b1'");
    await other.db.run("UPDATE tasks SET title = 'beta (renamed)' WHERE id = 'b1'");
    await other.sync();
    await alice.sync();
    await eventually('the conflict shown', () => text('conflict')?.startsWith('b1: kept priority; took title') ?? false);
    expect(text('task-beta (renamed)')).toBe('beta (renamed) (9)');
    (document.querySelector('[data-testid="dismiss"]') as HTMLButtonElement).click();
    await eventually('dismissed', () => document.querySelectorAll('[data-testid="conflict"]').length === 0);
    alice.start({ userId: 'alice', debounceMs: 10, periodicMs: 0 });
  });

  it('a token provider that throws: the status says why, local data stays live, and it recovers', async () => {
    tokenFails.now = true;
    await alice.db.run("INSERT INTO tasks (id, title) VALUES ('a-t', 'while the token fails')");
    await eventually('the local write shown', () => text('task-while the token fails') !== null);
    await eventually('the failure in the status', () => (text('last-error') ?? '').includes('the identity provider is down'));
    expect(text('pending')).toBe('1/0');
    tokenFails.now = false;
    alice.requestSync();
    await eventually('synced after the token works again', () => text('pending') === '0/0' && text('last-error') === '');
  });

  it('another user: the old client is stopped and closed, a new one opened; signing out closes it', async () => {
    root.render(strict('bob'));
    await eventually('bob\'s client open', () => text('provider') === 'open:bob' && text('complete') === 'true');
    expect(opened.map((o) => o.user)).toEqual(['alice', 'bob']);
    await eventually('alice\'s client closed', () => (opened[0] as { closed: boolean }).closed);
    expect(document.querySelectorAll('li[data-testid^="task-"]').length).toBe(0);
    root.render(strict(null));
    await eventually('signed out', () => text('provider') === 'signed_out:' && (opened[1] as { closed: boolean }).closed);
    expect(text('loading')).toBe('true');
  });

  it('useSuspenseQuery suspends until the client is open and the first result is in', async () => {
    const user = `carol-${randomUUID().slice(0, 8)}`;
    const seed = await otherDevice(user);
    await seed.db.run("INSERT INTO tasks (id, title) VALUES ('c1', 'from the server')");
    await seed.sync();
    await seed.close();
    function Suspended(): ReactNode {
      const { rows } = useSuspenseQuery(TASKS_SQL);
      return h('span', { 'data-testid': 'suspended' }, rows.map((r) => String(r['title'])).join(','));
    }
    root.render(h(StrictMode, null, h(LockstepProvider, { user, open },
      h(Suspense, { fallback: h('span', { 'data-testid': 'fallback' }, 'loading…') }, h(Suspended)))));
    await eventually('the fallback while the client opens and hydrates', () => text('fallback') === 'loading…');
    await eventually('the rows after the hydration', () => text('suspended') === 'from the server');
  });
});
