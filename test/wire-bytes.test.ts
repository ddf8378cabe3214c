/**
 * Bytes as Lambda counts them (protocol §6): the measure the edge and the client use must equal
 * the UTF-8 length of JSON.stringify exactly, for every string (escapes, control characters,
 * astral characters, lone surrogates), without building the escaped copy.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonStringBytes, serializedBytesWithBody, serializedOver } from '../core/protocol/wire-bytes.js';

/** Fixed, so every run checks the same cases (a failure replays). */
const SEED = 20261126;

const exact = (value: unknown): number => Buffer.byteLength(JSON.stringify(value), 'utf8');

describe('wire bytes', () => {
  it('jsonStringBytes equals the bytes of JSON.stringify for any string', () => {
    const unit = fc.oneof(
      fc.constantFrom('"', '\\', '\n', '\t', '\b', '\f', '\r', '\u0000', '\u001f', '\u007f', 'é', '€', '😀', '\ud800', '\udfff', 'a'),
      fc.string({ unit: 'binary' }),
    );
    fc.assert(fc.property(fc.array(unit, { maxLength: 40 }).map((parts) => parts.join('')), (text) => jsonStringBytes(text) === exact(text)), { seed: SEED, numRuns: 400 });
  });

  it('a text without control characters or surrogates (measured from its UTF-8 bytes) equals JSON.stringify too', () => {
    const unit = fc.oneof(
      fc.constantFrom('"', '\\', '\u007f', 'é', '€', '\uffff', 'a', ' '),
      // eslint-disable-next-line no-control-regex -- the irregular characters are left out here
      fc.string({ unit: 'binary' }).map((text) => text.replace(/[\u0000-\u001f\ud800-\udfff]/g, '')),
    );
    fc.assert(fc.property(fc.array(unit, { maxLength: 40 }).map((parts) => parts.join('')), (text) => jsonStringBytes(text) === exact(text)), { seed: SEED, numRuns: 400 });
  });

  it('serializedOver answers exactly, whether the cheap bound or the measure decides', () => {
    // Bodies of 40-400 KB against limits from half to three times their serialized size: the
    // bound decides the small ones (no control character or surrogate), the measure the rest.
    const part = fc.array(fc.constantFrom('"', '\\', 'é', '€', '😀', '\n', 'abc', '{"k":1}'), { minLength: 1, maxLength: 40 }).map((parts) => parts.join(''));
    fc.assert(fc.property(part, fc.integer({ min: 40_000, max: 400_000 }), fc.double({ min: 0.5, max: 3, noNaN: true }), (text, size, scale) => {
      const event = { version: '2.0', body: text.repeat(Math.ceil(size / text.length)) };
      const limit = Math.floor(exact(event) * scale);
      return serializedOver(event, limit) === exact(event) > limit;
    }), { seed: SEED, numRuns: 200 });
  });

  it('an event with a body measures like the whole event serialized', () => {
    const event = { version: '2.0', routeKey: 'POST /x', headers: { a: 'b"c' }, body: JSON.stringify({ rows: [{ title: 'say "hi" \\ ' }] }) };
    expect(serializedBytesWithBody(event)).toBe(exact(event));
    const empty: { statusCode: number; body?: string } = { statusCode: 204 };
    expect(serializedBytesWithBody(empty)).toBe(exact(empty));
  });

  it('a quote-heavy JSON body almost doubles inside the event: the raw body fits the limit, the event does not', () => {
    const body = JSON.stringify({ rows: Array.from({ length: 200 }, () => ({ title: '"'.repeat(100) })) });
    const event = { body };
    const limit = Math.floor(Buffer.byteLength(body) * 1.5);
    expect(Buffer.byteLength(body)).toBeLessThan(limit);
    expect(serializedOver(event, limit)).toBe(true);
    expect(serializedOver(event, serializedBytesWithBody(event))).toBe(false);
    expect(serializedOver(event, serializedBytesWithBody(event) - 1)).toBe(true);
  });
});
