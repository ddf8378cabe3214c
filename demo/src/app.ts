/**
 * The demo's main thread: sign-in, the lists and todos UI, and the sync status bar. The data lives
 * in SQLite (OPFS) inside the sync worker (worker.ts); this file only sends SQL and client calls
 * there and renders what comes back, so the app works the same offline. The client's own sync
 * loop (`client.start()`) decides when to sync and reports its status; the service worker (sw.ts)
 * caches this shell so a reload works offline too.
 */
import { connectSyncWorker, WorkerCallError, type WorkerSyncClient } from '../../client-web/browser/worker-client.js';
import type { PendingStatus, Progress, QuarantinedRow, SyncStatus } from '../../client-web/api.js';
import { dbNameFor } from './local-schema.js';
import { clearSession, loadSession, mintDevToken, saveSession, type Session } from './session.js';
import { ATTACHMENT_BYTES_MAX, createStore, TODOS_PAGE_SIZE, type ListRow, type Store, type TodoRow } from './store.js';
import { watchServerReturn, type ServerWatch } from './reconnect.js';
import { attachText, errorText, quarantineText, rejectionText } from './texts.js';
import { byId, el, formatBytes, reconcile, setInputValue } from './view.js';

interface Running {
  readonly session: Session;
  readonly client: WorkerSyncClient;
  readonly store: Store;
  readonly selectedKey: string;
  selectedListId: string | null;
  /** The page of the selected list's to-dos on screen (0-based). */
  todoPage: number;
  /** A to-do to scroll into view once rendered (the one just added). */
  revealTodoId: string | null;
  /** Conflicts counted when the notice was last dismissed: it shows again when more arrive. */
  conflictsDismissed: number;
  /** Probes the server while it is unreachable, to resume syncing as soon as it is back. */
  readonly serverWatch: ServerWatch;
  /** Ends the event subscriptions of this session. */
  readonly off: (() => void)[];
}

let current: Running | null = null;

const describe = (error: unknown): string => (error instanceof WorkerCallError ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error));

function showError(error: unknown): void {
  console.warn('lockstep demo:', describe(error));
  byId('sync-error-text').textContent = errorText(describe(error));
  byId('sync-error').hidden = false;
}

/** Runs a UI action; a failure is shown, never left as an unhandled rejection. */
function act(task: () => Promise<unknown>): void {
  task().catch(showError);
}

// ── Sign-in ─────────────────────────────────────────────────────────────────────────────────────

function showSignIn(message = ''): void {
  byId('app').hidden = true;
  byId('sign-out').hidden = true;
  byId('user-name').textContent = '';
  byId('sign-in').hidden = false;
  byId('sign-in-error').textContent = message;
  byId<HTMLInputElement>('user-input').focus();
}

byId<HTMLFormElement>('sign-in-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const userId = byId<HTMLInputElement>('user-input').value.trim();
  byId('sign-in-error').textContent = 'signing in…';
  mintDevToken(userId)
    .then((session) => {
      saveSession(session);
      startSession(session);
    })
    .catch((error: unknown) => (byId('sign-in-error').textContent = describe(error)));
});

byId('sign-out').addEventListener('click', () => act(signOut));

/** Sign-out detaches the device, which clears its copy; refused while changes are unsynced. */
async function signOut(): Promise<void> {
  const run = current;
  if (!run) return;
  const blocked = byId('sign-out-blocked');
  // One last sync, so what is pending can leave before the detach (which refuses while it is there).
  if (navigator.onLine) await run.client.sync().catch(() => undefined);
  const result = await run.client.detach();
  if (result.status === 'blocked') {
    blocked.textContent = `Sign-out blocked: ${result.pendingRows} pending row${result.pendingRows === 1 ? ' is' : 's are'} not synced yet. Go online and sync first.`;
    blocked.hidden = false;
    return;
  }
  blocked.hidden = true;
  await endSession();
  clearSession();
  showSignIn('Signed out; this device no longer holds your data.');
}

async function endSession(): Promise<void> {
  const run = current;
  if (!run) return;
  current = null;
  run.serverWatch.stop();
  for (const off of run.off) off();
  await run.client.close();
}

// ── Session ─────────────────────────────────────────────────────────────────────────────────────

