/**
 * Bytes as AWS Lambda counts them; the server edge and the client size requests alike. Lambda
 * bounds the serialized invoke event and the serialized function result (6 MB each), not the
 * HTTP body: API Gateway puts the body into the event as a
 * JSON string (so every `"` and `\` of a JSON body doubles, and a base64-encoded body grows by a
 * third), and the result's body is again a JSON string inside the result object. A 4 MiB body
 * of quote-heavy text is a 7 MB event or result, which Lambda refuses (API Gateway then answers
 * its own 413, or a 502 for the result).
 *
 * `max_request_bytes` and `max_response_bytes` bound these serialized sizes (protocol §6).
 */
const encoder = new TextEncoder();

/** UTF-8 bytes of `value` serialized as JSON: what Lambda counts for an event or a result. */
export function serializedBytes(value: unknown): number {
  return utf8Bytes(JSON.stringify(value) ?? '');
}

/** UTF-8 bytes of a string, without copying it into a buffer. */
export function utf8Bytes(text: string): number {
  // Buffer.byteLength is exact and does not allocate; TextEncoder is the fallback outside Node.
  return typeof Buffer !== 'undefined' ? Buffer.byteLength(text, 'utf8') : encoder.encode(text).length;
}

/**
 * Characters whose escaped size is not one more byte per `"` or `\`: control characters (short or
 * `\uXXXX` escapes) and surrogates (a lone one becomes a six-byte escape). A text without any
 * is measured from its UTF-8 bytes; one with some is walked character by character.
 */
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const IRREGULAR = /[\u0000-\u001f\ud800-\udfff]/;

/** How many times the one-character `c` occurs in `text`. */
function occurrences(text: string, c: string): number {
  let n = 0;
  for (let i = text.indexOf(c); i !== -1; i = text.indexOf(c, i + 1)) n++;
  return n;
}

/**
 * Exactly `utf8Bytes(JSON.stringify(text))`, without building the escaped copy (which costs a
 * multi-megabyte allocation per request): `"` and `\` and the short control escapes add one byte,
 * other control characters and lone surrogates become six-byte `\uXXXX` escapes.
 */
export function jsonStringBytes(text: string): number {
  if (typeof Buffer !== 'undefined' && !IRREGULAR.test(text)) {
    // The common case (page texts, JSON bodies): the UTF-8 bytes plus one per quote or backslash.
    // The engine's own search finds those (a multi-megabyte body: ~6 ms against ~13 for a copy
    // into a buffer walked byte by byte).
    return Buffer.byteLength(text, 'utf8') + occurrences(text, '"') + occurrences(text, '\\') + 2;
  }
  let bytes = 2;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += c === 34 || c === 92 || c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : c < 32 ? 6 : 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4;
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) bytes += 6;
    else bytes += 3;
  }
  return bytes;
}

/**
 * At least `jsonStringBytes(text)`, cheaply: a text without irregular characters escapes to at
 * most twice its UTF-8 bytes (a quote or backslash doubles, nothing else grows); any other text
 * to at most six bytes per UTF-16 unit.
 */
export function jsonStringBytesBound(text: string): number {
  return IRREGULAR.test(text) ? text.length * 6 + 2 : utf8Bytes(text) * 2 + 2;
}

/**
 * Serialized bytes of an object with one large string field (an event's or a result's `body`):
 * the rest serialized as usual, the field measured by `jsonStringBytes`.
 */
export function serializedBytesWithBody<T extends { body?: string | undefined }>(value: T): number {
  if (value.body === undefined) return serializedBytes(value);
  // An empty body serializes as `""` (2 bytes); the real one replaces it.
  return serializedBytes({ ...value, body: '' }) - 2 + jsonStringBytes(value.body);
}

/** Generous bound of what an event or a result holds besides its body (headers, context, claims). */
const ENVELOPE_BYTES_MAX = 64 * 1024;

/**
 * Whether `value` (an event or a result) serializes to more than `limit` bytes. Measures only when
 * it could: escaping at most sextuples a character of the body, and at most doubles the UTF-8
 * bytes of a body without control characters or surrogates (JSON text holds no raw control
 * character, so only a body with text beyond the Basic Multilingual Plane is measured every time).
 */
export function serializedOver<T extends { body?: string | undefined }>(value: T, limit: number): boolean {
  if ((value.body?.length ?? 0) * 6 + ENVELOPE_BYTES_MAX <= limit) return false;
  if (value.body !== undefined && jsonStringBytesBound(value.body) + ENVELOPE_BYTES_MAX <= limit) return false;
  return serializedBytesWithBody(value) > limit;
}
