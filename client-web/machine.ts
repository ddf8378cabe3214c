/**
 * The decisions of a sync operation, as a pure state machine (style.md #9): no I/O, no clock, no
 * SQLite. The coordinator (coordinator.ts) reads the durable facts, runs the step of the current
 * phase, and feeds the step's outcome back as an event; this module says what comes next.
 *
 *                      ┌──────────── begin ─────────────┐
 *                      ▼                                ▼
 *   start ──begin──▶ rebuild ──rebuilt──▶ push ──nothing_to_push──▶ pull ──page_applied──▶ done
 *     │                ▲  ▲                │ ▲                        │  (more: pull again)
 *     │                │  │     pushed ────┘ │ (until nothing is left,│
 *     │                │  └── replay_pruned, │  or the bundle budget)  │
 *     │                │      scope_taken ───┘                         │
 *     │                └──────────── history_pruned ───────────────────┘
 *     ├──begin──▶ rejected          (a frozen bundle the server rejected; a result)
 *     ├──begin──▶ outbox_pending    (pull or rebuild over a frozen bundle; an error)
 *     └──begin──▶ source_recovery   (the server refused this source; an error; also from any
 *                                    step's source_refused)
 *
 * Which of those edges a goal takes: `sync` pushes everything, then pulls; `attach` pushes
 * everything (after hydrating when the scope existed); `push` pushes one bundle; `pull` pulls;
 * `rebuild` rebuilds (rotating the source first when asked or required). Budgets keep a run
 * finite: at most MAX_PUSHES bundles (then the pull, or the end), at most MAX_REBUILDS rebuilds
 * (then `not_converging`).
 *
 * TRANSITIONS lists, for every phase and every event, the phases `transition` may answer; its
 * type makes a missing pair a compile error, and test/client-machine.test.ts checks `transition`
 * against it.
 */

/** What the caller asked for. */
export type Goal = 'sync' | 'attach' | 'push' | 'pull' | 'rebuild';

export const PHASES = ['start', 'rebuild', 'push', 'pull', 'done', 'rejected', 'outbox_pending', 'source_recovery', 'not_converging'] as const;
export type Phase = (typeof PHASES)[number];

/** Phases that end a run: the coordinator answers (done, rejected) or throws (the others). */
export const TERMINAL: ReadonlySet<Phase> = new Set<Phase>(['done', 'rejected', 'outbox_pending', 'source_recovery', 'not_converging']);

/** The durable state the decisions depend on, as the coordinator read it. */
export interface Facts {
  /** The frozen bundle: none, one waiting to be pushed, or one the server rejected. */
  readonly frozen: 'none' | 'pending' | 'rejected';
  readonly rebuildRequired: boolean;
  /** The server refused this device's source; only a rotating rebuild recovers (protocol §10.5). */
  readonly sourceRefused: boolean;
}

