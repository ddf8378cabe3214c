import { describe, expect, it } from 'vitest';
import { sql, ident, raw, join, quoteIdent, quoteLiteral } from '../core/db/sql.js';
import { limitsFromEnv, limitsToWire, defaultLimits } from '../core/limits.js';
import { parseTables } from '../core/config.js';
import { errorRegistry } from '../core/errors.js';

describe('sql tagged templates', () => {
  it('numbers parameters across nested fragments', () => {
    const inner = sql`b = ${2} AND c = ${'x'}`;
    const q = sql`SELECT * FROM ${ident('s', 't"x')} WHERE a = ${1} AND ${inner} ORDER BY ${raw('1')}`.toQuery();
    expect(q.text).toBe('SELECT * FROM "s"."t""x" WHERE a = $1 AND b = $2 AND c = $3 ORDER BY 1');
    expect(q.values).toEqual([1, 2, 'x']);
  });
  it('joins fragments', () => {
    const q = sql`SELECT ${join([ident('a'), ident('b')])} WHERE x IN (${join([sql`${1}`, sql`${2}`])})`.toQuery();
    expect(q.text).toBe('SELECT "a", "b" WHERE x IN ($1, $2)');
  });
  it('quotes identifiers and literals and refuses NUL', () => {
    expect(quoteIdent('a"b')).toBe('"a""b"');
    expect(quoteLiteral("it's")).toBe("'it''s'");
    expect(() => quoteLiteral('a\u0000')).toThrow();
  });
});

describe('limits and config', () => {
  it('reports every limit on the wire with the defaults of docs/protocol.md §8', () => {
    const wire = limitsToWire(defaultLimits);
    expect(wire).toMatchObject({
      default_rows_per_push_chunk: 1000, max_rows_per_push_chunk: 5000, max_rows_per_bundle: 100000,
      max_bytes_per_bundle: 64 * 1024 * 1024, max_request_bytes: 4 * 1024 * 1024, max_response_bytes: 4 * 1024 * 1024,
      default_bundles_per_pull: 100, max_bundles_per_pull: 1000, default_rows_per_page: 1000, max_rows_per_page: 5000,
      push_session_ttl_seconds: 900, snapshot_session_ttl_seconds: 900, initialization_lease_ttl_seconds: 900,
      retained_bundles_per_user: 10000, watch_max_wait_seconds: 25,
    });
  });
  it('overrides limits from the environment and rejects nonsense', () => {
    expect(limitsFromEnv({ SYNC_LIMIT_MAX_ROWS_PER_PUSH_CHUNK: '7' }).maxRowsPerPushChunk).toBe(7);
    expect(() => limitsFromEnv({ SYNC_LIMIT_MAX_ROWS_PER_PUSH_CHUNK: '-1' })).toThrow(/positive integer/);
  });
  it('parses SYNC_TABLES strictly', () => {
    expect(parseTables('app.a:id, app.b:code')).toEqual([
      { schema: 'app', table: 'a', keyColumn: 'id' },
      { schema: 'app', table: 'b', keyColumn: 'code' },
    ]);
    expect(() => parseTables('app.a')).toThrow(/schema.table:key_column/);
    expect(() => parseTables('sync.a:id')).toThrow(/reserved/);
    expect(() => parseTables('app.a:id,app.a:id')).toThrow(/twice/);
    expect(() => parseTables('app.a;drop:id')).toThrow();
  });
  it('maps every error code to a 4xx/5xx status', () => {
    for (const [code, entry] of Object.entries(errorRegistry)) {
      expect(entry.status, code).toBeGreaterThanOrEqual(400);
      expect(entry.status, code).toBeLessThan(600);
    }
    expect(errorRegistry.commit_outcome_unknown.status).toBe(503);
    expect(errorRegistry.push_rejected.status).toBe(422);
  });
});