function startSession(session: Session): void {
  byId('sign-in').hidden = true;
  byId('app').hidden = false;
  byId('sign-out').hidden = false;
  byId('user-name').textContent = session.userId;
  byId('sync-error').hidden = true;

  const worker = new Worker('/worker.js', { type: 'module', name: 'lockstep-sync' });
  const client = connectSyncWorker(worker, { dbName: dbNameFor(session.userId), baseUrl: location.origin, token: session.token });
  const selectedKey = `lockstep-demo-selected-${session.userId}`;
  const run: Running = {
    session,
    client,
    store: createStore(client),
    selectedKey,
    selectedListId: localStorage.getItem(selectedKey),
    todoPage: 0,
    revealTodoId: null,
    conflictsDismissed: 0,
    serverWatch: watchServerReturn(() => void run.client.requestSync()),
    off: [],
  };
  current = run;
  run.off.push(
    client.on('progress', renderProgress),
    client.on('role', (role) => {
      const badge = byId('tab-role');
      badge.dataset['state'] = role;
      badge.textContent = role === 'owner' ? 'this tab syncs' : role === 'follower' ? 'another tab syncs' : 'starting';
      if (client.status) renderSyncStatus(client.status);
    }),
    // Any tab's writes and syncs: re-read the rows (the owner's loop syncs the writes by itself).
    client.on('change', () => scheduleRender()),
    client.on('status', (status) => {
      renderSyncStatus(status);
      if (status.lastError?.code === 'authentication_failed') act(() => refreshToken(run));
    }),
  );
  scheduleRender();
  // The library's sync loop, in whichever tab owns the database: attach this user if needed, then
  // sync after writes, on watch wake-ups, on `online` and visibility, with backoff. A refused source
  // (a cloned or restored database) rotates by itself.
  client.start({ userId: session.userId, recoverSource: true, backoff: { baseMs: 1000, maxMs: 15_000 } }).catch((error: unknown) => {
    showError(error);
    // The first start of a device needs the server (its table specs); try again when online.
    if (error instanceof WorkerCallError && error.code === 'open_failed') addEventListener('online', () => location.reload(), { once: true });
  });
}

/** The server refused the token (it expired): get a fresh one and sync again. */
async function refreshToken(run: Running): Promise<void> {
  const fresh = await mintDevToken(run.session.userId);
  saveSession(fresh);
  run.client.setToken(fresh.token);
  await run.client.requestSync();
}

// ── Rendering ───────────────────────────────────────────────────────────────────────────────────

/** A task that runs one at a time; calls while it runs coalesce into one more run after it. */
function coalesced(task: () => Promise<void>): () => void {
  let running = false;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    (async () => {
      do {
        again = false;
        await task();
      } while (again);
    })()
      .catch(showError)
      .finally(() => (running = false));
  };
}

/**
 * Re-reads the local tables and the sync status and updates the page. The status is read apart:
 * it waits for the client (a running sync holds it), and the rows must never wait for a sync.
 */
function scheduleRender(): void {
  renderRows();
  renderPending();
  renderQuarantined();
}

const renderRows = coalesced(async () => {
  const run = current;
  if (!run) return;
  const [lists, counts] = [await run.store.lists(), await run.store.counts()];
  if (current !== run) return;
  if (!lists.some((l) => l.id === run.selectedListId)) run.selectedListId = lists[0]?.id ?? null;
  const selected = lists.find((l) => l.id === run.selectedListId);
  // Past the last page (to-dos deleted, or another list): the last page there is.
  run.todoPage = Math.max(0, Math.min(run.todoPage, Math.ceil((selected?.todoCount ?? 0) / TODOS_PAGE_SIZE) - 1));
  const todos = run.selectedListId ? await run.store.todos(run.selectedListId, run.todoPage) : [];
  byId('count-lists').textContent = String(counts.lists);
  byId('count-todos').textContent = String(counts.todos);
  byId('count-rows').textContent = String(counts.lists + counts.todos);
  renderLists(run, lists);
  renderTodos(run, lists, todos);
});

const renderPending = coalesced(async () => {
  const run = current;
  if (!run) return;
  const status = await run.client.pendingStatus();
  if (current === run) renderStatus(status);
});

function renderStatus(status: PendingStatus): void {
  byId('pending-rows').textContent = String(status.dirtyRows + status.frozenRows);
  byId('checkpoint').textContent = String(status.checkpoint);
  renderRejected(status.rejected);
}

function renderRejected(rejected: { readonly code: string; readonly message: string } | null): void {
  const box = byId('rejected');
  const text = rejected ? rejectionText(rejected.code, rejected.message) : '';
  if (rejected && box.hidden) console.info('lockstep demo: the server rejected the bundle:', `${rejected.code}: ${rejected.message}`);
  box.hidden = rejected === null;
  byId('rejected-message').textContent = text;
}

