/**
 * Issues 7 and 19: the demo app in a real browser (chromium through playwright-core), against a
 * real server with the demo schema. Each browser context is one device with its own OPFS
 * database, service worker and storage: a laptop at desktop width and a phone at 390 px. Two
 * devices of one user converge; a device that goes offline keeps working, survives a reload (app
 * shell from the service worker, data from OPFS) and its writes arrive when it is back; another
 * user sees none of it; conflicts and rejections are told in the user's words; a fresh device
 * hydrates 20,000 rows with a moving progress bar and pages its long lists; the app is back
 * within seconds of a server restart; over plain http on a LAN name it says it needs a secure
 * context. Every screenshot (test-artifacts/demo/, desktop and phone) is reviewed for layout: no
 * horizontal overflow, every shown control visible and not covered.
 *
 * Issue 24: the demo is a React app on the bindings (client-web/react) in StrictMode, so these run
 * every hook in chromium: live updates across devices and tabs, the quarantine's Retry (which says
 * why a to-do whose list is gone cannot go back, and moves it to another list) and Drop, and the
 * defects a new user met (buttons at 390 px, a sign-out notice that stayed, a badge that said
 * online while the server was down, a note that stayed after data arrived, a phone that did not
 * show the chosen list's to-dos).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, type Page } from 'playwright-core';
import { parseTables } from '../core/config.js';
import { serverWrite } from '../core/sync/push/server-write.js';
import { DEMO_SCHEMA_SQL, DEMO_SYNC_TABLES, demoSeed } from '../demo/schema.js';
import { buildDemo } from '../dev/build-demo.js';
import { startGateway, type Gateway } from '../dev/gateway.js';
import { findChromium, INSECURE_HOST, launchChromium, layoutProblems, openDemoDevice, PHONE, screenshot, type DemoDevice } from './support/browser.js';
import { missing } from './support/prerequisites.js';
import { startTestServer, TEST_JWT_SECRET, type TestServer } from './support/server.js';
import { HANG_MS } from './support/until.js';

/**
 * How long a change may take to travel device → server → device before the wait counts as a hang:
 * minutes (test/support/until.ts), so a loaded machine never fails a test that waits for an event.
 */
const SYNC_WAIT_MS = HANG_MS;
const SHOTS = 'demo';

const testid = (page: Page, id: string) => page.locator(`[data-testid="${id}"]`);
const todo = (page: Page, title: string) => page.locator(`[data-testid="todo"][data-title="${title}"]`);
const list = (page: Page, title: string) => page.locator(`[data-testid="list"][data-title="${title}"]`);

async function text(page: Page, id: string): Promise<string> {
  return (await testid(page, id).textContent()) ?? '';
}

/** Waits until `read` answers `want` (compared as JSON), or fails naming the last answer. */
async function until<T>(what: string, read: () => Promise<T>, want: T, timeoutMs = SYNC_WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await read();
    if (JSON.stringify(last) === JSON.stringify(want)) return;
    if (Date.now() > deadline) throw new Error(`${what}: waited ${timeoutMs} ms for ${JSON.stringify(want)}, last saw ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * What the page's sync worker (it owns the database and syncs) sees of the network, or null
 * before it runs. The browser emulates offline per target: the worker may go offline a moment
 * after the page does, and a write in between could still leave.
 */
async function syncWorkerOnline(page: Page): Promise<boolean | null> {
  const worker = page.workers().find((w) => new URL(w.url()).pathname === '/worker.js');
  return worker ? worker.evaluate(() => navigator.onLine) : null;
}

/** Takes a device offline and waits until its sync worker is too: from then on nothing leaves it. */
async function goOffline(device: DemoDevice): Promise<void> {
  await device.context.setOffline(true);
  await until(`${device.name}'s sync worker is offline`, () => syncWorkerOnline(device.page), false);
}

async function signIn(device: DemoDevice, user: string): Promise<void> {
  const { page } = device;
  await testid(page, 'user-input').fill(user);
  await testid(page, 'sign-in-button').click();
  await testid(page, 'app').waitFor({ state: 'visible' });
  await until(`${device.name} attached and synced`, async () => (await text(page, 'last-sync')).startsWith('last synced'), true);
}

async function addList(page: Page, title: string): Promise<void> {
  await testid(page, 'new-list-title').fill(title);
  await testid(page, 'add-list').click();
  await list(page, title).waitFor();
  await until('the new list is selected', () => text(page, 'current-list'), title);
}

async function addTodo(page: Page, title: string, file?: { name: string; buffer: Buffer }): Promise<void> {
  await testid(page, 'new-todo-title').fill(title);
  if (file) await testid(page, 'new-todo-file').setInputFiles({ name: file.name, mimeType: 'application/octet-stream', buffer: file.buffer });
  await testid(page, 'add-todo').click();
  await todo(page, title).waitFor();
}

/** Takes a screenshot and reviews the page's layout at the device's width. */
async function shot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  await screenshot(page, SHOTS, name, options);
  expect(await layoutProblems(page), `layout of ${name} (${page.viewportSize()?.width} px)`).toEqual([]);
}

