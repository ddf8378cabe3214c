/**
 * Issue 16: the client's sync decisions as a pure state machine (client-web/machine.ts), tested
 * without I/O. Every phase × event pair is driven with every goal and every combination of
 * durable facts: the answer must be one of the phases TRANSITIONS lists for that pair, and a pair
 * with none must throw. Then the paths that matter, spelled out.
 */
import { describe, expect, it } from 'vitest';
import {
  EVENT_TYPES,
  initial,
  InvalidTransition,
  MAX_PUSHES,
  MAX_REBUILDS,
  PHASES,
  TERMINAL,
  transition,
  TRANSITIONS,
  type EventType,
  type Facts,
  type Goal,
  type Machine,
  type Phase,
  type SyncEvent,
} from '../client-web/machine.js';

const GOALS: readonly Goal[] = ['sync', 'attach', 'push', 'pull', 'rebuild'];
const ALL_FACTS: Facts[] = (['none', 'pending', 'rejected'] as const).flatMap((frozen) =>
  [false, true].flatMap((rebuildRequired) => [false, true].map((sourceRefused) => ({ frozen, rebuildRequired, sourceRefused }))));
const CLEAN: Facts = { frozen: 'none', rebuildRequired: false, sourceRefused: false };

/** Every event of a type, over every fact combination. */
function eventsOf(type: EventType): SyncEvent[] {
  switch (type) {
    case 'begin':
      return ALL_FACTS.flatMap((facts) => [{ type, facts, rotate: false }, { type, facts, rotate: true }]);
    case 'rebuilt':
    case 'pushed':
    case 'nothing_to_push':
      return ALL_FACTS.map((facts) => ({ type, facts }));
    case 'page_applied':
      return [{ type, more: true }, { type, more: false }];
    default:
      return [{ type }];
  }
}

/** Machines in `phase` with counters at the edges of their budgets (a run starts with none). */
function machinesIn(phase: Phase): Machine[] {
  if (phase === 'start') return GOALS.map(initial);
  return GOALS.flatMap((goal) =>
    [0, 1, MAX_PUSHES - 1].flatMap((pushes) =>
      [0, 1, MAX_REBUILDS].flatMap((rebuilds) => [false, true].map((rotate) => ({ ...initial(goal), phase, pushes, rebuilds, rotate })))));
}

/** Runs a script of events from `begin`, answering the phases passed. */
function walk(goal: Goal, begin: Facts, events: SyncEvent[], rotate = false): Phase[] {
  let m = transition(initial(goal), { type: 'begin', facts: begin, rotate });
  const phases: Phase[] = [m.phase];
  for (const e of events) {
    m = transition(m, e);
    phases.push(m.phase);
  }
  return phases;
}