/** Rows the server refused, set aside by the client (the quarantine), each with its reason. */
function renderQuarantine(run: Running, rows: readonly QuarantinedRow[]): void {
  byId('quarantine').hidden = rows.length === 0;
  reconcile(
    byId('quarantine-list'),
    rows,
    (row) => String(row.id),
    (row) => {
      const li = el('li', { testid: 'quarantined' });
      const what = row.row?.['title'] ?? row.key;
      li.append(
        el('span', {}, `${row.table === 'todos' ? 'to-do' : 'list'} “${String(what)}” was set aside: ${row.dependsOn === null ? quarantineText(row.code, row.message) : 'it depends on another change the server refused.'} `),
        el('button', { testid: 'quarantine-retry', title: 'push it again', onclick: () => act(() => run.client.requeueQuarantined(row.id)) }, 'Retry'),
        el('button', { testid: 'quarantine-drop', title: 'forget this change', onclick: () => act(() => run.client.dropQuarantined(row.id)) }, 'Drop'),
      );
      return li;
    },
    (li, row) => {
      li.dataset['key'] = row.key;
    },
  );
}

const renderQuarantined = coalesced(async () => {
  const run = current;
  if (!run) return;
  const rows = await run.client.quarantined();
  if (current === run) renderQuarantine(run, rows);
});

/** How the first connect of this device went, as the client reports it ("remote authoritative: 12 rows hydrated"). */
function attachNote(attach: SyncStatus['attach']): string {
  if (attach?.status === 'attached') return `${attach.resolution.replaceAll('_', ' ')}${attach.hydratedRows ? `: ${attach.hydratedRows} rows hydrated` : ''}`;
  if (attach?.status !== 'retry_later') return '';
  return attach.reason === 'server_schema_behind' ? 'waiting for the server to publish this app version\'s tables' : 'the server is initializing this user';
}

function renderSyncStatus(status: SyncStatus): void {
  const run = current;
  const unreachable = status.lastError?.code === 'network_error';
  // A server that answered "busy" (503, 429) is reachable: the loop waits as told and tries again.
  const busy = status.phase === 'backoff' && !unreachable;
  const online = navigator.onLine && !unreachable;
  const syncing = status.phase === 'syncing';
  const net = byId('net-state');
  net.dataset['state'] = !online ? 'offline' : busy ? 'busy' : syncing ? 'syncing' : 'online';
  net.textContent = !navigator.onLine ? 'offline' : unreachable ? 'server unreachable' : busy ? 'server busy, retrying' : syncing ? 'syncing…' : 'online';
  // The loop backs off while the server is down; the probe resumes it the moment it is back.
  if (navigator.onLine && unreachable) run?.serverWatch.probe();
  byId('last-sync').textContent = status.lastSyncedAt
    ? `last synced ${new Date(status.lastSyncedAt).toLocaleTimeString()}`
    : current?.client.role === 'follower'
      ? 'synced by another tab'
      : status.attachedUserId
        ? 'not synced this session'
        : 'not attached yet';
  byId('attach-note').textContent = attachText(attachNote(status.attach));
  renderConflicts(status.conflictsResolved);
  // A held rejection has its own notice.
  const lastError = status.rejected ? null : status.lastError;
  byId('sync-error').hidden = lastError === null;
  byId('sync-error-text').textContent = lastError ? errorText(`${lastError.code}: ${lastError.message}`) : '';
  if (lastError) console.warn('lockstep demo: sync failed:', `${lastError.code}: ${lastError.message}`);
  // The progress bar belongs to one sync: when it ends, so does the bar.
  if (!syncing) hideProgress();
  renderRejected(status.rejected);
  scheduleRender();
}

function renderConflicts(resolved: number): void {
  const run = current;
  const unseen = resolved - (run?.conflictsDismissed ?? 0);
  byId('conflicts').hidden = unseen <= 0;
  byId('conflicts-text').textContent =
    `${unseen === 1 ? 'One change' : `${unseen} changes`} made here met a newer change from another device; the other device’s version was kept.`;
}

/** Small pushes and pulls finish before a bar could say anything; hydrations always show it. */
const PROGRESS_ROWS_MIN = 1000;

