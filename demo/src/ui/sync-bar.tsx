/**
 * The status bar: the network badge (online, syncing, busy, unreachable, offline), which tab syncs,
 * what is pending, the last synced bundle, the rows on this device, when it last synced, how the
 * first connect went, whether the app shell works offline, and "Sync now".
 */
import { useEffect, useRef } from 'react';
import type { SyncStatus } from '../../../client-web/api.js';
import { usePending, useQuery, useStatus } from '../../../client-web/react/index.js';
import { watchServerReturn } from '../reconnect.js';
import { COUNTS_SQL, type CountsRow } from '../store.js';
import { attachText } from '../texts.js';
import { useDevice, useOnline, useRole } from './device.js';

/** What the badge says, from the loop's status and the browser's network state. */
export function netState(status: SyncStatus | null, online: boolean): { state: string; text: string } {
  if (!status) return { state: 'none', text: 'connecting…' };
  const unreachable = status.lastError?.code === 'network_error';
  // A server that answered "busy" (503, 429) is reachable: the loop waits as told and tries again.
  const busy = status.phase === 'backoff' && !unreachable;
  const syncing = status.phase === 'syncing';
  if (!online) return { state: 'offline', text: 'offline' };
  if (unreachable) return { state: 'offline', text: 'server unreachable' };
  if (busy) return { state: 'busy', text: 'server busy, retrying' };
  return syncing ? { state: 'syncing', text: 'syncing…' } : { state: 'online', text: 'online' };
}

/** How the first connect of this device went, as the client reports it ("remote authoritative: 12 rows hydrated"). */
function attachNote(attach: SyncStatus['attach']): string {
  if (attach?.status === 'attached') return `${attach.resolution.replaceAll('_', ' ')}${attach.hydratedRows ? `: ${attach.hydratedRows} rows hydrated` : ''}`;
  if (attach?.status !== 'retry_later') return '';
  return attach.reason === 'server_schema_behind' ? 'waiting for the server to publish this app version\'s tables' : 'the server is initializing this user';
}

export function SyncBar({ shell }: { shell: { state: string; text: string } }) {
  const { client } = useDevice();
  const online = useOnline();
  const role = useRole(client);
  const net = useStatus((st) => netState(st, online), (a, b) => a.state === b.state && a.text === b.text);
  const checkpoint = useStatus((st) => st?.checkpoint ?? 0);
  const lastSyncedAt = useStatus((st) => st?.lastSyncedAt ?? null);
  const attached = useStatus((st) => st?.attachedUserId ?? null);
  const attach = useStatus((st) => st?.attach ?? null);
  const { pendingRows } = usePending();
  const counts = useQuery<CountsRow>(COUNTS_SQL).rows[0];
  const rows = Number(counts?.lists ?? 0) + Number(counts?.todos ?? 0);

  // While the server cannot be reached the loop backs off; the probe resumes it the moment it is back.
  const probe = useRef<ReturnType<typeof watchServerReturn> | null>(null);
  useEffect(() => {
    if (!client) return;
    const watch = watchServerReturn(() => void client.requestSync().catch(() => undefined));
    probe.current = watch;
    return () => watch.stop();
  }, [client]);
  useEffect(() => {
    if (online && net.text === 'server unreachable') probe.current?.probe();
  }, [online, net.text]);

  const lastSync = lastSyncedAt
    ? `last synced ${new Date(lastSyncedAt).toLocaleTimeString()}`
    : role === 'follower' ? 'synced by another tab' : attached ? 'not synced this session' : 'not attached yet';
  let note = attachText(attachNote(attach));
  // "Nothing to download yet" is true only until something arrives.
  if (attach?.status === 'attached' && attach.resolution === 'initialize_empty' && rows > 0) note = '';

  return (
    <div id="sync-bar" data-testid="sync-bar">
      <span className="badge" id="net-state" data-testid="net-state" data-state={net.state}>{net.text}</span>
      <span className="badge" data-testid="tab-role" data-state={role}>
        {role === 'owner' ? 'this tab syncs' : role === 'follower' ? 'another tab syncs' : 'starting'}
      </span>
      <span>pending rows: <strong data-testid="pending-rows">{pendingRows}</strong></span>
      <span>last synced bundle: <strong data-testid="checkpoint">{checkpoint}</strong></span>
      <span>rows here: <strong data-testid="count-rows">{rows}</strong></span>
      <span data-testid="last-sync" className="muted">{lastSync}</span>
      <span data-testid="attach-note" className="muted">{note}</span>
      <span className="badge" data-testid="shell-state" data-state={shell.state}>{shell.text}</span>
      <button data-testid="sync-now" onClick={() => void client?.requestSync().catch(() => undefined)}>Sync now</button>
    </div>
  );
}
