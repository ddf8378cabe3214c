/**
 * `<LockstepProvider>`: owns the client's life for the signed-in user. It opens the client when a
 * user is set (the app's `open`: `openClient` over its database, or `connectSyncWorker`), starts
 * the sync loop for that user, and stops and closes it when the user changes (a new client for
 * the new user) or the provider unmounts.
 *
 *   user null ──user set──▶ opening ──open() resolves──▶ open (loop started) ──user changes / unmount──▶ closed
 *                              └──open() rejects──▶ failed (error in useLockstep())
 *
 * StrictMode mounts, unmounts and mounts every effect again in development: the close after an
 * unmount waits one tick, and a mount for the same user in between takes the client back, so a
 * double mount opens one client, not two (a second worker would wait for the first one's lock).
 */
import { createContext, createElement, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import { type StartOptions } from '../api.js';
import { type BindableClient } from './bindable.js';

/** What `useLockstep()` answers. */
export interface LockstepState<C extends BindableClient = BindableClient> {
  /** The signed-in user the provider was given. */
  readonly user: string | null;
  /** The open client of that user, or null while there is none (signed out, opening, failed). */
  readonly client: C | null;
  readonly phase: 'signed_out' | 'opening' | 'open' | 'failed';
  /** Why opening failed (phase `failed`). */
  readonly error: Error | null;
  /** Settles when the user's client is open (or failed to open); null when signed out. */
  readonly opened: Promise<C> | null;
}

const SIGNED_OUT: LockstepState = { user: null, client: null, phase: 'signed_out', error: null, opened: null };
const Context = createContext<LockstepState>(SIGNED_OUT);

export interface LockstepProviderProps {
  /** The signed-in user, or null for none. Another user closes this one's client and opens theirs. */
  readonly user: string | null;
  /** Opens the client of `user` (called once per user the provider is given). */
  readonly open: (user: string) => BindableClient | Promise<BindableClient>;
  /**
   * The sync loop's options (`client.start`, with `userId` set to the user, so the loop attaches it);
   * `false` leaves the loop to the app. Read when the client opens.
   */
  readonly start?: Omit<StartOptions, 'environment' | 'userId'> | false;
  readonly children?: ReactNode;
}

interface Held {
  readonly user: string;
  readonly opened: Promise<BindableClient>;
  closeTimer: ReturnType<typeof setTimeout> | undefined;
}

async function shutDown(opened: Promise<BindableClient>): Promise<void> {
  const client = await opened.catch(() => null);
  if (!client) return;
  await client.stop().catch(() => undefined);
  await client.close().catch(() => undefined);
}

/** Provides the signed-in user's client to the hooks below it. */
export function LockstepProvider(props: LockstepProviderProps): ReactNode {
  const [state, setState] = useState<LockstepState>(SIGNED_OUT);
  const held = useRef<Held | null>(null);
  const latest = useRef(props);
  latest.current = props;
  const { user } = props;

  useEffect(() => {
    if (user === null) {
      setState(SIGNED_OUT);
      return;
    }
    let current = held.current;
    if (current && current.user === user && current.closeTimer !== undefined) {
      // StrictMode's second mount (or a remount in the same tick): the same client again.
      clearTimeout(current.closeTimer);
      current.closeTimer = undefined;
    } else {
      if (current) {
        clearTimeout(current.closeTimer);
        void shutDown(current.opened);
      }
      const opened = (async () => {
        const client = await latest.current.open(user);
        const start = latest.current.start;
        if (start !== false) await client.start({ ...(start ?? {}), userId: user });
        return client;
      })();
      // Handled below; this keeps an early failure from counting as unhandled meanwhile.
      opened.catch(() => undefined);
      current = held.current = { user, opened, closeTimer: undefined };
      setState({ user, client: null, phase: 'opening', error: null, opened });
    }
    const mine = current;
    let active = true;
    mine.opened.then(
      (client) => active && setState({ user, client, phase: 'open', error: null, opened: mine.opened }),
      (error: unknown) => active && setState({ user, client: null, phase: 'failed', error: error instanceof Error ? error : new Error(String(error)), opened: mine.opened }),
    );
    return () => {
      active = false;
      mine.closeTimer = setTimeout(() => {
        mine.closeTimer = undefined;
        if (held.current === mine) held.current = null;
        void shutDown(mine.opened);
      }, 0);
    };
  }, [user]);

  return createElement(Context.Provider, { value: state }, props.children);
}

/**
 * The provider's state: the user, the open client (or null) and how opening went. `C` names the
 * client the provider's `open` gives (e.g. `WorkerSyncClient`, for its `run` and `transaction`).
 */
export function useLockstep<C extends BindableClient = BindableClient>(): LockstepState<C> {
  return useContext(Context) as LockstepState<C>;
}