export const EVENT_TYPES = [
  'begin',
  'rebuilt',
  'pushed',
  'nothing_to_push',
  'rejected',
  'replay_pruned',
  'scope_taken',
  'history_pruned',
  'source_refused',
  'page_applied',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export type SyncEvent =
  /** The run starts; `rotate`: the rebuild goal must rotate the source (asked, or required). */
  | { readonly type: 'begin'; readonly facts: Facts; readonly rotate: boolean }
  /** A snapshot was applied. */
  | { readonly type: 'rebuilt'; readonly facts: Facts }
  /** One bundle is done: committed and replayed, or every change lost to conflicts. */
  | { readonly type: 'pushed'; readonly facts: Facts }
  | { readonly type: 'nothing_to_push'; readonly facts: Facts }
  /** The server rejected the frozen bundle (and nothing could be salvaged). */
  | { readonly type: 'rejected' }
  /** The bundle committed, but its rows were pruned before the replay: acknowledged; a rebuild brings them. */
  | { readonly type: 'replay_pruned' }
  /** Another device initialized the scope first: the local changes go back to the dirty set; rebuild, push on top. */
  | { readonly type: 'scope_taken' }
  /** The checkpoint is below the retained floor (protocol §10.4). */
  | { readonly type: 'history_pruned' }
  /** The server refused this device's source (protocol §10.5). */
  | { readonly type: 'source_refused' }
  /** A page of complete bundles was applied; `more`: the stable ceiling is not reached yet. */
  | { readonly type: 'page_applied'; readonly more: boolean };

/** Bundles one run pushes at most (a dirty set over the bundle limits splits into several). */
export const MAX_PUSHES = 100;
/** Rebuilds one run starts at most; more means the server and the client disagree for good. */
export const MAX_REBUILDS = 3;

export interface Machine {
  readonly goal: Goal;
  readonly phase: Phase;
  /** Bundles pushed in this run. */
  readonly pushes: number;
  /** Rebuilds started in this run. */
  readonly rebuilds: number;
  /** The next rebuild rotates the source (only the first rebuild of a `rebuild` run does). */
  readonly rotate: boolean;
}

/** A run before its `begin` event. */
export function initial(goal: Goal): Machine {
  return { goal, phase: 'start', pushes: 0, rebuilds: 0, rotate: false };
}

type Table = { readonly [P in Phase]: { readonly [E in EventType]: readonly Phase[] } };

const NONE: readonly Phase[] = [];
const TERMINAL_ROW: { readonly [E in EventType]: readonly Phase[] } = {
  begin: NONE, rebuilt: NONE, pushed: NONE, nothing_to_push: NONE, rejected: NONE,
  replay_pruned: NONE, scope_taken: NONE, history_pruned: NONE, source_refused: NONE, page_applied: NONE,
};

/** Every phase × event: the phases `transition` may answer (none: the event is a bug in that phase). */
export const TRANSITIONS: Table = {
  start: { ...TERMINAL_ROW, begin: ['rebuild', 'push', 'pull', 'rejected', 'outbox_pending', 'source_recovery'] },
  rebuild: { ...TERMINAL_ROW, rebuilt: ['push', 'pull', 'done'], source_refused: ['source_recovery'] },
  push: {
    ...TERMINAL_ROW,
    pushed: ['push', 'pull', 'done'],
    nothing_to_push: ['rebuild', 'pull', 'done'],
    rejected: ['rejected'],
    replay_pruned: ['rebuild', 'not_converging'],
    scope_taken: ['rebuild', 'not_converging'],
    source_refused: ['source_recovery'],
  },
  pull: { ...TERMINAL_ROW, page_applied: ['pull', 'done'], history_pruned: ['rebuild', 'not_converging'], source_refused: ['source_recovery'] },
  done: TERMINAL_ROW,
  rejected: TERMINAL_ROW,
  outbox_pending: TERMINAL_ROW,
  source_recovery: TERMINAL_ROW,
  not_converging: TERMINAL_ROW,
};

/** An event the current phase cannot receive: a bug in the coordinator, never a condition. */
export class InvalidTransition extends Error {
  override readonly name = 'InvalidTransition';
}

const to = (m: Machine, phase: Phase, changes: Partial<Machine> = {}): Machine => ({ ...m, ...changes, phase });

/** Enters a rebuild, within the run's budget. */
function rebuild(m: Machine, changes: Partial<Machine> = {}): Machine {
  if (m.rebuilds >= MAX_REBUILDS) return to(m, 'not_converging', changes);
  return to(m, 'rebuild', { ...changes, rebuilds: m.rebuilds + 1 });
}

/** Where a run goes once nothing is left to push. */
function afterPushing(m: Machine, facts: Facts): Machine {
  if (m.goal === 'push') return to(m, 'done');
  // Checkpoint recovery resumes by itself (protocol §10.6): a freeze or a discard may have required it.
  if (facts.rebuildRequired && m.rebuilds < MAX_REBUILDS) return rebuild(m);
  return to(m, m.goal === 'sync' ? 'pull' : 'done');
}

function begin(m: Machine, facts: Facts, rotate: boolean): Machine {
  switch (m.goal) {
    case 'rebuild':
      // A rotation returns a frozen bundle to the dirty set (nothing of it committed); any other
      // rebuild would take rows the frozen bundle is still pushing.
      if (facts.frozen !== 'none' && !rotate) return to(m, 'outbox_pending');
      return rebuild(m, { rotate });
    case 'pull':
      if (facts.sourceRefused) return to(m, 'source_recovery');
      if (facts.frozen !== 'none') return to(m, 'outbox_pending');
      return facts.rebuildRequired ? rebuild(m) : to(m, 'pull');
    case 'push':
      return facts.sourceRefused ? to(m, 'source_recovery') : to(m, 'push');
    case 'sync':
    case 'attach':
      if (facts.sourceRefused) return to(m, 'source_recovery');
      if (facts.frozen === 'rejected') return to(m, 'rejected');
      // A frozen bundle goes first: it may have committed already, and a rebuild would fail closed.
      if (facts.frozen === 'pending') return to(m, 'push');
      return facts.rebuildRequired ? rebuild(m) : to(m, 'push');
  }
}

/** The next state of a run after `event`; throws InvalidTransition for an event its phase cannot receive. */
export function transition(m: Machine, event: SyncEvent): Machine {
  if (TRANSITIONS[m.phase][event.type].length === 0) throw new InvalidTransition(`event ${event.type} in phase ${m.phase}`);
  switch (event.type) {
    case 'begin':
      return begin(m, event.facts, event.rotate);
    case 'rebuilt':
      if (m.goal === 'rebuild') return to(m, 'done', { rotate: false });
      if (m.goal === 'pull') return to(m, 'pull', { rotate: false });
      // A push run rebuilds after its bundle committed below the floor (done), or after the scope
      // was taken (its changes still wait).
      if (m.goal === 'push' && m.pushes > 0) return to(m, 'done', { rotate: false });
      return to(m, 'push', { rotate: false });
    case 'pushed': {
      const next = { ...m, pushes: m.pushes + 1 };
      if (m.goal === 'push' || next.pushes >= MAX_PUSHES) return afterPushing(next, { ...event.facts, rebuildRequired: false });
      return to(next, 'push');
    }
    case 'nothing_to_push':
      return afterPushing(m, event.facts);
    case 'rejected':
      return to(m, 'rejected');
    case 'replay_pruned':
      return rebuild({ ...m, pushes: m.pushes + 1 });
    case 'scope_taken':
    case 'history_pruned':
      return rebuild(m);
    case 'source_refused':
      return to(m, 'source_recovery');
    case 'page_applied':
      return to(m, event.more ? 'pull' : 'done');
  }
}