/** Words of the client and the server that must never reach the screen. */
const INTERNAL = /remote[ _]authoritative|initiali[sz]e_|push_rejected|network_error|_fkey|constraint "|sqlstate|undefined/i;

async function serverTodos(s: TestServer, user: string): Promise<Record<string, { done: boolean; attachment: string | null }>> {
  const { rows } = await s.t.exec("SELECT title, done, encode(attachment, 'hex') AS attachment FROM demo.todos WHERE _sync_scope_id = $1 ORDER BY title", [user]);
  return Object.fromEntries(rows.map((r) => [r.title as string, { done: r.done as boolean, attachment: r.attachment as string | null }]));
}

// Generous timeouts: `npm test` runs this beside the PostgreSQL suites on a 2-core machine.
describe.skipIf(missing('chromium'))('demo app in chromium', () => {
  let s: TestServer;
  let browser: Browser;
  const devices: DemoDevice[] = [];
  const device = async (name: string, options: { phone?: boolean } = {}) => {
    const d = await openDemoDevice(browser, s.url, name, options);
    devices.push(d);
    return d;
  };

  let staticDir: string;
  let busy = false;
  const BUSY_ANSWER = {
    statusCode: 503,
    headers: { 'content-type': 'application/json', 'retry-after': '1' },
    body: JSON.stringify({ error: 'service_unavailable', message: 'the database is unavailable or busy; retry later' }),
  };
  /** Reads of a committed bundle's rows (a replay read back, client-web/replay-prediction.ts). */
  let committedReads = 0;
  /** The gateway started again by the restart test, on the same port. */
  let restarted: Gateway | undefined;

  beforeAll(async () => {
    // A folder of its own: `npm start` (test/local-runtime.pg.test.ts, running alongside) rebuilds
    // demo/dist from scratch, and pages served from it meanwhile answered 404.
    staticDir = (await buildDemo(mkdtempSync(join(tmpdir(), 'lockstep-demo-')))).outDir;
    s = await startTestServer({
      schemaSql: DEMO_SCHEMA_SQL,
      tables: parseTables(DEMO_SYNC_TABLES),
      staticDir,
      devTokens: true,
      // While `busy`, every /sync/* request answers 503 with Retry-After, as an overloaded server does.
      intercept: (event, next) => {
        if (event.rawPath.startsWith('/sync/committed-bundles/')) committedReads++;
        return busy && event.rawPath.startsWith('/sync/') ? Promise.resolve(BUSY_ANSWER) : next();
      },
    });
    browser = await launchChromium(findChromium() as NonNullable<ReturnType<typeof findChromium>>);
  });

  afterAll(async () => {
    const logged = devices.flatMap((d) => d.consoleErrors);
    if (logged.length) console.warn(`browser console errors (failed requests while offline are expected):\n${logged.join('\n')}`);
    for (const d of devices) await d.close().catch(() => undefined);
    await browser?.close();
    await restarted?.close();
    await s?.close();
    if (staticDir) rmSync(staticDir, { recursive: true, force: true });
  });

  let a1: DemoDevice;
  let a2: DemoDevice;

  it('two devices of one user converge', async () => {
    a1 = await device('alice-laptop');
    a2 = await device('alice-phone', { phone: true });
    await shot(a2.page, 'a-phone-sign-in');
    await signIn(a1, 'alice');
    await signIn(a2, 'alice');

    await addList(a1.page, 'Groceries');
    const written = Date.now();
    await addTodo(a1.page, 'milk');
    await todo(a2.page, 'milk').waitFor({ timeout: SYNC_WAIT_MS });
    console.log(`a to-do written on one device showed on the other after ${Date.now() - written} ms`);
    await addTodo(a1.page, 'receipt', { name: 'receipt.bin', buffer: Buffer.from([0, 1, 2, 254, 255]) });
    await todo(a2.page, 'receipt').waitFor({ timeout: SYNC_WAIT_MS });
    expect(await todo(a2.page, 'receipt').locator('[data-testid="todo-attachment"]').textContent()).toContain('receipt.bin (5 B)');
    // The attachment's bytes made it through the server to the other device intact.
    const [download] = await Promise.all([a2.page.waitForEvent('download'), todo(a2.page, 'receipt').locator('[data-testid="todo-attachment"]').click()]);
    expect(download.suggestedFilename()).toBe('receipt.bin');
    expect([...readFileSync(await download.path())]).toEqual([0, 1, 2, 254, 255]);

    // The other way: the phone ticks milk off and renames the list; the laptop sees both.
    await todo(a2.page, 'milk').locator('[data-testid="todo-done"]').check();
    await list(a2.page, 'Groceries').locator('[data-testid="list-title"]').fill('Groceries (week 48)');
    await list(a2.page, 'Groceries').locator('[data-testid="list-title"]').press('Enter');
    await until('laptop sees milk done', () => todo(a1.page, 'milk').getAttribute('data-done'), 'true');
    await list(a1.page, 'Groceries (week 48)').waitFor({ timeout: SYNC_WAIT_MS });
    await until('laptop has nothing pending', () => text(a1.page, 'pending-rows'), '0');
    await until('phone has nothing pending', () => text(a2.page, 'pending-rows'), '0');

    expect(await serverTodos(s, 'alice')).toEqual({ milk: { done: true, attachment: null }, receipt: { done: false, attachment: '000102feff' } });
    // Every push's replay was built from the pushed rows: the demo's values (timestamps from
    // toISOString, base64 bytes) are what the server commits, so no bundle was read back.
    expect(committedReads).toBe(0);
    const { rows: lists } = await s.t.exec('SELECT title FROM demo.lists WHERE _sync_scope_id = $1', ['alice']);
    expect(lists).toEqual([{ title: 'Groceries (week 48)' }]);
    await shot(a1.page, 'a-laptop-converged');
    await shot(a2.page, 'a-phone-converged');
    for (const d of [a1, a2]) expect(await d.page.locator('body').innerText()).not.toMatch(INTERNAL);
    expect([...a1.pageErrors, ...a2.pageErrors]).toEqual([]);
  });

  it('a device offline keeps working, reloads from the service worker and OPFS, and syncs when back', async () => {
    const { page } = a2;
    await until('phone has the app shell cached', () => testid(page, 'shell-state').getAttribute('data-state'), 'cached');
    await goOffline(a2);
    await until('phone shows offline', () => testid(page, 'net-state').getAttribute('data-state'), 'offline');
    await addTodo(page, 'bread (offline)');
    await todo(page, 'milk').locator('[data-testid="todo-delete"]').click();
    await todo(page, 'milk').waitFor({ state: 'detached' });
    await until('phone counts its offline writes', () => text(page, 'pending-rows'), '2');
    await shot(page, 'b-phone-offline');

    // A reload while offline: the page comes from the service worker, the rows from OPFS.
    const reloaded = await page.reload();
    expect(reloaded?.fromServiceWorker()).toBe(true);
    await todo(page, 'bread (offline)').waitFor();
    await until('phone still counts its offline writes after the reload', () => text(page, 'pending-rows'), '2');
    expect(await todo(page, 'milk').count()).toBe(0);
    expect(await testid(page, 'net-state').getAttribute('data-state')).toBe('offline');
    await shot(page, 'b-phone-reloaded-offline');
    // Nothing left the device: the laptop and the server still have milk and no bread.
    expect(Object.keys(await serverTodos(s, 'alice'))).toEqual(['milk', 'receipt']);
    expect(await todo(a1.page, 'bread (offline)').count()).toBe(0);

    await a2.context.setOffline(false);
    await todo(a1.page, 'bread (offline)').waitFor({ timeout: SYNC_WAIT_MS });
    await todo(a1.page, 'milk').waitFor({ state: 'detached', timeout: SYNC_WAIT_MS });
    await until('phone has nothing pending', () => text(page, 'pending-rows'), '0');
    expect(await serverTodos(s, 'alice')).toEqual({ 'bread (offline)': { done: false, attachment: null }, receipt: { done: false, attachment: '000102feff' } });
    await shot(a1.page, 'b-laptop-after-phone-came-back');
    expect([...a1.pageErrors, ...a2.pageErrors]).toEqual([]);
  });

  it('another user sees none of it; the server keeps every row in its user\'s scope', async () => {
    const b = await device('bob-laptop');
    await signIn(b, 'bob');
    expect(await text(b.page, 'count-rows')).toBe('0');
    expect(await text(b.page, 'attach-note')).toBe('New account: nothing to download yet.');
    await addList(b.page, 'Bob only');
    // Something is here now: the note no longer holds.
    await until('the new-account note clears', () => text(b.page, 'attach-note'), '');
    await addTodo(b.page, 'bob secret');
    await until('bob has nothing pending', () => text(b.page, 'pending-rows'), '0');
    // Alice writes after Bob committed; once her other device has it, both have pulled past Bob's commit.
    await addTodo(a1.page, 'after bob');
    await todo(a2.page, 'after bob').waitFor({ timeout: SYNC_WAIT_MS });
    for (const d of [a1, a2]) {
      expect(await list(d.page, 'Bob only').count()).toBe(0);
      expect(await text(d.page, 'count-rows')).toBe('4');
    }
    expect(await testid(b.page, 'todo').count()).toBe(1);
    expect(await text(b.page, 'count-rows')).toBe('2');

    const { rows } = await s.t.exec(
      `SELECT _sync_scope_id AS scope, 'list:' || title AS row FROM demo.lists UNION ALL
       SELECT _sync_scope_id, 'todo:' || title FROM demo.todos ORDER BY 1, 2`);
    expect(rows).toEqual([
      { scope: 'alice', row: 'list:Groceries (week 48)' },
      { scope: 'alice', row: 'todo:after bob' },
      { scope: 'alice', row: 'todo:bread (offline)' },
      { scope: 'alice', row: 'todo:receipt' },
      { scope: 'bob', row: 'list:Bob only' },
      { scope: 'bob', row: 'todo:bob secret' },
    ]);
    await shot(b.page, 'c-bob');
    expect(b.pageErrors).toEqual([]);
  });

  it('sign-out is blocked while changes are unsynced, then detaches and clears the device', async () => {
    const b = devices.find((d) => d.name === 'bob-laptop') as DemoDevice;
    await goOffline(b);
    await until('bob shows offline', () => testid(b.page, 'net-state').getAttribute('data-state'), 'offline');
    await addTodo(b.page, 'unsynced');
    await testid(b.page, 'sign-out').click();
    await until('sign-out is blocked', () => text(b.page, 'sign-out-blocked'), 'Sign-out blocked: 1 pending row is not synced yet. Go online and sync first.');
    await shot(b.page, 'c-bob-sign-out-blocked');
    await b.context.setOffline(false);
    await until('bob has nothing pending', () => text(b.page, 'pending-rows'), '0');
    // Nothing pending any more: the notice goes by itself.
    await testid(b.page, 'sign-out-blocked').waitFor({ state: 'hidden' });
    await testid(b.page, 'sign-out').click();
    await testid(b.page, 'sign-in').waitFor({ state: 'visible' });
    // Signing in again hydrates the device from the server.
    await signIn(b, 'bob');
    await until('bob has his rows back', () => text(b.page, 'count-rows'), '3');
    expect(await serverTodos(s, 'bob')).toEqual({ 'bob secret': { done: false, attachment: null }, unsynced: { done: false, attachment: null } });
    expect(b.pageErrors).toEqual([]);
  });

  it('two tabs of one device share the database: one syncs, the other follows and takes over when it closes', async () => {
    const b = devices.find((d) => d.name === 'bob-laptop') as DemoDevice;
    const first = b.page;
    const second = await b.context.newPage();
    await second.goto('/');
    await until('the second tab follows', () => text(second, 'tab-role'), 'another tab syncs');
    expect(await text(first, 'tab-role')).toBe('this tab syncs');
    await until('the second tab shows the rows', () => text(second, 'count-rows'), '3');
    await second.locator('[data-testid="todo"]').first().waitFor();
    await addTodo(second, 'from the second tab');
    await todo(first, 'from the second tab').waitFor();
    await until('the write from the follower is synced', async () => Object.keys(await serverTodos(s, 'bob')).includes('from the second tab'), true);
    await shot(second, 'c-bob-second-tab');

    await first.close();
    await until('the second tab takes over', () => text(second, 'tab-role'), 'this tab syncs');
    await addTodo(second, 'after the takeover');
    await until('the new owner syncs', async () => Object.keys(await serverTodos(s, 'bob')).includes('after the takeover'), true);
    b.page = second;
    expect(b.pageErrors).toEqual([]);
  });

  it('shows a conflict resolved by the server, and a refused to-do set aside (quarantined) with a drop button', async () => {
    // Both devices rename the same to-do offline; the laptop syncs first and its version wins.
    await goOffline(a1);
    await goOffline(a2);
    for (const [d, title] of [[a1, 'receipt (laptop)'], [a2, 'receipt (phone)']] as const) {
      const input = todo(d.page, 'receipt').locator('[data-testid="todo-title"]');
      await input.fill(title);
      await input.press('Enter');
      await todo(d.page, title).waitFor();
    }
    await a1.context.setOffline(false);
    await until('laptop synced its rename', () => text(a1.page, 'pending-rows'), '0');
    await a2.context.setOffline(false);
    await todo(a2.page, 'receipt (laptop)').waitFor({ timeout: SYNC_WAIT_MS });
    await until('phone shows the conflict', () => text(a2.page, 'conflicts-text'), 'One change made here met a newer change from another device; the other device’s version was kept.');
    await until('phone has nothing pending', () => text(a2.page, 'pending-rows'), '0');
    expect(Object.keys(await serverTodos(s, 'alice'))).toContain('receipt (laptop)');
    await shot(a2.page, 'e-phone-conflict');
    // The notice goes away when dismissed, and stays away until another conflict.
    await testid(a2.page, 'dismiss-conflicts').click();
    await testid(a2.page, 'conflicts').waitFor({ state: 'hidden' });

    // The phone adds a to-do offline to a list the laptop deletes meanwhile: the server refuses it.
    await addList(a1.page, 'Party');
    await list(a2.page, 'Party').waitFor({ timeout: SYNC_WAIT_MS });
    await goOffline(a2);
    await list(a2.page, 'Party').locator('[data-testid="list-select"]').click();
    await until('phone shows Party', () => text(a2.page, 'current-list'), 'Party');
    await addTodo(a2.page, 'balloons');
    await list(a1.page, 'Party').locator('[data-testid="list-delete"]').click();
    await list(a1.page, 'Party').waitFor({ state: 'detached' });
    await until('laptop synced the delete', () => text(a1.page, 'pending-rows'), '0');
    await a2.context.setOffline(false);
    // The server refuses the to-do (its list is gone): the client sets it aside and syncs the rest.
    await testid(a2.page, 'quarantine').waitFor({ state: 'visible', timeout: SYNC_WAIT_MS });
    const quarantined = a2.page.locator('[data-testid="quarantined"]');
    expect(await quarantined.count()).toBe(1);
    const message = (await quarantined.first().textContent()) ?? '';
    expect(message).toContain('balloons');
    // In the user's words: what happened, no constraint name.
    expect(message).toContain('it belongs to something another device deleted meanwhile');
    expect(await a2.page.locator('body').innerText()).not.toMatch(INTERNAL);
    await shot(a2.page, 'e-phone-quarantined');
    await until('phone has nothing pending with the refused row set aside', () => text(a2.page, 'pending-rows'), '0');
    await list(a2.page, 'Party').waitFor({ state: 'detached', timeout: SYNC_WAIT_MS });
    expect(await todo(a2.page, 'balloons').count()).toBe(0);
    expect(await testid(a2.page, 'rejected').isHidden()).toBe(true);
    await quarantined.first().locator('[data-testid="quarantine-drop"]').click();
    await testid(a2.page, 'quarantine').waitFor({ state: 'hidden', timeout: SYNC_WAIT_MS });
    expect(Object.keys(await serverTodos(s, 'alice'))).not.toContain('balloons');
    console.log(`refused to-do shown as: ${message}`);
    expect([...a1.pageErrors, ...a2.pageErrors]).toEqual([]);
  });

  it('Retry on a to-do whose list is gone says why and moves it to another list; the buttons fit a 390 px phone', async () => {
    await addList(a1.page, 'Picnic');
    await list(a2.page, 'Picnic').waitFor({ timeout: SYNC_WAIT_MS });
    await goOffline(a2);
    await list(a2.page, 'Picnic').locator('[data-testid="list-select"]').click();
    await until('phone shows Picnic', () => text(a2.page, 'current-list'), 'Picnic');
    await addTodo(a2.page, 'cake');
    await list(a1.page, 'Picnic').locator('[data-testid="list-delete"]').click();
    await list(a1.page, 'Picnic').waitFor({ state: 'detached' });
    const picnicOnServer = async () => (await s.t.exec("SELECT count(*)::int AS n FROM demo.lists WHERE _sync_scope_id = 'alice' AND title = 'Picnic'")).rows[0]?.n;
    await until('the server has the delete', picnicOnServer, 0);
    await a2.context.setOffline(false);
    const row = a2.page.locator('[data-testid="quarantined"]').first();
    await row.waitFor({ timeout: SYNC_WAIT_MS }).catch(async (error: unknown) => {
      // Say what the phone showed, so a failure here can be told apart from a slow machine.
      const shown = await Promise.all(['net-state', 'pending-rows', 'last-sync', 'sync-error-text', 'checkpoint'].map(async (id) => `${id}=${await text(a2.page, id)}`));
      throw new Error(`the set-aside to-do did not show (${shown.join(', ')})`, { cause: error });
    });
    // On the phone, Retry and Drop are finger-sized and apart.
    const [retry, drop] = await Promise.all(['quarantine-retry', 'quarantine-drop'].map((id) => row.locator(`[data-testid="${id}"]`).boundingBox()));
    expect(retry && drop, 'both buttons are shown').toBeTruthy();
    for (const box of [retry, drop]) expect(box?.width ?? 0).toBeGreaterThanOrEqual(44);
    const apart = (retry?.y ?? 0) + (retry?.height ?? 0) <= (drop?.y ?? 0) || (retry?.x ?? 0) + (retry?.width ?? 0) + 4 <= (drop?.x ?? 0);
    expect(apart, `Retry ${JSON.stringify(retry)} and Drop ${JSON.stringify(drop)} do not touch`).toBe(true);
    await shot(a2.page, 'e-phone-quarantined-retry');

    // Retry cannot put it back in its list: the app says why, and offers another list.
    await row.locator('[data-testid="quarantine-retry"]').click();
    await until('the reason', () => row.locator('[data-testid="quarantine-reason"]').textContent(), ' Its list was deleted on another device, so it cannot go back there.');
    expect(await a2.page.locator('body').innerText()).not.toMatch(/FOREIGN KEY|Something went wrong/);
    await testid(a2.page, 'sync-error').waitFor({ state: 'hidden' });
    await shot(a2.page, 'e-phone-quarantine-move');
    await row.locator('[data-testid="quarantine-move-to"]').selectOption({ label: 'Groceries (week 48)' });
    await row.locator('[data-testid="quarantine-move"]').click();
    await testid(a2.page, 'quarantine').waitFor({ state: 'hidden', timeout: SYNC_WAIT_MS });
    await until('the server has the moved to-do', async () => Object.keys(await serverTodos(s, 'alice')).includes('cake'), true);
    const { rows } = await s.t.exec("SELECT l.title FROM demo.todos t JOIN demo.lists l ON l.id = t.list_id AND l._sync_scope_id = t._sync_scope_id WHERE t._sync_scope_id = 'alice' AND t.title = 'cake'");
    expect(rows).toEqual([{ title: 'Groceries (week 48)' }]);
    await list(a1.page, 'Groceries (week 48)').locator('[data-testid="list-select"]').click();
    await todo(a1.page, 'cake').waitFor({ timeout: SYNC_WAIT_MS });
    expect([...a1.pageErrors, ...a2.pageErrors]).toEqual([]);
  });

  it('starts without a red "offline" flash', async () => {
    const { page } = a1;
    // Records every state of the badge from the first moment of the page on. A mutation observer
    // sees each change as it lands; an animation-frame poll is throttled on a busy machine and can
    // still be a frame behind the badge when the wait below already reads "online".
    await page.addInitScript(() => {
      const seen: string[] = [];
      (globalThis as unknown as { __netStates: string[] }).__netStates = seen;
      const record = () => {
        const badge = document.getElementById('net-state');
        const state = badge?.dataset['state'];
        // The text says why ("server unreachable" or "offline"), for the failure message.
        if (state && seen.at(-1)?.split(':')[0] !== state) seen.push(`${state}:${badge?.textContent ?? ''}`);
        // Online is where the record ends; the later tests on this page need no observer.
        if (state === 'online') observer.disconnect();
      };
      const observer = new MutationObserver(record);
      observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    });
    await page.reload();
    const lastSeen = () => page.evaluate(() => (globalThis as unknown as { __netStates: string[] }).__netStates.at(-1)?.split(':')[0]);
    await until('laptop online again', lastSeen, 'online');
    const states = await page.evaluate(() => (globalThis as unknown as { __netStates: string[] }).__netStates);
    expect(states.filter((st) => st.startsWith('offline')), JSON.stringify(states)).toEqual([]);
  });

  it('runs in StrictMode: every effect mounts twice, and the tab still opens one sync worker', async () => {
    const { page } = a1;
    await page.addInitScript(() => {
      const counts = { workers: 0 };
      (globalThis as unknown as { __syncWorkers: typeof counts }).__syncWorkers = counts;
      const Original = globalThis.Worker;
      globalThis.Worker = class extends Original {
        constructor(url: string | URL, options?: WorkerOptions) {
          super(url, options);
          if (options?.name === 'lockstep-sync') counts.workers++;
        }
      };
    });
    await page.reload();
    await until('laptop online again', () => testid(page, 'net-state').getAttribute('data-state'), 'online');
    await until('laptop synced', async () => (await text(page, 'last-sync')).startsWith('last synced'), true);
    // The app marks its root effect's mounts: StrictMode (a development build of React) ran it twice.
    expect(await page.evaluate(() => document.documentElement.dataset['mounts'])).toBe('2');
    expect(await page.evaluate(() => (globalThis as unknown as { __syncWorkers: { workers: number } }).__syncWorkers.workers)).toBe(1);
    expect(await text(page, 'tab-role')).toBe('this tab syncs');
    expect(a1.pageErrors).toEqual([]);
  });

  it('on a phone, choosing a list brings its to-dos into view', async () => {
    await serverWrite(s.t.db, { userId: 'dave', sourceId: 'server:seed', retainedBundlesPerUser: 10_000 }, async (tx, scope) => {
      for (const statement of demoSeed(scope, 16, 2)) await tx.query(statement);
    });
    const d = await device('dave-phone', { phone: true });
    await signIn(d, 'dave');
    await until('dave hydrated', () => text(d.page, 'count-lists'), '16');
    await d.page.evaluate(() => window.scrollTo(0, 0));
    const panelTop = () => d.page.evaluate(() => (document.getElementById('todos-panel') as HTMLElement).getBoundingClientRect().top);
    // Sixteen lists push the to-dos below the fold.
    expect(await panelTop()).toBeGreaterThan(844);
    await list(d.page, 'List 02').locator('[data-testid="list-select"]').click();
    await until('List 02 shown', () => text(d.page, 'current-list'), 'List 02');
    await until('its to-dos in view', async () => {
      const top = await panelTop();
      return top >= -1 && top < 844 - 100;
    }, true, 5000);
    await todo(d.page, 'to-do 2.1').waitFor();
    expect(await todo(d.page, 'to-do 2.1').isVisible()).toBe(true);
    await shot(d.page, 'h-phone-list-chosen', { fullPage: false });
    expect(d.pageErrors).toEqual([]);
  });

  it('a busy server (503) shows as busy, not unreachable, and the write syncs once it answers', async () => {
    busy = true;
    await addTodo(a1.page, 'while busy');
    await until('laptop shows the server busy', () => testid(a1.page, 'net-state').getAttribute('data-state'), 'busy');
    expect(await text(a1.page, 'net-state')).toBe('server busy, retrying');
    busy = false;
    await until('laptop synced its write', () => text(a1.page, 'pending-rows'), '0');
    await until('laptop online again', () => testid(a1.page, 'net-state').getAttribute('data-state'), 'online');
  });

  it('syncs the pending write and clears the error once a restarted server is back', async () => {
    const port = Number(new URL(s.url).port);
    await s.gateway.close();
    // Nothing pending, no write: the closed notification socket alone turns the badge.
    expect(await text(a1.page, 'pending-rows')).toBe('0');
    await until('laptop notices the server is gone without a write', () => text(a1.page, 'net-state'), 'server unreachable', 20_000);
    await addTodo(a1.page, 'during the restart');
    await until('laptop notices the server is gone', () => text(a1.page, 'net-state'), 'server unreachable');
    expect(await text(a1.page, 'sync-error-text')).toBe('Can’t reach the server. Your changes are saved on this device and will sync when it is back.');
    await shot(a1.page, 'f-laptop-server-unreachable');
    // Long enough for the sync loop's own retries to have backed off to several seconds.
    await new Promise((r) => setTimeout(r, 5000));
    restarted = await startGateway({ runtime: s.runtime, auth: { secret: TEST_JWT_SECRET }, port, staticDir, devTokens: true });
    const back = Date.now();
    await until('laptop synced its write', () => text(a1.page, 'pending-rows'), '0');
    const laptopMs = Date.now() - back;
    await todo(a2.page, 'during the restart').waitFor({ timeout: SYNC_WAIT_MS });
    const phoneMs = Date.now() - back;
    console.log(`after a server restart: the laptop's pending write synced in ${laptopMs} ms, the phone showed it after ${phoneMs} ms`);
    // The pending count is live (it drops with the replay's commit); the badge follows the sync's end.
    await until('the badge no longer says unreachable', async () => (await text(a1.page, 'net-state')) !== 'server unreachable', true);
    expect(await testid(a1.page, 'sync-error').isHidden()).toBe(true);
  });

  it('a fresh device hydrates 20,000 rows with a moving progress bar, then pages the long list', async () => {
    const lists = 20;
    const todosPerList = 999;
    await serverWrite(s.t.db, { userId: 'carol', sourceId: 'server:seed', retainedBundlesPerUser: 10_000 }, async (tx, scope) => {
      for (const statement of demoSeed(scope, lists, todosPerList)) await tx.query(statement);
    });
    const total = lists + lists * todosPerList;
    expect(total).toBe(20_000);

    const c = await device('carol-new-tablet');
    // A sample of the page at every change of its DOM from before the sign-in on (not on a timer,
    // which a fast download slips between): the progress bar (its position is -1 while
    // indeterminate), its texts and the row count.
    type Sample = { t: number; v: number; hidden: boolean; rows: string; text: string };
    await c.page.evaluate(() => {
      const samples: Sample[] = [];
      (globalThis as unknown as { __samples: Sample[] }).__samples = samples;
      // Looked up at every sample: the workspace (and its bar) renders only once signed in.
      const find = <E extends Element>(id: string) => document.querySelector(`[data-testid="${id}"]`) as E | null;
      new MutationObserver(() => {
        const bar = find<HTMLProgressElement>('progress-bar');
        const box = find<HTMLElement>('hydrate-progress');
        if (!bar || !box) return;
        samples.push({ t: performance.now(), v: bar.position, hidden: box.hidden, rows: find('count-rows')?.textContent ?? '', text: box.textContent ?? '' });
      }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    });
    // The codings the snapshot's answers came in: chromium asks for brotli, and the edge answers it.
    const codings = new Set<string>();
    c.page.context().on('response', (res) => {
      if (new URL(res.url()).pathname.startsWith('/sync/snapshot-sessions')) codings.add(res.headers()['content-encoding'] ?? 'none');
    });
    const clickedAt = await c.page.evaluate(() => performance.now());
    await testid(c.page, 'user-input').fill('carol');
    await testid(c.page, 'sign-in-button').click();
    await until('carol hydrated', () => text(c.page, 'count-rows'), String(total));
    await until('the progress bar goes away when the sync ends', () => testid(c.page, 'hydrate-progress').isHidden(), true);
    expect([...codings]).toContain('br');
    const samples = await c.page.evaluate(() => (globalThis as unknown as { __samples: Sample[] }).__samples);
    const shown = samples.filter((x) => !x.hidden);
    const determinate = shown.filter((x) => x.v >= 0).map((x) => x.v);
    const intermediate = [...new Set(determinate.filter((v) => v > 0 && v < 1))];
    const barShown = shown[0]?.t ?? NaN;
    const saving = shown.find((x) => x.v === -1)?.t ?? NaN;
    const counted = samples.find((x) => x.rows === String(total))?.t ?? NaN;
    const hidden = samples.find((x) => x.t > barShown && x.hidden)?.t ?? NaN;
    const ms = (x: number) => Math.round(x);
    console.log(
      `hydration of ${total} rows in chromium: ${ms(counted - clickedAt)} ms from the sign-in click to the count shown ` +
        `(${Math.round(total / ((counted - clickedAt) / 1000))} rows/s): sign-in, worker, connect and snapshot session ${ms(barShown - clickedAt)} ms, ` +
        `download of the pages ${ms(saving - barShown)} ms (${Math.round(total / ((saving - barShown) / 1000))} rows/s, ${intermediate.length} intermediate bar values), ` +
        `saving them (indeterminate bar) and first render ${ms(counted - saving)} ms; bar hidden ${ms(hidden - counted)} ms after the count`);

    // Four pages of 5,000 rows (the demo's page size), each its own message from the worker: the
    // bar shows a value between empty and full (React may render two close messages as one, so
    // not necessarily all three).
    expect(intermediate.length).toBeGreaterThanOrEqual(1);
    // The bar only moves forward while it counts pages, then says it is saving, then goes away.
    expect(determinate).toEqual([...determinate].sort((x, y) => x - y));
    expect(shown.some((x) => x.v === -1 && x.text.includes('Saving on this device'))).toBe(true);
    expect(shown.filter((x) => x.t > saving).every((x) => x.v === -1)).toBe(true);
    expect(samples.some((x) => /\b0 \/ 0\b/.test(x.text))).toBe(false);
    expect(await text(c.page, 'attach-note')).toBe('Downloaded 20,000 rows from the server.');
    expect(await text(c.page, 'count-lists')).toBe(String(lists));
    expect(await text(c.page, 'count-todos')).toBe(String(lists * todosPerList));
    expect(await c.page.locator('body').innerText()).not.toMatch(INTERNAL);

    // A list longer than a page is paged, and a new to-do shows at once, on the last page.
    expect(await testid(c.page, 'todo').count()).toBe(200);
    expect(await text(c.page, 'todos-more')).toBe(`1–200 of ${todosPerList} to-dos`);
    await shot(c.page, 'd-carol-hydrated', { fullPage: false });
    await testid(c.page, 'todos-next').click();
    await until('the second page', () => text(c.page, 'todos-more'), `201–400 of ${todosPerList} to-dos`);
    await todo(c.page, 'to-do 1.201').waitFor();
    await addTodo(c.page, 'carol adds one more');
    await until('the last page with the new to-do', () => text(c.page, 'todos-more'), `801–1000 of ${todosPerList + 1} to-dos`);
    expect(await todo(c.page, 'carol adds one more').isVisible()).toBe(true);
    expect(await testid(c.page, 'todos-next').isDisabled()).toBe(true);
    await c.page.setViewportSize(PHONE);
    await shot(c.page, 'd-carol-phone-last-page', { fullPage: false });
    expect(c.pageErrors).toEqual([]);
  });

  it('over plain http on a LAN name it says that a secure context is needed', async () => {
    for (const phone of [false, true]) {
      const d = await device(phone ? 'lan-phone' : 'lan-laptop', { phone });
      await d.page.goto(`http://${INSECURE_HOST}:${new URL(s.url).port}/`);
      await testid(d.page, 'insecure').waitFor({ state: 'visible' });
      expect(await d.page.evaluate(() => isSecureContext)).toBe(false);
      expect(await text(d.page, 'insecure-origin')).toBe(`http://${INSECURE_HOST}:${new URL(s.url).port}`);
      expect(await testid(d.page, 'sign-in').isHidden()).toBe(true);
      await shot(d.page, phone ? 'g-insecure-phone' : 'g-insecure-desktop');
      expect(d.pageErrors).toEqual([]);
    }
  });
});
