/**
 * The notices above the lists: a blocked sign-out (while rows are pending), hydration progress,
 * conflicts (from the conflict log: what was merged, what the other device's change replaced), a
 * held rejection, the set-aside rows (the quarantine) with what can be done about each, and the
 * last sync failure in the user's words.
 */
import { useLayoutEffect, useRef, useState } from 'react';
import type { ConflictRecord, Progress, QuarantinedRow } from '../../../client-web/api.js';
import { WorkerCallError } from '../../../client-web/browser/worker-client.js';
import { useConflicts, usePending, useQuarantine, useQuery, useStatus } from '../../../client-web/react/index.js';
import { LISTS_SQL, type ListRow } from '../store.js';
import { errorText, quarantineText, rejectionText } from '../texts.js';
import { useDevice, useProgress } from './device.js';

export function SignOutBlocked({ blocked }: { blocked: boolean }) {
  const { pendingRows } = usePending();
  // The notice holds while something is pending; once it synced, signing out works again.
  const show = blocked && pendingRows > 0;
  return (
    <div className="notice rejected" data-testid="sign-out-blocked" hidden={!show}>
      {show ? `Sign-out blocked: ${pendingRows} pending row${pendingRows === 1 ? ' is' : 's are'} not synced yet. Go online and sync first.` : ''}
    </div>
  );
}

/** Small pushes and pulls finish before a bar could say anything; hydrations always show it. */
const PROGRESS_ROWS_MIN = 1000;

function progressView(progress: Progress | null): { phase: string; text: string; fraction: number | null } | null {
  // Nothing to count (an empty account) is nothing to show.
  if (!progress || progress.rowsTotal === 0 || (progress.phase !== 'hydrate' && progress.rowsTotal < PROGRESS_ROWS_MIN)) return null;
  const rows = progress.rowsTotal.toLocaleString('en');
  if (progress.phase === 'hydrate' && progress.rowsDone >= progress.rowsTotal) {
    // Every page is here; saving them into the local tables (one transaction) takes a while more,
    // with nothing to count: an indeterminate bar says work goes on, until the sync ends.
    return { phase: 'Saving on this device', text: `${rows} rows…`, fraction: null };
  }
  const fraction = Math.min(1, progress.rowsDone / progress.rowsTotal);
  return {
    phase: progress.phase === 'hydrate' ? 'Downloading your data' : progress.phase === 'pull' ? 'Receiving changes' : 'Sending changes',
    text: `${progress.rowsDone.toLocaleString('en')} / ${rows} rows (${Math.round(fraction * 100)}%)`,
    fraction,
  };
}

export function ProgressNotice() {
  const { client } = useDevice();
  const progress = useProgress(client);
  const syncing = useStatus((st) => st?.phase === 'syncing');
  // The bar belongs to one sync: when it ends, so does the bar (until the next progress event).
  const [endedWith, setEndedWith] = useState<Progress | null>(null);
  if (!syncing && progress !== endedWith) setEndedWith(progress);
  const view = syncing || progress !== endedWith ? progressView(progress) : null;
  const bar = useRef<HTMLProgressElement>(null);
  useLayoutEffect(() => {
    const element = bar.current;
    if (!element) return;
    if (view?.fraction === null) element.removeAttribute('value');
    else element.value = view?.fraction ?? 0;
  });
  return (
    <div id="progress" data-testid="hydrate-progress" hidden={view === null}>
      <span data-testid="progress-phase">{view?.phase ?? ''}</span>
      <progress data-testid="progress-bar" ref={bar} max={1} />
      <span data-testid="progress-text">{view?.text ?? ''}</span>
    </div>
  );
}

/** One conflict in the user's words. */
export function conflictText(records: readonly ConflictRecord[]): string {
  if (records.length !== 1) return `${records.length} changes made here met newer changes from another device; where both changed the same thing, the other device’s version was kept.`;
  const r = records[0] as ConflictRecord;
  if (r.keptLocal.length === 0) return 'One change made here met a newer change from another device; the other device’s version was kept.';
  const kept = r.keptLocal.join(' and ');
  return r.overwritten.length === 0
    ? `One change made here met a newer change from another device; both were kept (your ${kept}).`
    : `One change made here met a newer change from another device; your ${kept} was kept, the other device’s ${r.overwritten.join(' and ')}.`;
}

