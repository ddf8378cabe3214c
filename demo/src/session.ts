/**
 * Who is signed in: the user name and a development token from the local server's
 * `POST /dev/token`, kept in localStorage so the app starts signed in, and offline, after a reload.
 * A real app would get its token from its identity provider instead.
 */

export interface Session {
  readonly userId: string;
  readonly token: string;
}

const KEY = 'lockstep-demo-session';

/** The user name rule of the local server's /dev/token. */
export const USER_ID_PATTERN = /^[A-Za-z0-9._@-]{1,64}$/;

export function loadSession(): Session | null {
  try {
    const value = JSON.parse(localStorage.getItem(KEY) ?? 'null') as Partial<Session> | null;
    if (typeof value?.userId === 'string' && typeof value.token === 'string') return { userId: value.userId, token: value.token };
  } catch {
    // A corrupt entry is the same as none: the user signs in again.
  }
  return null;
}

export function saveSession(session: Session): void {
  localStorage.setItem(KEY, JSON.stringify(session));
}

export function clearSession(): void {
  localStorage.removeItem(KEY);
}

/** Asks the local server for a token naming `userId`; needs the network. */
export async function mintDevToken(userId: string): Promise<Session> {
  if (!USER_ID_PATTERN.test(userId)) throw new Error('a user name is 1-64 characters of letters, digits and . _ @ -');
  let response: Response;
  try {
    response = await fetch('/dev/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user_id: userId }) });
  } catch {
    throw new Error('signing in needs the server: you are offline');
  }
  const body = (await response.json().catch(() => ({}))) as { token?: unknown; message?: unknown };
  if (!response.ok || typeof body.token !== 'string') {
    throw new Error(typeof body.message === 'string' ? body.message : `the server refused the sign-in (HTTP ${response.status})`);
  }
  return { userId, token: body.token };
}
