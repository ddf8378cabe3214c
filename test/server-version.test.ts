/**
 * Bootstrap refuses a PostgreSQL outside 16.x and 17.x before it touches anything. The test
 * servers are 16 and 17, so the refusal is checked on the rule itself, at both edges.
 */
import { describe, expect, it } from 'vitest';
import { assertSupportedServerVersion } from '../core/bootstrap/bootstrap.js';
import { UnsupportedServerVersionError } from '../core/errors.js';

describe('supported PostgreSQL versions', () => {
  it('accepts 16.0 through 17.x', () => {
    for (const v of [160000, 160004, 170000, 170006, 179999]) expect(() => assertSupportedServerVersion(v), String(v)).not.toThrow();
  });

  it('refuses 15.x and 18.0 with unsupported_server_version naming the version', () => {
    for (const v of [150012, 159999, 180000, 0]) {
      const error = (() => {
        try {
          assertSupportedServerVersion(v);
        } catch (e) {
          return e;
        }
        return null;
      })();
      expect(error, String(v)).toBeInstanceOf(UnsupportedServerVersionError);
      expect((error as UnsupportedServerVersionError).code).toBe('unsupported_server_version');
      expect((error as Error).message).toContain(String(v));
    }
  });
});
