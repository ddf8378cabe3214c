/**
 * What the demo tells its user, in their words: the client and the server speak in codes
 * (`remote_authoritative`, `push_rejected`, a PostgreSQL constraint name), which are right for
 * logs and wrong on screen. Each function turns one of them into a sentence; the raw text goes to
 * the console, where a developer looks.
 */

/** Splits "code: message" as the sync state and WorkerCallError carry it. */
export function splitCode(text: string): { code: string; message: string } {
  const at = text.indexOf(': ');
  return at > 0 && /^[a-z_]+$/.test(text.slice(0, at)) ? { code: text.slice(0, at), message: text.slice(at + 2) } : { code: '', message: text };
}

const ATTACH: Record<string, (rows: number) => string> = {
  initialize_local: () => 'This device’s changes started your account on the server.',
  initialize_empty: () => 'New account: nothing to download yet.',
  remote_authoritative: (rows) => (rows ? `Downloaded ${rows.toLocaleString('en')} rows from the server.` : 'Downloaded your account from the server.'),
  already_attached: () => '',
};

/** How the first connect of this device went, from the sync loop's note ("remote authoritative: 12 rows hydrated"). */
export function attachText(note: string | null): string {
  if (!note) return '';
  const match = /^([a-z ]+?)(?:: (\d+) rows hydrated)?$/.exec(note);
  const say = match ? ATTACH[(match[1] ?? '').replaceAll(' ', '_')] : undefined;
  if (!say) return note.startsWith('the server is initializing') ? 'Another device is setting up your account; waiting for it…' : '';
  return say(Number(match?.[2] ?? 0));
}

const NOUN: Record<string, string> = { todos: 'to-do', lists: 'list' };
const noun = (table: string | undefined) => NOUN[table ?? ''] ?? 'item';

/**
 * Why the server refused a change, from a `push_rejected` message (which carries PostgreSQL's own
 * text, constraint names and all): "a to-do you added … deleted meanwhile."
 */
export function reasonText(code: string, message: string): string {
  const table = /(?:on table|of relation|for relation) "([^"]+)"/.exec(message)?.[1];
  if (/violates foreign key constraint/.test(message)) {
    return /^update or delete/.test(message.replace(/^.*?: /, ''))
      ? `a ${noun(table)} you deleted is still used on another device.`
      : `a ${noun(table)} you added or changed belongs to something another device deleted meanwhile.`;
  }
  if (/violates unique constraint|duplicate key/.test(message)) return `a ${noun(table)} you added already exists.`;
  if (/violates not-null constraint/.test(message)) return `a ${noun(table)} is missing a required value.`;
  if (/violates check constraint/.test(message)) return `a ${noun(table)} breaks one of the server’s rules.`;
  if (code === 'payload_too_large') return 'they are too large to send in one go.';
  return 'the server could not apply them.';
}

/** Why the server refused the last changes, and what to do about it. */
export function rejectionText(code: string, message: string): string {
  return `They were not saved because ${reasonText(code, message)} Discard them to get the server’s version back.`;
}

/** Why one row was set aside (the quarantine): the reason without the row's own noun. */
export function quarantineText(code: string, message: string): string {
  return reasonText(code, message).replace(/^a (to-do|list|item) you (added or changed|deleted|added) /, 'it ').replace(/^a (to-do|list|item) /, 'it ');
}

const ERRORS: Record<string, string> = {
  network_error: 'Can’t reach the server. Your changes are saved on this device and will sync when it is back.',
  service_unavailable: 'The server is busy or restarting; trying again shortly.',
  rate_limited: 'The server asked to slow down; trying again shortly.',
  authentication_failed: 'Your sign-in expired; renewing it.',
  source_recovery_required: 'This device is catching up with the server.',
  open_failed: 'The first start on this device needs the server; it will try again when you are online.',
  local_schema_mismatch: 'This version of the app does not match the server; reload the page.',
  worker_failed: 'The local database stopped; reload the page.',
};

/** A sync or action failure ("code: message") as a sentence; unknown ones stay general. */
export function errorText(text: string): string {
  const { code } = splitCode(text);
  return ERRORS[code] ?? 'Something went wrong while syncing; trying again.';
}
