/**
 * The edge's body text and size (functions/edge/request.ts): read without a round trip through a
 * buffer, they must still be what decoding the body's UTF-8 bytes gives (a lone surrogate becomes
 * U+FFFD) and those bytes' count, for a plain body and a base64 one alike, and a body over
 * max_request_bytes is refused either way.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readRequest, type HttpApiEvent } from '../functions/edge/request.js';

/** Fixed, so every run checks the same cases (a failure replays). */
const SEED = 20261128;

const event = (body: string, isBase64Encoded = false): HttpApiEvent =>
  ({
    version: '2.0', routeKey: '$default', rawPath: '/sync/push-sessions', rawQueryString: '', headers: {}, body, isBase64Encoded,
    requestContext: { http: { method: 'POST', path: '/sync/push-sessions', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 't' } },
  }) as unknown as HttpApiEvent;

describe('edge request body', () => {
  it('is the text and byte count of the body as UTF-8, for any string, plain or base64', () => {
    const unit = fc.oneof(
      fc.constantFrom('"', '\\', '\n', 'é', '€', '😀', '\ud800', '\udfff', '\udc00\ud800', 'a'),
      fc.string({ unit: 'binary' }),
    );
    fc.assert(fc.property(fc.array(unit, { minLength: 1, maxLength: 40 }).map((parts) => parts.join('')).filter((text) => text !== ''), (text) => {
      const bytes = Buffer.from(text, 'utf8');
      const plain = readRequest(event(text), 1 << 20);
      const base64 = readRequest(event(bytes.toString('base64'), true), 1 << 20);
      return plain.bodyText === bytes.toString('utf8') && plain.bodyBytes === bytes.byteLength &&
        base64.bodyText === plain.bodyText && base64.bodyBytes === plain.bodyBytes;
    }), { seed: SEED, numRuns: 400 });
  });

  it('replaces a lone surrogate and counts its three bytes', () => {
    const read = readRequest(event('{"t":"a\ud800b"}'), 1 << 20);
    expect(read.bodyText).toBe('{"t":"a\ufffdb"}');
    expect(read.bodyBytes).toBe(13);
  });

  it('refuses a body over max_request_bytes, plain or base64', () => {
    const text = 'é'.repeat(600);
    for (const e of [event(text), event(Buffer.from(text).toString('base64'), true)]) {
      expect(() => readRequest(e, 1000)).toThrow(expect.objectContaining({ code: 'payload_too_large' }));
      expect(readRequest(e, 1 << 20).bodyBytes).toBe(1200);
    }
  });
});
