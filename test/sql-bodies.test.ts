/**
 * The static reading behind the scale-out readiness checks (test/support/sql-bodies.ts): it must
 * find an unqualified call or relation, a sequence, a lock or a notification where one is, and
 * stay quiet on the forms managed SQL uses that only look like them (CTEs, aliases with column
 * lists, IS DISTINCT FROM, FOR UPDATE OF, EXTRACT(… FROM …), messages and comments).
 */
import { describe, expect, it } from 'vitest';
import { calledFunctions, globalEffects, unqualifiedNames } from './support/sql-bodies.js';

const builtins = new Set(['jsonb_build_object', 'now', 'count', 'format', 'jsonb_array_elements', 'unnest', 'coalesce']);
const names = (text: string) => unqualifiedNames(text, builtins, new Set(['lockstep_new', 'pg_class'])).map((f) => `${f.kind} ${f.name}`);

describe('unqualified names', () => {
  it('finds a relation and a function without their schema', () => {
    expect(names(`SELECT my_helper(x) FROM user_state u JOIN sync.row_state r ON true; INSERT INTO bundle_log VALUES (1); UPDATE quota SET n = 1; DELETE FROM things`))
      .toEqual(['function my_helper', 'relation user_state', 'relation bundle_log', 'relation quota', 'relation things']);
  });
  it('leaves qualified names, builtins, CTEs, aliases, transition tables and look-alikes alone', () => {
    expect(names(`WITH page AS (SELECT 1), RECURSIVE_not AS (SELECT 2) SELECT * FROM page, jsonb_array_elements(p) WITH ORDINALITY e(r, ord)
      JOIN "sync"."user_state" u ON true JOIN lockstep_new n ON true JOIN pg_class c ON true
      WHERE a IS DISTINCT FROM v_hash AND extract(epoch FROM v_at) > 0 FOR UPDATE OF u;
      INSERT INTO sync.q AS q (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2;
      -- a comment naming FROM nothing_here
      RAISE EXCEPTION 'message FROM nowhere (see this)'`)).toEqual([]);
  });
  it('reads dynamic SQL inside dollar quotes', () => {
    expect(names(`EXECUTE format($q$ SELECT * FROM unqualified_table $q$)`)).toEqual(['relation unqualified_table']);
  });
});

describe('global effects', () => {
  it('finds sequences, advisory locks, notifications, LOCK TABLE and pg_locks', () => {
    expect(globalEffects(`PERFORM nextval('sync.a_seq'); SELECT pg_advisory_xact_lock(1); PERFORM pg_notify('chan', 'x');
      LOCK TABLE sync.t; SELECT 1 FROM pg_locks; NOTIFY other_channel`))
      .toEqual(['LOCK TABLE', 'NOTIFY other_channel', 'nextval(sync.a_seq)', 'pg_advisory_xact_lock()', 'pg_notify(chan)', 'reads pg_locks']);
  });
  it('ignores them in comments and messages', () => {
    expect(globalEffects(`-- nextval('sync.x') in a comment, and the session's apostrophe
      RAISE EXCEPTION 'hold the lock: SELECT pg_advisory_xact_lock(7)' USING HINT = 'then nextval(''sync.y'')';
      RETURN 1;`)).toEqual([]);
  });
});

describe('called functions', () => {
  it('names the managed functions a body calls, not the tables it writes', () => {
    expect(calledFunctions(`v := sync.ensure_user(p); INSERT INTO sync.user_state (a) VALUES (1); PERFORM sync.err('x')`, new Set(['sync.ensure_user', 'sync.err'])))
      .toEqual(['sync.ensure_user', 'sync.err']);
  });
});
