/**
 * The signed-in user's workspace: the status bar, the notices, the lists and the to-dos of the
 * selected list, all live (the React bindings re-render what a committed transaction changed, in
 * this tab, in the user's other tabs, and from other devices).
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import { WorkerCallError } from '../../../client-web/browser/worker-client.js';
import { useLockstep, useQuery, useStatus } from '../../../client-web/react/index.js';
import { LISTS_SQL, type ListRow } from '../store.js';
import { errorText } from '../texts.js';
import { useDevice } from './device.js';
import { Lists } from './lists.js';
import { ConflictsNotice, ProgressNotice, QuarantineNotice, RejectedNotice, SignOutBlocked, SyncErrorNotice } from './notices.js';
import { SyncBar } from './sync-bar.js';
import { Todos } from './todos.js';

const describe = (error: unknown): string => (error instanceof WorkerCallError ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error));

/** Phones: one column, the to-dos below the lists. */
const ONE_COLUMN = '(max-width: 640px)';

export function Workspace({ userId, shell, signOutBlocked, onTokenExpired }: {
  userId: string;
  shell: { state: string; text: string };
  signOutBlocked: boolean;
  onTokenExpired: () => void;
}) {
  const { phase, error } = useLockstep();
  const { client, store } = useDevice();
  const [actionError, setActionError] = useState<string | null>(null);
  const showError = useCallback((message: string) => {
    console.warn('lockstep demo:', message);
    setActionError(message);
  }, []);
  /** Runs a UI action; a failure is shown, never left as an unhandled rejection. */
  const act = useCallback((task: () => Promise<unknown>) => {
    setActionError(null);
    task().catch((e: unknown) => showError(describe(e)));
  }, [showError]);

  const selectedKey = `lockstep-demo-selected-${userId}`;
  const [selectedId, setSelectedId] = useState<string | null>(() => localStorage.getItem(selectedKey));
  const [page, setPage] = useState(0);
  const lists = useQuery<ListRow>(LISTS_SQL);
  const todosPanel = useRef<HTMLElement>(null);
  const selected = lists.rows.find((l) => l.id === selectedId) ?? (lists.loading ? undefined : lists.rows[0]);

  const select = useCallback((id: string) => {
    setSelectedId((before) => {
      if (before !== id) setPage(0);
      return id;
    });
    localStorage.setItem(selectedKey, id);
    // On a phone the to-dos are below the lists: bring them into view.
    if (matchMedia(ONE_COLUMN).matches) requestAnimationFrame(() => todosPanel.current?.scrollIntoView({ block: 'start' }));
  }, [selectedKey]);

  // The server refused the token (it expired): get a fresh one.
  const authFailed = useStatus((st) => st?.lastError?.code === 'authentication_failed');
  useEffect(() => {
    if (authFailed) onTokenExpired();
  }, [authFailed, onTokenExpired]);

  const lastError = useStatus((st) => st?.lastError ?? null);
  useEffect(() => {
    if (lastError) console.warn('lockstep demo: sync failed:', `${lastError.code}: ${lastError.message}`);
  }, [lastError]);

  // The first start of a device needs the server (its table specs): try again when online.
  useEffect(() => {
    if (phase !== 'failed') return;
    const reload = () => location.reload();
    addEventListener('online', reload, { once: true });
    return () => removeEventListener('online', reload);
  }, [phase]);

  return (
    <div id="app" data-testid="app">
      <SyncBar shell={shell} />
      <SignOutBlocked blocked={signOutBlocked} />
      <ProgressNotice />
      <ConflictsNotice />
      <RejectedNotice act={act} />
      <QuarantineNotice />
      {phase === 'failed' ? (
        <div className="notice error" data-testid="sync-error"><span data-testid="sync-error-text">{errorText(describe(error))}</span></div>
      ) : (
        <SyncErrorNotice actionError={actionError} />
      )}
      <main>
        {store && client ? (
          <>
            <Lists store={store} selectedId={selected?.id ?? null} select={select} act={act} />
            <Todos ref={todosPanel} store={store} list={selected} page={page} setPage={setPage} act={act} showError={showError} />
          </>
        ) : null}
      </main>
    </div>
  );
}