function renderProgress(progress: Progress): void {
  // Nothing to count (an empty account) is nothing to show.
  if (progress.rowsTotal === 0 || (progress.phase !== 'hydrate' && progress.rowsTotal < PROGRESS_ROWS_MIN)) return;
  byId('progress').hidden = false;
  const bar = byId<HTMLProgressElement>('progress-bar');
  const fraction = Math.min(1, progress.rowsDone / progress.rowsTotal);
  const rows = progress.rowsTotal.toLocaleString('en');
  if (progress.phase === 'hydrate' && progress.rowsDone >= progress.rowsTotal) {
    // Every page is here; saving them into the local tables (one transaction) takes a while
    // more, with nothing to count: an indeterminate bar says work goes on, until the sync ends.
    bar.removeAttribute('value');
    byId('progress-phase').textContent = 'Saving on this device';
    byId('progress-text').textContent = `${rows} rows…`;
    return;
  }
  bar.value = fraction;
  byId('progress-phase').textContent = progress.phase === 'hydrate' ? 'Downloading your data' : progress.phase === 'pull' ? 'Receiving changes' : 'Sending changes';
  byId('progress-text').textContent = `${progress.rowsDone.toLocaleString('en')} / ${rows} rows (${Math.round(fraction * 100)}%)`;
}

function hideProgress(): void {
  byId('progress').hidden = true;
  byId<HTMLProgressElement>('progress-bar').value = 0;
}

function selectList(run: Running, id: string): void {
  if (run.selectedListId !== id) run.todoPage = 0;
  run.selectedListId = id;
  localStorage.setItem(run.selectedKey, id);
  scheduleRender();
}

/** Commits an edited title on change (blur or Enter); an empty title restores the old one. */
function titleInput(testid: string, save: (title: string) => Promise<void>): HTMLInputElement {
  const input = el('input', { type: 'text', testid });
  input.addEventListener('change', () => {
    const title = input.value.trim();
    if (title) act(() => save(title));
    else scheduleRender();
  });
  input.addEventListener('keydown', (event) => event.key === 'Enter' && input.blur());
  return input;
}

function renderLists(run: Running, lists: readonly ListRow[]): void {
  reconcile(
    byId('lists'),
    lists,
    (list) => list.id,
    (list) => {
      const li = el('li', { testid: 'list' });
      li.dataset['id'] = list.id;
      li.append(
        el('button', { testid: 'list-select', title: 'open this list', onclick: () => selectList(run, list.id) }, '▸'),
        titleInput('list-title', (title) => run.store.renameList(list.id, title)),
        el('span', { className: 'muted', testid: 'list-count' }),
        el('button', { testid: 'list-delete', title: 'delete the list and its to-dos', onclick: () => act(() => run.store.deleteList(list.id)) }, '✕'),
      );
      return li;
    },
    (li, list) => {
      li.dataset['title'] = list.title;
      li.classList.toggle('selected', list.id === run.selectedListId);
      setInputValue(li.querySelector('input') as HTMLInputElement, list.title);
      (li.querySelector('[data-testid=list-count]') as HTMLElement).textContent = String(list.todoCount);
    },
  );
}

function renderTodos(run: Running, lists: readonly ListRow[], todos: readonly TodoRow[]): void {
  const list = lists.find((l) => l.id === run.selectedListId);
  byId('current-list').textContent = list ? list.title : 'No list selected';
  byId('new-todo-form').hidden = !list;
  const count = list?.todoCount ?? 0;
  const pages = Math.ceil(count / TODOS_PAGE_SIZE);
  byId('todos-pager').hidden = pages <= 1;
  byId('todos-more').textContent =
    pages > 1 ? `${run.todoPage * TODOS_PAGE_SIZE + 1}–${Math.min(count, (run.todoPage + 1) * TODOS_PAGE_SIZE)} of ${count} to-dos` : '';
  byId<HTMLButtonElement>('todos-prev').disabled = run.todoPage === 0;
  byId<HTMLButtonElement>('todos-next').disabled = run.todoPage >= pages - 1;
  reconcile(
    byId('todos'),
    todos,
    (todo) => todo.id,
    (todo) => {
      const li = el('li', { testid: 'todo' });
      li.dataset['id'] = todo.id;
      const done = el('input', { type: 'checkbox', testid: 'todo-done' });
      done.addEventListener('change', () => act(() => run.store.setDone(todo.id, done.checked)));
      const attachment = el('a', { testid: 'todo-attachment', href: '#', title: 'download the attachment' });
      attachment.addEventListener('click', (event) => {
        event.preventDefault();
        act(() => download(run, todo.id));
      });
      li.append(
        done,
        titleInput('todo-title', (title) => run.store.renameTodo(todo.id, title)),
        attachment,
        el('button', { testid: 'todo-delete', title: 'delete', onclick: () => act(() => run.store.deleteTodo(todo.id)) }, '✕'),
      );
      return li;
    },
    (li, todo) => {
      li.dataset['title'] = todo.title;
      li.dataset['done'] = String(todo.done);
      li.classList.toggle('done', todo.done);
      (li.querySelector('[data-testid=todo-done]') as HTMLInputElement).checked = todo.done;
      setInputValue(li.querySelector('[data-testid=todo-title]') as HTMLInputElement, todo.title);
      const attachment = li.querySelector('[data-testid=todo-attachment]') as HTMLAnchorElement;
      attachment.hidden = todo.attachmentName === null;
      attachment.textContent = todo.attachmentName ? `${todo.attachmentName} (${formatBytes(todo.attachmentBytes ?? 0)})` : '';
    },
  );
  if (run.revealTodoId) {
    byId('todos').querySelector(`[data-key="${run.revealTodoId}"]`)?.scrollIntoView({ block: 'nearest' });
    run.revealTodoId = null;
  }
}