describe('client sync state machine (pure)', () => {
  it('answers only the phases the transition table lists, and refuses every pair it lists none for', () => {
    let checked = 0;
    for (const phase of PHASES) {
      for (const type of EVENT_TYPES) {
        const allowed = TRANSITIONS[phase][type];
        for (const m of machinesIn(phase)) {
          for (const event of eventsOf(type)) {
            checked++;
            if (allowed.length === 0) {
              expect(() => transition(m, event), `${phase} × ${type}`).toThrow(InvalidTransition);
            } else {
              const next = transition(m, event);
              expect(allowed, `${phase} × ${type} (${m.goal}) answered ${next.phase}`).toContain(next.phase);
            }
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(10_000);
  });

  it('terminal phases take no event; every other phase takes some', () => {
    for (const phase of PHASES) {
      const takes = EVENT_TYPES.filter((t) => TRANSITIONS[phase][t].length > 0);
      expect(takes.length === 0, phase).toBe(TERMINAL.has(phase));
    }
  });

  it('sync: push everything, then pull to the ceiling', () => {
    const pushed: SyncEvent = { type: 'pushed', facts: CLEAN };
    expect(walk('sync', CLEAN, [pushed, pushed, { type: 'nothing_to_push', facts: CLEAN }, { type: 'page_applied', more: true }, { type: 'page_applied', more: false }]))
      .toEqual(['push', 'push', 'push', 'pull', 'pull', 'done']);
  });

  it('sync: a required rebuild resumes first (protocol §10.6), but a frozen bundle is pushed before it', () => {
    expect(walk('sync', { ...CLEAN, rebuildRequired: true }, [{ type: 'rebuilt', facts: CLEAN }])).toEqual(['rebuild', 'push']);
    expect(walk('sync', { ...CLEAN, frozen: 'pending', rebuildRequired: true }, [
      { type: 'pushed', facts: { ...CLEAN, rebuildRequired: true } },
      { type: 'nothing_to_push', facts: { ...CLEAN, rebuildRequired: true } },
      { type: 'rebuilt', facts: CLEAN },
    ])).toEqual(['push', 'push', 'rebuild', 'push']);
  });

  it('sync: a held rejection answers at once; a refused source fails before any request', () => {
    expect(walk('sync', { ...CLEAN, frozen: 'rejected' }, [])).toEqual(['rejected']);
    expect(walk('sync', { ...CLEAN, sourceRefused: true }, [])).toEqual(['source_recovery']);
    expect(walk('push', { ...CLEAN, frozen: 'rejected' }, [{ type: 'rejected' }])).toEqual(['push', 'rejected']);
  });

  it('pull and rebuild fail closed over a frozen bundle, except a rotating rebuild', () => {
    expect(walk('pull', { ...CLEAN, frozen: 'pending' }, [])).toEqual(['outbox_pending']);
    expect(walk('rebuild', { ...CLEAN, frozen: 'rejected' }, [])).toEqual(['outbox_pending']);
    expect(walk('rebuild', { ...CLEAN, frozen: 'pending', sourceRefused: true }, [{ type: 'rebuilt', facts: CLEAN }], true)).toEqual(['rebuild', 'done']);
  });

  it('history_pruned rebuilds and pulls on; a replay below the floor rebuilds and ends a push', () => {
    expect(walk('pull', CLEAN, [{ type: 'history_pruned' }, { type: 'rebuilt', facts: CLEAN }, { type: 'page_applied', more: false }]))
      .toEqual(['pull', 'rebuild', 'pull', 'done']);
    expect(walk('push', CLEAN, [{ type: 'replay_pruned' }, { type: 'rebuilt', facts: CLEAN }])).toEqual(['push', 'rebuild', 'done']);
    // A scope taken by another device: rebuild, then push the same changes on top.
    expect(walk('push', CLEAN, [{ type: 'scope_taken' }, { type: 'rebuilt', facts: CLEAN }, { type: 'pushed', facts: CLEAN }]))
      .toEqual(['push', 'rebuild', 'push', 'done']);
  });

  it('attach: hydrate, push on top, no pull; an empty dirty set ends it', () => {
    expect(walk('attach', { ...CLEAN, rebuildRequired: true }, [{ type: 'rebuilt', facts: CLEAN }, { type: 'nothing_to_push', facts: CLEAN }]))
      .toEqual(['rebuild', 'push', 'done']);
  });

  it('budgets: a run stops pushing after MAX_PUSHES bundles and gives up after MAX_REBUILDS rebuilds', () => {
    let m = transition(initial('sync'), { type: 'begin', facts: CLEAN, rotate: false });
    for (let i = 0; i < MAX_PUSHES; i++) m = transition(m, { type: 'pushed', facts: CLEAN });
    expect(m).toMatchObject({ phase: 'pull', pushes: MAX_PUSHES });
    m = transition(initial('pull'), { type: 'begin', facts: CLEAN, rotate: false });
    for (let i = 0; i < MAX_REBUILDS; i++) {
      m = transition(m, { type: 'history_pruned' });
      expect(m.phase).toBe('rebuild');
      m = transition(m, { type: 'rebuilt', facts: CLEAN });
    }
    expect(transition(m, { type: 'history_pruned' }).phase).toBe('not_converging');
  });

  it('source refusals end any step', () => {
    for (const phase of ['push', 'pull', 'rebuild'] as const) {
      for (const m of machinesIn(phase)) expect(transition(m, { type: 'source_refused' }).phase).toBe('source_recovery');
    }
  });
});
