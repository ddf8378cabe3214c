/**
 * The coding a large answer is compressed with (functions/edge/http.ts `responseCoding`): the
 * accepted one of highest weight, brotli first at equal weight, none when every coding the edge
 * has is refused. The HTTP side (bodies decoding to the same text) is test/read-budgets.pg.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { responseCoding } from '../functions/edge/http.js';

describe('responseCoding', () => {
  const cases: Array<[string | undefined, 'br' | 'gzip' | null]> = [
    [undefined, null],
    ['', null],
    ['identity', null],
    ['deflate', null],
    ['gzip, deflate', 'gzip'], // Node's fetch
    ['gzip, deflate, br, zstd', 'br'], // chromium, also on http://127.0.0.1
    ['br', 'br'],
    ['BR;Q=1', 'br'],
    ['gzip, br;q=0.5', 'gzip'],
    ['gzip;q=0.4, br;q=0.5', 'br'],
    ['br;q=0, gzip', 'gzip'],
    ['gzip;q=0', null],
    ['gzip;q=0, br;q=0', null],
    ['*', 'br'],
    ['gzip;q=0.2, *;q=0.1', 'gzip'],
    ['*;q=0', null],
    ['br;q=0, *', 'gzip'],
    ['br;q=banana, gzip', 'gzip'],
  ];
  it.each(cases)('Accept-Encoding %j → %j', (header, coding) => {
    expect(responseCoding(header)).toBe(coding);
  });
});
