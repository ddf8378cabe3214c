/**
 * The demo's device: the sync worker of the signed-in user (connectSyncWorker), opened by the
 * LockstepProvider, and the hooks for what only the worker proxy tells (this tab's role, hydration
 * progress) and for the network state the badge shows.
 */
import { useMemo, useSyncExternalStore } from 'react';
import { connectSyncWorker, type WorkerSyncClient } from '../../../client-web/browser/worker-client.js';
import type { WorkerRole } from '../../../client-web/browser/protocol.js';
import type { Progress } from '../../../client-web/api.js';
import { useLockstep, type BindableClient } from '../../../client-web/react/index.js';
import { dbNameFor } from '../local-schema.js';
import { mintDevToken, saveSession } from '../session.js';
import { createStore, type Store } from '../store.js';

const newWorker = () => new Worker('/worker.js', { type: 'module', name: 'lockstep-sync' });

/** A sync worker started before its user is known (startWorker), for the next openDevice. */
let started: Worker | undefined;

/**
 * Starts the sync worker while the sign-in is still on its way: loading its script takes as long
 * as minting the token and rendering the signed-in page (~50-100 ms each in chromium here), so the
 * two overlap instead of following each other. The worker only loads until openDevice tells it
 * which database to open; a sign-in that fails leaves it for the next attempt.
 */
export function startWorker(): void {
  if (started) return;
  const worker = newWorker();
  // A script that failed to load (offline) reports it once, before anyone listens: such a worker
  // is dropped, never handed to openDevice, whose client would wait for it forever.
  worker.addEventListener('error', () => {
    if (started !== worker) return;
    started = undefined;
    worker.terminate();
  }, { once: true });
  started = worker;
}

/**
 * Opens the user's sync worker (the provider calls it once per signed-in user). A token the
 * server refuses (expired while the tab slept) is replaced by a new one, kept for the next start.
 */
export function openDevice(userId: string, token: string): WorkerSyncClient {
  const worker = started ?? newWorker();
  started = undefined;
  const refreshToken = async () => {
    const session = await mintDevToken(userId);
    saveSession(session);
    return session.token;
  };
  return connectSyncWorker(worker, { dbName: dbNameFor(userId), baseUrl: location.origin, token }, { refreshToken });
}

const stores = new WeakMap<BindableClient, Store>();

/** The open worker client and the app's store over it, or nulls while none is open. */
export function useDevice(): { client: WorkerSyncClient | null; store: Store | null } {
  const { client } = useLockstep();
  return useMemo(() => {
    if (!client) return { client: null, store: null };
    let store = stores.get(client);
    if (!store) stores.set(client, (store = createStore(client as WorkerSyncClient)));
    return { client: client as WorkerSyncClient, store };
  }, [client]);
}

const none = () => () => undefined;

/** Whether this tab holds the database (`owner`) or follows another tab (`follower`). */
export function useRole(client: WorkerSyncClient | null): WorkerRole {
  return useSyncExternalStore(
    useMemo(() => (client ? (onChange: () => void) => client.on('role', onChange) : none), [client]),
    () => client?.role ?? 'starting',
  );
}

/** The last progress event of a long pull or a hydration (null before one). */
export function useProgress(client: WorkerSyncClient | null): Progress | null {
  const store = useMemo(() => {
    let last: Progress | null = null;
    return {
      subscribe: (onChange: () => void) => (client ? client.on('progress', (p) => ((last = p), onChange())) : () => undefined),
      snapshot: () => last,
    };
  }, [client]);
  return useSyncExternalStore(store.subscribe, store.snapshot);
}

/** `navigator.onLine`, following the window's online and offline events. */
export function useOnline(): boolean {
  return useSyncExternalStore(
    (onChange) => {
      addEventListener('online', onChange);
      addEventListener('offline', onChange);
      return () => {
        removeEventListener('online', onChange);
        removeEventListener('offline', onChange);
      };
    },
    () => navigator.onLine,
  );
}
