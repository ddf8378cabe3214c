/**
 * The edge's one error mapping (functions/edge/http.ts): transient database conditions answer
 * 503 service_unavailable with Retry-After, never 500; typed errors keep their registry status;
 * a bug stays 500. The real-PostgreSQL side of the same table is test/unavailable.pg.test.ts.
 */
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { SyncError, errorRegistry } from '../core/errors.js';
import { errorAnswer, isUnavailable } from '../functions/edge/http.js';

const pgError = (code: string, message = `sqlstate ${code}`) => Object.assign(new Error(message), { code });

describe('errorAnswer', () => {
  const transient: Array<[string, Error]> = [
    ['57014 query_canceled (statement_timeout)', pgError('57014', 'canceling statement due to statement timeout')],
    ['55P03 lock_not_available (lock_timeout)', pgError('55P03', 'canceling statement due to lock timeout')],
    ['40001 serialization_failure', pgError('40001')],
    ['40P01 deadlock_detected', pgError('40P01')],
    ['53300 too_many_connections', pgError('53300', 'too many connections for role "x"')],
    ['53200 out_of_memory', pgError('53200')],
    ['08006 connection_failure', pgError('08006')],
    ['08001 sqlclient_unable_to_establish_sqlconnection', pgError('08001')],
    ['08P01 protocol_violation (PgBouncer query_wait_timeout)', pgError('08P01', 'query_wait_timeout')],
    ['57P01 admin_shutdown', pgError('57P01')],
    ['57P03 cannot_connect_now', pgError('57P03', 'the database system is starting up')],
    ['3D000 database dropped', pgError('3D000')],
    ['28P01 password rejected', pgError('28P01')],
    ['ECONNREFUSED', pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:1')],
    ['ECONNRESET', pgError('ECONNRESET')],
    ['pg connect timeout', new Error('Connection terminated due to connection timeout')],
    ['pg pool slot timeout', new Error('timeout exceeded when trying to connect')],
    ['connection lost', new Error('Connection terminated unexpectedly')],
  ];
  for (const [name, error] of transient) {
    it(`${name} → 503 service_unavailable with Retry-After`, () => {
      expect(isUnavailable(error)).toBe(true);
      const answer = errorAnswer(error, 7);
      expect(answer.status).toBe(503);
      expect(answer.body).toEqual({ error: 'service_unavailable', message: expect.any(String) });
      expect(answer.headers?.['retry-after']).toBe('7');
    });
  }

  // A registered table changed behind bootstrap's back: the catalog's SQL names what is gone.
  for (const code of ['42703', '42P01', '42883', '42804']) {
    it(`${code} from a managed function → 503 service_unavailable with reason layout_drift`, () => {
      const answer = errorAnswer(pgError(code), 2);
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ error: 'service_unavailable', reason: 'layout_drift' });
      expect(answer.headers?.['retry-after']).toBe('2');
    });
  }

  const bugs: Array<[string, unknown]> = [
    ['23505 unique_violation outside the commit mapping', pgError('23505')],
    ['42601 syntax_error (a bug in our own SQL)', pgError('42601')],
    ['XX000 internal_error', pgError('XX000')],
    ['54001 stack depth', pgError('54001')],
    ['a plain Error', new Error('boom')],
    ['a thrown string', 'boom'],
    ['null', null],
  ];
  for (const [name, error] of bugs) {
    it(`${name} → 500 internal_error`, () => {
      const spy = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        expect(isUnavailable(error)).toBe(false);
        const answer = errorAnswer(error);
        expect(answer.status).toBe(500);
        expect(answer.body).toEqual({ error: 'internal_error', message: 'internal error' });
      } finally {
        spy.mockRestore();
      }
    });
  }

  it('a typed 503 without an interval gets the default Retry-After; its own interval wins', () => {
    const plain = errorAnswer(new SyncError('service_unavailable', 'not bootstrapped'));
    expect(plain.status).toBe(503);
    expect(plain.headers?.['retry-after']).toBe('1');
    const unknown = errorAnswer(new SyncError('commit_outcome_unknown', 'lost'), 3);
    expect(unknown.status).toBe(503);
    expect((unknown.body as { error: string }).error).toBe('commit_outcome_unknown');
    expect(unknown.headers?.['retry-after']).toBe('3');
    const limited = errorAnswer(new SyncError('rate_limited', 'slow down', {}, 9));
    expect(limited.status).toBe(errorRegistry.rate_limited.status);
    expect(limited.headers?.['retry-after']).toBe('9');
    expect(errorAnswer(new SyncError('push_session_not_found', 'no')).headers?.['retry-after']).toBeUndefined();
  });

  it('zod failures are 400 invalid_request with details', () => {
    const parsed = z.strictObject({ a: z.number() }).safeParse({ a: 'x' });
    expect(parsed.success).toBe(false);
    const answer = errorAnswer(parsed.error);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ error: 'invalid_request', details: [{ path: 'a' }] });
  });
});
