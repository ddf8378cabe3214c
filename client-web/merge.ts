/**
 * The default conflict policy: a three-way merge of one row, column by column,
 * against the base — the server row this device's change started from. A column changed on one
 * side only takes that side; a column changed on both takes the server's (unless the app's
 * resolver says otherwise); a column nobody changed is the same everywhere. So a device's edit of
 * `priority` survives another device's retitling of the same row, and a server write that only
 * filled a column never discards a pending edit of another.
 *
 * Pure: wire payloads in, a merged wire payload and what came from where out. Values compare by
 * their canonical JSON (RFC 8785), the form the request hash uses.
 */
import canonicalize from 'canonicalize';

type Payload = Readonly<Record<string, unknown>>;

/** What the merge decided, column by column. */
export interface ColumnMerge {
  /** The merged row: every column of `columns`, the key included. */
  readonly payload: Record<string, unknown>;
  /** Columns the device changed and the server did not: the device's values were kept. */
  readonly fromLocal: readonly string[];
  /** Columns the server changed and the device did not: the server's values were taken. */
  readonly fromServer: readonly string[];
  /** Columns both changed, to different values: the server's were taken (the device's edit is overwritten). */
  readonly bothChanged: readonly string[];
}

export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  return canonicalize(a) === canonicalize(b);
}

/**
 * Merges the device's row (`local`, its frozen wire payload) with the server's (`server`) against
 * `base`, over `columns` (the local table's). A column the local payload omits (one the app added
 * locally that the server still has to fill) takes the server's value; without a base (an INSERT
 * of a key the device never saw from the server) every difference counts as changed on both sides.
 */
export function mergeColumns(columns: readonly string[], key: string, base: Payload | null, local: Payload, server: Payload): ColumnMerge {
  const payload: Record<string, unknown> = {};
  const fromLocal: string[] = [];
  const fromServer: string[] = [];
  const bothChanged: string[] = [];
  for (const c of columns) {
    const s = server[c] ?? null;
    if (c === key || !(c in local)) {
      payload[c] = c === key ? local[c] : s;
      continue;
    }
    const l = local[c];
    if (sameValue(l, s)) {
      payload[c] = s;
      continue;
    }
    const known = base !== null && c in base;
    const localChanged = known && !sameValue(l, base[c]);
    const serverChanged = !known || !sameValue(s, base[c]);
    if (localChanged && !serverChanged) {
      payload[c] = l;
      fromLocal.push(c);
    } else {
      payload[c] = s;
      if (localChanged || !known) bothChanged.push(c);
      else fromServer.push(c);
    }
  }
  return { payload, fromLocal, fromServer, bothChanged };
}
