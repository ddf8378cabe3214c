/**
 * The limits keep the relations that let each bound fire before the next one cuts the answer off
 * (issue 17 item 3): lock < statement < client-side query < request budget < API Gateway.
 */
import { describe, expect, it } from 'vitest';
import { API_GATEWAY_TIMEOUT_MS, defaultLimits, limitProblems, limitsFromEnv } from '../core/limits.js';

describe('limits', () => {
  it('the defaults fire in order, and inside API Gateway’s timeout', () => {
    const l = defaultLimits;
    expect(limitProblems(l)).toEqual([]);
    expect(l.lockTimeoutMs).toBeLessThan(l.statementTimeoutMs);
    expect(l.statementTimeoutMs).toBeLessThan(l.queryTimeoutMs);
    expect(l.queryTimeoutMs).toBeLessThan(l.requestTimeoutMs);
    expect(l.requestTimeoutMs + l.functionReserveMs).toBeLessThan(API_GATEWAY_TIMEOUT_MS);
    expect(l.watchMaxWaitSeconds * 1000).toBeLessThan(l.requestTimeoutMs);
  });

  it('an override that breaks the order is refused at load, naming the relation', () => {
    expect(() => limitsFromEnv({ SYNC_LIMIT_LOCK_TIMEOUT_MS: '30000' })).toThrow(/lock_timeout_ms \(30000\) must be below statement_timeout_ms/);
    expect(() => limitsFromEnv({ SYNC_LIMIT_QUERY_TIMEOUT_MS: '40000' })).toThrow(/query_timeout_ms \(40000\) must be below request_timeout_ms/);
    expect(() => limitsFromEnv({ SYNC_LIMIT_REQUEST_TIMEOUT_MS: '29000' })).toThrow(/request_timeout_ms \(29000\) must be below API Gateway/);
    expect(() => limitsFromEnv({ SYNC_LIMIT_WATCH_MAX_WAIT_SECONDS: '27' })).toThrow(/watch_max_wait_seconds/);
    // Smaller bounds in the same order are fine (the tests use them).
    expect(limitsFromEnv({ SYNC_LIMIT_LOCK_TIMEOUT_MS: '400', SYNC_LIMIT_STATEMENT_TIMEOUT_MS: '800', SYNC_LIMIT_QUERY_TIMEOUT_MS: '1200',
      SYNC_LIMIT_REQUEST_TIMEOUT_MS: '3000', SYNC_LIMIT_DB_CONNECT_TIMEOUT_MS: '800', SYNC_LIMIT_WATCH_MAX_WAIT_SECONDS: '2' }).queryTimeoutMs).toBe(1200);
  });

  it('an override that puts a page default above its maximum, or a bundle above a user\'s staging cap, is refused', () => {
    expect(() => limitsFromEnv({ SYNC_LIMIT_DEFAULT_ROWS_PER_PAGE: '6000' })).toThrow(/default_rows_per_page \(6000\) must be at most max_rows_per_page/);
    expect(() => limitsFromEnv({ SYNC_LIMIT_MAX_STAGED_BYTES_PER_USER: '1000' })).toThrow(/max_bytes_per_bundle .* must be at most max_staged_bytes_per_user/);
    expect(() => limitsFromEnv({ SYNC_LIMIT_FUNCTION_RESERVE_MS: '5000' })).toThrow(/function_reserve_ms/);
  });

  it('publishes every limit under one derived name, the one its environment override uses', async () => {
    const { limitsToWire, limitWireName } = await import('../core/limits.js');
    const wire = limitsToWire(defaultLimits);
    expect(Object.keys(wire)).toHaveLength(Object.keys(defaultLimits).length);
    for (const name of Object.keys(wire)) expect(name).toMatch(/^[a-z]+(_[a-z0-9]+)*$/);
    expect(limitWireName('maxRowsPerPushChunk')).toBe('max_rows_per_push_chunk');
    expect(limitsFromEnv({ SYNC_LIMIT_MAX_KEY_BYTES: '512' }).maxKeyBytes).toBe(512);
  });

  it('publishes the per-user caps of protocol §8 in bundle_limits', async () => {
    const { limitsToWire } = await import('../core/limits.js');
    expect(limitsToWire(defaultLimits)).toMatchObject({
      max_open_push_sessions_per_user: 64,
      max_open_snapshot_sessions_per_user: 8,
      max_staged_bytes_per_user: 256 * 1024 * 1024,
    });
  });
});