/** Shows another page of the selected list's to-dos. */
function turnPage(delta: number): void {
  const run = current;
  if (!run) return;
  run.todoPage = Math.max(0, run.todoPage + delta);
  scheduleRender();
}

async function download(run: Running, todoId: string): Promise<void> {
  const file = await run.store.attachment(todoId);
  if (!file) return;
  const url = URL.createObjectURL(new Blob([file.bytes as Uint8Array<ArrayBuffer>]));
  el('a', { href: url, download: file.name }).click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// ── Forms ───────────────────────────────────────────────────────────────────────────────────────

byId<HTMLFormElement>('new-list-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const run = current;
  const input = byId<HTMLInputElement>('new-list-title');
  const title = input.value.trim();
  if (!run || !title) return;
  input.value = '';
  act(async () => selectList(run, await run.store.addList(title)));
});

byId<HTMLFormElement>('new-todo-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const run = current;
  const input = byId<HTMLInputElement>('new-todo-title');
  const fileInput = byId<HTMLInputElement>('new-todo-file');
  const title = input.value.trim();
  const listId = run?.selectedListId;
  if (!run || !title || !listId) return;
  const file = fileInput.files?.[0];
  if (file && file.size > ATTACHMENT_BYTES_MAX) return showError(new Error(`attachments are limited to ${formatBytes(ATTACHMENT_BYTES_MAX)} in this demo`));
  input.value = '';
  fileInput.value = '';
  act(async () => {
    const id = await run.store.addTodo(listId, title, file ? { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) } : null);
    // A new to-do comes last: show the last page, and the new to-do on it.
    const list = (await run.store.lists()).find((l) => l.id === listId);
    run.todoPage = Math.max(0, Math.ceil((list?.todoCount ?? 0) / TODOS_PAGE_SIZE) - 1);
    run.revealTodoId = id;
    scheduleRender();
  });
});

byId('todos-prev').addEventListener('click', () => turnPage(-1));
byId('todos-next').addEventListener('click', () => turnPage(1));
byId('dismiss-conflicts').addEventListener('click', () => {
  if (!current) return;
  const resolved = current.client.status?.conflictsResolved ?? 0;
  current.conflictsDismissed = resolved;
  renderConflicts(resolved);
});

byId('sync-now').addEventListener('click', () => act(() => current?.client.requestSync() ?? Promise.resolve()));
byId('discard-rejected').addEventListener('click', () => act(async () => void (await current?.client.discardRejected())));
for (const type of ['online', 'offline']) {
  addEventListener(type, () => {
    const status = current?.client.status;
    if (status) renderSyncStatus(status);
  });
}

// ── Start ───────────────────────────────────────────────────────────────────────────────────────

async function registerShell(): Promise<void> {
  const badge = byId('shell-state');
  if (!('serviceWorker' in navigator)) return;
  await navigator.serviceWorker.register('/sw.js');
  await navigator.serviceWorker.ready;
  badge.dataset['state'] = 'cached';
  badge.textContent = 'works offline';
}

/**
 * Over plain http to anything but localhost the browser withholds what the app needs (OPFS,
 * service workers, crypto.randomUUID): say so instead of failing on the first of them.
 */
function showInsecure(): void {
  byId('insecure').hidden = false;
  byId('insecure-origin').textContent = location.origin;
  byId<HTMLAnchorElement>('insecure-local').href = `http://localhost:${location.port || '80'}/`;
  byId('insecure-local').textContent = `http://localhost:${location.port || '80'}`;
}

if (!isSecureContext) showInsecure();
else {
  registerShell().catch((error: unknown) => console.warn('service worker not registered', error));
  const saved = loadSession();
  if (saved) startSession(saved);
  else showSignIn();
}