export function ConflictsNotice() {
  const { conflicts, dismiss } = useConflicts();
  return (
    <div className="notice conflict" data-testid="conflicts" hidden={conflicts.length === 0}>
      <span data-testid="conflicts-text">{conflicts.length ? conflictText(conflicts) : ''}</span>
      <button className="dismiss" data-testid="dismiss-conflicts" title="dismiss" aria-label="dismiss" onClick={() => void dismiss(conflicts.map((c) => c.id))}>✕</button>
    </div>
  );
}

export function RejectedNotice({ act }: { act: (task: () => Promise<unknown>) => void }) {
  const { client } = useDevice();
  const rejected = useStatus((st) => st?.rejected ?? null);
  return (
    <div className="notice rejected" data-testid="rejected" hidden={rejected === null}>
      <span><strong>The server did not accept your last changes.</strong> <span data-testid="rejected-message">{rejected ? rejectionText(rejected.code, rejected.message) : ''}</span></span>
      <button data-testid="discard-rejected" onClick={() => act(async () => void (await client?.discardRejected()))}>Discard them</button>
    </div>
  );
}

/** Why a re-queue cannot work, when the client said (a list deleted meanwhile). */
interface Blocked {
  readonly message: string;
  /** The set-aside to-do can go to another list. */
  readonly canMove: boolean;
}

function QuarantinedItem({ row, lists, requeue, drop }: { row: QuarantinedRow; lists: readonly ListRow[]; requeue: (fix?: Record<string, string>) => Promise<void>; drop: () => Promise<void> }) {
  const [blocked, setBlocked] = useState<Blocked | null>(null);
  const [moveTo, setMoveTo] = useState('');
  const what = row.row?.['title'] ?? row.key;
  const retry = async (fix?: Record<string, string>) => {
    try {
      await requeue(fix);
    } catch (error) {
      if (error instanceof WorkerCallError && error.code === 'quarantine_parent_missing') {
        setBlocked({ message: 'Its list was deleted on another device, so it cannot go back there.', canMove: row.table === 'todos' });
      } else {
        setBlocked({ message: errorText(error instanceof WorkerCallError ? `${error.code}: ${error.message}` : String(error)), canMove: false });
      }
    }
  };
  const target = moveTo || lists[0]?.id || '';
  return (
    <li data-testid="quarantined" data-key={row.key}>
      <span className="what">
        {`${row.table === 'todos' ? 'to-do' : 'list'} “${String(what)}” was set aside: ${row.dependsOn === null ? quarantineText(row.code, row.message) : 'it depends on another change the server refused.'}`}
        {blocked ? <span className="why" data-testid="quarantine-reason"> {blocked.message}</span> : null}
      </span>
      <span className="actions">
        {blocked?.canMove && lists.length > 0 ? (
          <>
            <select data-testid="quarantine-move-to" aria-label="move it to" value={target} onChange={(event) => setMoveTo(event.target.value)}>
              {lists.map((l) => <option key={l.id} value={l.id}>{l.title}</option>)}
            </select>
            <button data-testid="quarantine-move" onClick={() => void retry({ list_id: target })}>Move there</button>
          </>
        ) : blocked ? null : (
          <button data-testid="quarantine-retry" title="push it again" onClick={() => void retry()}>Retry</button>
        )}
        <button data-testid="quarantine-drop" title="forget this change" onClick={() => void drop()}>Drop</button>
      </span>
    </li>
  );
}

export function QuarantineNotice() {
  const { rows, requeue, drop } = useQuarantine();
  const lists = useQuery<ListRow>(LISTS_SQL).rows;
  return (
    <div className="notice rejected" data-testid="quarantine" hidden={rows.length === 0}>
      <strong>The server refused some changes; they were set aside and everything else synced.</strong>
      <ul data-testid="quarantine-list">
        {rows.map((row) => (
          <QuarantinedItem key={row.id} row={row} lists={lists} requeue={(fix) => requeue(row.id, fix)} drop={() => drop(row.id)} />
        ))}
      </ul>
    </div>
  );
}

export function SyncErrorNotice({ actionError }: { actionError: string | null }) {
  const lastError = useStatus((st) => (st?.rejected ? null : (st?.lastError ?? null)), (a, b) => a?.code === b?.code && a?.message === b?.message);
  const text = lastError ? errorText(`${lastError.code}: ${lastError.message}`) : actionError ? errorText(actionError) : '';
  return (
    <div className="notice error" data-testid="sync-error" hidden={!text}>
      <span data-testid="sync-error-text">{text}</span>
    </div>
  );
}
