/**
 * Text between JavaScript strings and SQLite's UTF-8, exactly (issue 23 item 3). A JavaScript
 * string is a sequence of UTF-16 code units and may hold what UTF-8 cannot: a lone surrogate
 * (`'\ud83d'` without its pair). TextEncoder replaces one with U+FFFD and Emscripten's encoder
 * pairs it with whatever follows; both change the text silently. Here a lone surrogate is written
 * as its three-byte generalized UTF-8 form (WTF-8: U+D83D is ED A0 BD), the form SQLite's own JSON
 * functions give a `\ud83d` escape, and read back as the same code unit, so every string SQLite is
 * handed comes back as it was. U+0000 is an ordinary character here: the adapter passes lengths,
 * never NUL-terminated strings. Whether such text may be synced is not this layer's business: the
 * capture triggers refuse it in synced columns (client-web/codec.ts), naming table, key and column.
 */

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when `text` has no lone surrogate (String.prototype.isWellFormed where the runtime has it). */
export function isWellFormed(text: string): boolean {
  const native = (text as unknown as { isWellFormed?: () => boolean }).isWellFormed;
  return native ? native.call(text) : !LONE_SURROGATE.test(text);
}

/** Most bytes `text` can take in UTF-8 or WTF-8: three per UTF-16 code unit. */
export function maxTextBytes(text: string): number {
  return text.length * 3;
}

/**
 * Writes `text` into `target` (at least maxTextBytes long) and answers the bytes written: plain
 * UTF-8 (TextEncoder, native speed) for well-formed text, WTF-8 otherwise.
 */
export function writeText(text: string, target: Uint8Array): number {
  if (isWellFormed(text)) return utf8.encodeInto(text, target).written;
  let at = 0;
  for (let i = 0; i < text.length; i++) {
    let cp = text.charCodeAt(i);
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        i++;
      }
    }
    if (cp < 0x80) target[at++] = cp;
    else if (cp < 0x800) {
      target[at++] = 0xc0 | (cp >> 6);
      target[at++] = 0x80 | (cp & 0x3f);
    } else if (cp < 0x10000) {
      // A lone surrogate lands here too: its code point in three bytes (WTF-8).
      target[at++] = 0xe0 | (cp >> 12);
      target[at++] = 0x80 | ((cp >> 6) & 0x3f);
      target[at++] = 0x80 | (cp & 0x3f);
    } else {
      target[at++] = 0xf0 | (cp >> 18);
      target[at++] = 0x80 | ((cp >> 12) & 0x3f);
      target[at++] = 0x80 | ((cp >> 6) & 0x3f);
      target[at++] = 0x80 | (cp & 0x3f);
    }
  }
  return at;
}

/** `text` as bytes (writeText into a buffer of its own). */
export function textBytes(text: string): Uint8Array {
  const buffer = new Uint8Array(maxTextBytes(text));
  return buffer.subarray(0, writeText(text, buffer));
}

/**
 * Bytes SQLite holds as TEXT → the string: UTF-8 at native speed; WTF-8 surrogates back to their
 * code units; any other invalid byte (text another program wrote) as U+FFFD, as TextDecoder would.
 */
export function readText(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return readLenient(bytes);
  }
}

function readLenient(bytes: Uint8Array): string {
  const units: number[] = [];
  let out = '';
  const flush = (): void => {
    out += String.fromCharCode(...units);
    units.length = 0;
  };
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i] as number;
    const cont = (k: number): number => {
      const c = bytes[i + k];
      return c !== undefined && (c & 0xc0) === 0x80 ? c & 0x3f : -1;
    };
    let cp = -1;
    let width = 1;
    if (b < 0x80) cp = b;
    else if (b >= 0xc2 && b < 0xe0 && cont(1) >= 0) {
      cp = ((b & 0x1f) << 6) | cont(1);
      width = 2;
    } else if (b >= 0xe0 && b < 0xf0 && cont(1) >= 0 && cont(2) >= 0) {
      cp = ((b & 0x0f) << 12) | (cont(1) << 6) | cont(2);
      width = 3;
      if (cp < 0x800) cp = -1; // overlong
    } else if (b >= 0xf0 && b < 0xf5 && cont(1) >= 0 && cont(2) >= 0 && cont(3) >= 0) {
      cp = ((b & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
      width = 4;
      if (cp < 0x10000 || cp > 0x10ffff) cp = -1;
    }
    if (cp < 0) {
      units.push(0xfffd);
      i += 1;
    } else {
      if (cp >= 0x10000) units.push(0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
      else units.push(cp);
      i += width;
    }
    if (units.length >= 8192) flush();
  }
  flush();
  return out;
}
