/**
 * The demo's root: who is signed in (a development token kept in localStorage, so the app starts
 * signed in, and offline, after a reload), the sign-in form, and the LockstepProvider that owns the
 * signed-in user's sync worker: opened at sign-in, its loop started for the user, closed at sign-out.
 */
import { useCallback, useRef, useState } from 'react';
import { type WorkerSyncClient } from '../../../client-web/browser/worker-client.js';
import { LockstepProvider, useLockstep } from '../../../client-web/react/index.js';
import { clearSession, loadSession, mintDevToken, saveSession, type Session } from '../session.js';
import { openDevice, startWorker } from './device.js';
import { Workspace } from './workspace.js';

/**
 * The sync loop of the demo: a write syncs at once (no quiet period: one click is one transaction,
 * and a sync in flight gathers what is written meanwhile), and a refused source (a cloned or
 * restored database) rotates by itself.
 */
const LOOP = { debounceMs: 0, recoverSource: true, backoff: { baseMs: 1000, maxMs: 15_000 } } as const;

function SignIn({ message, onSignedIn }: { message: string; onSignedIn: (session: Session) => void }) {
  const [user, setUser] = useState('');
  const [note, setNote] = useState(message);
  return (
    <section id="sign-in" data-testid="sign-in">
      <h2>Sign in</h2>
      <p className="muted">Any user name; the local server mints a development token for it.</p>
      <form onSubmit={(event) => {
        event.preventDefault();
        setNote('signing in…');
        startWorker();
        mintDevToken(user.trim()).then(onSignedIn, (error: unknown) => setNote(error instanceof Error ? error.message : String(error)));
      }}>
        <input data-testid="user-input" type="text" placeholder="user name" autoComplete="username" required pattern="[A-Za-z0-9._@\-]{1,64}" autoFocus
          value={user} onChange={(event) => setUser(event.target.value)} />
        <button data-testid="sign-in-button" type="submit">Sign in</button>
      </form>
      <p data-testid="sign-in-error" className="muted">{note}</p>
    </section>
  );
}

function Header({ userId, onSignOut }: { userId: string | null; onSignOut: () => void }) {
  return (
    <header>
      <h1>Lockstep to-do</h1>
      <span data-testid="user-name">{userId ?? ''}</span>
      <button data-testid="sign-out" hidden={userId === null} onClick={onSignOut}>Sign out</button>
    </header>
  );
}

/** Sign-out detaches the device, which clears its copy; refused while changes are unsynced. */
function SignedIn({ session, shell, onSignedOut, onToken }: { session: Session; shell: { state: string; text: string }; onSignedOut: () => void; onToken: (s: Session) => void }) {
  const { client } = useLockstep();
  const [blocked, setBlocked] = useState(false);
  const signOut = async () => {
    const worker = client as WorkerSyncClient | null;
    if (!worker) return;
    // One last sync, so what is pending can leave before the detach (which refuses while it is there).
    if (navigator.onLine) await worker.sync().catch(() => undefined);
    const result = await worker.detach();
    if (result.status === 'blocked') {
      setBlocked(true);
      return;
    }
    onSignedOut();
  };
  const refreshing = useRef(false);
  const onTokenExpired = useCallback(() => {
    const worker = client as WorkerSyncClient | null;
    if (!worker || refreshing.current) return;
    refreshing.current = true;
    mintDevToken(session.userId)
      .then(async (fresh) => {
        onToken(fresh);
        worker.setToken(fresh.token);
        await worker.requestSync();
      })
      .catch((error: unknown) => console.warn('lockstep demo: could not renew the sign-in', error))
      .finally(() => (refreshing.current = false));
  }, [client, session.userId, onToken]);
  return (
    <>
      <Header userId={session.userId} onSignOut={() => void signOut().catch((error: unknown) => console.warn('lockstep demo: sign-out failed', error))} />
      <Workspace userId={session.userId} shell={shell} signOutBlocked={blocked} onTokenExpired={onTokenExpired} />
    </>
  );
}

export function Root({ shell }: { shell: { state: string; text: string } }) {
  const [session, setSession] = useState<Session | null>(() => loadSession());
  const [message, setMessage] = useState('');
  const token = useRef(session?.token ?? '');
  const open = useCallback((userId: string) => openDevice(userId, token.current), []);
  const signIn = (fresh: Session) => {
    saveSession(fresh);
    token.current = fresh.token;
    setSession(fresh);
  };
  const signedOut = () => {
    clearSession();
    setMessage('Signed out; this device no longer holds your data.');
    setSession(null);
  };
  const renewed = useCallback((fresh: Session) => {
    saveSession(fresh);
    token.current = fresh.token;
  }, []);
  return (
    <LockstepProvider user={session?.userId ?? null} open={open} start={LOOP}>
      {session ? (
        <SignedIn session={session} shell={shell} onSignedOut={signedOut} onToken={renewed} />
      ) : (
        <>
          <Header userId={null} onSignOut={() => undefined} />
          <SignIn message={message} onSignedIn={signIn} />
        </>
      )}
    </LockstepProvider>
  );
}
