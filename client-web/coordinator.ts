/**
 * The coordinator: the one place that conducts a sync operation and owns every durable state
 * transition (the writes themselves are named functions of state.ts, the only module that writes
 * `_sync_*` lifecycle state).
 *
 * A run reads the durable facts, asks the state machine (machine.ts) for the phase, runs that
 * phase's step — push (push.ts), pull (pull.ts), rebuild (rebuild.ts), which only talk to the
 * server and answer outcomes — records what the outcome means in one local transaction
 * (replaying a committed bundle and acknowledging its tuple, applying a pulled page and moving
 * the checkpoint, applying a snapshot, resolving conflicts, quarantining, recording a rejection
 * or a source refusal), and feeds the outcome back to the machine as an event, until the machine
 * reaches a terminal phase. Steps never call each other.
 */
import { type SourceReplacementReason } from '../core/protocol/read-path.js';
import { type CommittedRow } from '../core/protocol/rows.js';
import { type AttachResult, type DetachResult, type PullResult, type PushResult, type RebuildResult } from './api.js';
import { applyCommittedRows, applyStagedSnapshot, applyTransaction, clearSyncedData, directTables, IMMEDIATE_KEYS_ROWS, inApplyMode } from './apply.js';
import { forgetCleanBases, rebaseChangedAgain } from './base-rows.js';
import { fetchOwnBundle } from './committed-rows.js';
import { resolveConflicts } from './conflicts.js';
import { type ClientContext } from './context.js';
import { ClientError, ClientErrorCode, type ServerErrorCode } from './errors.js';
import { replacementReason, type SourceRefusal } from './http-errors.js';
import { dropStageTables, outboxTables, resetStageTables } from './install.js';
import { initial, transition, type Facts, type Goal, type Machine, type SyncEvent } from './machine.js';
import { dropOutbox, freeze, readOutbox, shrinkOutbox, unfreeze, type FreezeLimits, type OutboxRow } from './outbox.js';
import { pullPage, pullPageBundles, type PullPage } from './pull.js';
import { predictCommittedRows } from './replay-prediction.js';
import { PagesAhead, pagesAfter } from './pages-ahead.js';
import { connect, pushBundle } from './push.js';
import { offendingRow, salvage, setAsideUnencodable, type Salvage } from './quarantine.js';
import { createSnapshotSession, deleteSnapshotSession, downloadSnapshot, type Rotation, type SnapshotCreate } from './rebuild.js';

import { type SqliteStatements } from './sqlite/port.js';
import {
  acknowledgeTuple,
  adoptSource,
  advanceCheckpoint,
  advanceCheckpointPastOwn,
  attachUser,
  checkpointAtSnapshot,
  clearSnapshotDownload,
  countDirty,
  countQuarantine,
  detachUser,
  forgetSnapshotsBefore,
  readAttachment,
  readCeilingReached,
  readFrozen,
  readRunFacts,
  readSnapshotDownload,
  readSource,
  recordCeilingReached,
  recordRejection,
  recordRotationIntent,
  recordSnapshotDownload,
  recordSourceRefusal,
  setInitializationId,
  setRebuildRequired,
  type FrozenBundle,
  type Rejection,
  type SnapshotDownload,
} from './state.js';
import { SyncHttpError } from './transport.js';

/** A create that answered a session (not a source refusal). */
type CreatedSession = Extract<SnapshotCreate, { kind: 'session' }>;

/** Rounds one bundle may take through outcomes that rewrite it (conflicts, reconnects, splits, salvage). */
const MAX_ROUNDS = 25;
/** Scope refusals one bundle answers by connecting again. */
const MAX_RECONNECTS = 3;
/** Snapshot sessions one rebuild starts when they keep vanishing mid-download. */
const MAX_SNAPSHOT_SESSIONS = 3;
/** A freeze stays under this share of the server's byte limit (its measure counts JSON framing). */
const FREEZE_BYTES_SHARE = 0.9;

export interface RunOptions {
  /** Rebuild goal: rotate the source for this reason (else the recorded refusal's, if any). */
  readonly rotate?: SourceReplacementReason;
  /** Push goal: push a bundle the server rejected before, instead of reporting the rejection. */
  readonly retryRejected?: boolean;
}

/** What one run did, for the caller's result. */
export interface RunReport {
  readonly push: PushResult;
  readonly pull: PullResult | null;
  readonly rebuild: RebuildResult | null;
  /** Rows applied by rebuilds of this run (an attach's hydration). */
  readonly rebuiltRows: number;
}

/** What a run has done so far. */
class Run {
  machine: Machine;
  // Push.
  committed: { bundleSeq: number; sourceBundleId: number; alreadyCommitted: boolean } | null = null;
  pushedRows = 0;
  conflictsResolved = 0;
  quarantinedRows = 0;
  resolvedWithoutCommit = false;
  rejection: Rejection | null = null;
  /**
   * While a rejection that named no row, or a bundle too large (in bytes or in commit time), is
   * being narrowed: the rows the last split sent back to the dirty set (the rest of the refused
   * bundle). The next freeze takes at most that many, so a half that committed does not make the
   * search start again over every pending row.
   */
  splitRest: number | null = null;
  /**
   * The rows of the bundle this run froze last, as its committed transaction wrote them: its
   * first push sends them without reading the outbox back (10k rows: ~25 ms of the client's push).
   */
  frozenRows: { readonly frozen: FrozenBundle; readonly rows: readonly OutboxRow[] } | null = null;
  // Pull.
  pulled = false;
  pullTarget: number | undefined;
  /**
   * The next pages towards `target`, asked for while the current one is applied (pages-ahead.ts);
   * `target` undefined: the run's first page, asked for while a pushed bundle is replayed.
   */
  pagesAhead: { readonly target: number | undefined; readonly pages: PagesAhead<PullPage> } | null = null;
  /**
   * The bundle this run pushed last, when the device held every bundle before it: replayed, it
   * is the stable ceiling as of its commit (the server commits a user's bundles one at a time),
   * so the pull that follows has reached it without asking (askFirstPullPage).
   */
  ownCeiling: number | undefined;
  /** Bundles per pull page after the run's first (pull.ts pullPageBundles). */
  pullBundles: number | undefined;
  bundlesApplied = 0;
  rowsApplied = 0;
  rowsSkippedPending = 0;
  rowsSeen = 0;
  // Rebuild.
  rebuilds = 0;
  rebuiltRows = 0;
  rebuild: RebuildResult | null = null;
  sourceError: SyncHttpError | null = null;

  constructor(readonly goal: Goal, readonly options: RunOptions) {
    this.machine = initial(goal);
  }

  pushResult(): PushResult {
    // A held rejection is always the server's (the client's own refusals only ever quarantine).
    if (this.rejection) return { status: 'rejected', ...this.rejection, code: this.rejection.code as ServerErrorCode };
    const quarantined = this.quarantinedRows > 0 ? { quarantinedRows: this.quarantinedRows } : {};
    if (this.committed) return { status: 'committed', ...this.committed, rowCount: this.pushedRows, conflictsResolved: this.conflictsResolved, ...quarantined };
    if (this.resolvedWithoutCommit || this.quarantinedRows > 0) return { status: 'resolved_without_commit', conflictsResolved: this.conflictsResolved, ...quarantined };
    return { status: 'nothing_to_push' };
  }
}

export class Coordinator {
  /** The user whose data is known to have reached the frozen ceiling (null: none; undefined: not read yet). */
  private ceilingReachedFor: string | null | undefined;
  /** Rows per bundle of the last pull page that had any, which sizes the next run's first page. */
  private rowsPerBundle: number | undefined;
  /**
   * Requests a run leaves going that its answer does not wait for: the delete of a snapshot
   * session it finished with (best effort; the server expires it anyway), a round trip the end of
   * an attach or a rebuild no longer waits for. The next run, and `settled`, wait for them first.
   */
  private trailing: Promise<void> = Promise.resolve();
  /**
   * The snapshot session an attach asked for together with its connect (see `attach`), for that
   * attach's rebuild to take instead of creating one; null when there is none. It answers null
   * when the create failed in any way: the rebuild then creates one as it always did. The attach
   * deletes a session its rebuild did not take before it answers.
   */
  private early: Promise<CreatedSession | null> | null = null;

  constructor(private readonly ctx: ClientContext) {}

  private get db() {
    return this.ctx.db;
  }

  /** The durable facts the machine decides on. */
  private facts(): Promise<Facts> {
    return readRunFacts(this.db);
  }

  /** Runs one operation to its end (see machine.ts for the decisions). */
  async run(goal: Goal, options: RunOptions = {}): Promise<RunReport> {
    await this.settled();
    const run = new Run(goal, options);
    const rotate = goal === 'rebuild' && (options.rotate !== undefined || (await readSource(this.db)).rotationReason !== null);
    run.machine = transition(run.machine, { type: 'begin', facts: await this.facts(), rotate });
    try {
      return await this.steps(run, goal);
    } finally {
      // Pages asked for ahead that the run did not use (it failed, or rebuilt instead).
      run.pagesAhead?.pages.abandon();
    }
  }

  /** Resolves once the requests earlier runs left going have ended (see `trailing`). */
  settled(): Promise<void> {
    return this.trailing;
  }

  private async steps(run: Run, goal: Goal): Promise<RunReport> {
    for (;;) {
      let event: SyncEvent;
      switch (run.machine.phase) {
        case 'rebuild':
          event = await this.rebuildPhase(run);
          break;
        case 'push':
          event = await this.pushPhase(run);
          break;
        case 'pull':
          event = await this.pullPhase(run);
          break;
        case 'start':
          throw new Error('lockstep: a run cannot stay in start');
        case 'done':
        case 'rejected':
          return this.report(run);
        case 'outbox_pending': {
          const frozen = await readFrozen(this.db);
          throw new ClientError(ClientErrorCode.outboxPending,
            `${goal} refused: frozen bundle (source bundle ${frozen?.sourceBundleId ?? '?'}) must be pushed, quarantined or discarded first`);
        }
        case 'source_recovery':
          throw this.sourceRecoveryError(run);
        case 'not_converging':
          throw new ClientError(ClientErrorCode.pushNotConverging, `${goal} needed more than ${run.machine.rebuilds} rebuilds; the server keeps answering history_pruned or taking the scope`);
      }
      run.machine = transition(run.machine, event);
    }
  }

  private async report(run: Run): Promise<RunReport> {
    // Held from an earlier push: the stored rejection is the answer (no new attempt).
    if (run.machine.phase === 'rejected' && !run.rejection) run.rejection = (await readFrozen(this.db))?.rejected ?? null;
    const pullGoal = run.machine.goal === 'sync' || run.machine.goal === 'pull';
    const pull: PullResult | null = pullGoal && run.machine.phase === 'done'
      ? {
          bundlesApplied: run.bundlesApplied,
          rowsApplied: run.rowsApplied,
          rowsSkippedPending: run.rowsSkippedPending,
          checkpoint: (await readAttachment(this.db)).checkpoint,
          rebuilt: run.rebuilds > 0,
        }
      : null;
    return { push: run.pushResult(), pull, rebuild: run.rebuild, rebuiltRows: run.rebuiltRows };
  }

  private sourceRecoveryError(run: Run): ClientError {
    const error = run.sourceError;
    return new ClientError(
      ClientErrorCode.sourceRecoveryRequired,
      `the server refused this device's source${error ? ` (${error.code})` : ''}: call rebuild() to rotate to a new source; local changes are kept`,
      { serverCode: error?.code ?? null, body: error?.body ?? null },
      error ? { cause: error } : undefined,
    );
  }

  /** A source refusal is recorded durably: the next rebuild rotates, even after a restart (protocol §10.5). */
  private async sourceRefused(run: Run, error: SyncHttpError): Promise<SyncEvent> {
    run.sourceError = error;
    await this.db.transaction((tx) => recordSourceRefusal(tx, replacementReason(error.code as SourceRefusal)));
    return { type: 'source_refused' };
  }

  private needsRebuild = (tx: SqliteStatements) => setRebuildRequired(tx, true);

  // ── Push ────────────────────────────────────────────────────────────────────────────────────

  private freezeLimits(): FreezeLimits {
    return { maxRows: this.ctx.limits.maxRowsPerBundle, maxBytes: Math.floor(this.ctx.limits.maxBytesPerBundle * FREEZE_BYTES_SHARE) };
  }

  /**
   * Freezes the dirty set (or answers the frozen bundle); a vanished skipped key requires a rebuild.
   * Rows that cannot be encoded are quarantined on the way (counted in the run).
   */
  private async freeze(run: Run, limits: FreezeLimits = this.freezeLimits(), unfreezeFirst?: FrozenBundle): Promise<FrozenBundle | null> {
    // Nothing dirty and nothing frozen (a device woken by another's commit): no write transaction,
    // which on OPFS costs a flush, for a freeze that would find nothing.
    if (!unfreezeFirst) {
      const [idle] = await this.db.query<{ idle: number }>('SELECT NOT EXISTS (SELECT 1 FROM _sync_dirty) AND NOT EXISTS (SELECT 1 FROM _sync_push_state) AS idle');
      if (Number(idle?.idle) === 1) return null;
    }
    const result = await applyTransaction(this.db, this.ctx.model, async (tx) => {
      if (unfreezeFirst) await unfreeze(tx, unfreezeFirst);
      const frozen = await freeze(tx, this.ctx.model, limits, (t, rows, bad) => setAsideUnencodable(t, this.ctx.model, rows, bad, this.needsRebuild));
      if (frozen.rebuildRequired) await setRebuildRequired(tx, true);
      return frozen;
    }, this.needsRebuild);
    run.quarantinedRows += result.setAside;
    run.frozenRows = result.frozen && result.rows.length > 0 ? { frozen: result.frozen, rows: result.rows } : null;
    return result.frozen;
  }

  /**
   * A rejection that names no row of a bundle of several: the bundle shrinks to its first half
   * (the rest goes back to the dirty set) and is pushed again, until the refused row is alone or
   * named; halves that pass commit on the way, so no row that would commit is ever held or
   * dropped with the refused one. Null when the rejection is not about a row (nothing to split).
   */
  private async split(frozen: FrozenBundle, rejection: Rejection): Promise<FrozenBundle | null> {
    if (frozen.rowCount < 2) return null;
    const rowFault = rejection.code === 'push_rejected' || rejection.code === 'payload_too_large';
    if (!rowFault) return null;
    const rows = await readOutbox(this.db, this.ctx.model, frozen);
    if (offendingRow(rows, rejection) >= 0) return null;
    return this.db.transaction((tx) => shrinkOutbox(tx, frozen, rows, Math.ceil(rows.length / 2)));
  }

  /** One bundle: freeze (or resume) it and push it to an outcome. */
  private async pushPhase(run: Run): Promise<SyncEvent> {
    const first = await this.freeze(run, run.splitRest === null ? this.freezeLimits() : { ...this.freezeLimits(), maxRows: run.splitRest });
    if (!first) return { type: 'nothing_to_push', facts: await this.facts() };
    if (first.rejected && !run.options.retryRejected) {
      run.rejection = first.rejected;
      return { type: 'rejected' };
    }
    let frozen: FrozenBundle = first;
    let reconnects = 0;
    for (let round = 1; round <= MAX_ROUNDS; round++) {
      const attempt = await pushBundle(this.ctx, frozen, run.frozenRows?.frozen === frozen ? run.frozenRows.rows : undefined);
      switch (attempt.kind) {
        case 'committed':
          return this.replay(run, frozen, attempt.bundle, attempt.alreadyCommitted);
        case 'conflicts': {
          run.conflictsResolved += attempt.conflicts.length;
          const rewritten = await resolveConflicts(this.ctx, frozen, attempt.rows, attempt.conflicts, this.needsRebuild);
          if (!rewritten) {
            run.resolvedWithoutCommit = true;
            return { type: 'pushed', facts: await this.facts() };
          }
          frozen = rewritten;
          continue;
        }
        case 'rejected': {
          const half = await this.split(frozen, attempt.rejection);
          if (half) {
            run.splitRest = frozen.rowCount - half.rowCount;
            frozen = half;
            continue;
          }
          run.splitRest = null;
          const saved: Salvage | null = this.ctx.config.onRejected === 'quarantine' ? await salvage(this.ctx, frozen, attempt.rejection, this.needsRebuild) : null;
          if (!saved) {
            await this.db.transaction((tx) => recordRejection(tx, attempt.rejection));
            run.rejection = attempt.rejection;
            return { type: 'rejected' };
          }
          run.quarantinedRows += saved.quarantinedRows;
          if (!saved.frozen) {
            run.resolvedWithoutCommit = true;
            return { type: 'pushed', facts: await this.facts() };
          }
          frozen = saved.frozen;
          continue;
        }
        case 'scope_refused': {
          if (reconnects++ >= MAX_RECONNECTS) throw new ClientError(ClientErrorCode.pushNotConverging, 'the server keeps refusing the scope after connecting again');
          const answer = await connect(this.ctx, true);
          if (answer.resolution === 'retry_later') {
            throw new SyncHttpError('scope_initializing', 409, 'another device is initializing this user; try again later', {}, (answer.retry_after_seconds ?? 1) * 1000);
          }
          if (answer.resolution === 'remote_authoritative') {
            // Another device initialized the scope: its data comes first, the local changes go
            // back to the dirty set and are pushed on top (frozen afresh after the rebuild).
            const taken = frozen;
            await this.db.transaction(async (tx) => {
              await unfreeze(tx, taken);
              await setInitializationId(tx, null);
              await setRebuildRequired(tx, true);
            });
            return { type: 'scope_taken' };
          }
          await this.db.transaction((tx) => setInitializationId(tx, answer.initialization_id ?? null));
          const again = await this.freeze(run);
          if (!again) return { type: 'nothing_to_push', facts: await this.facts() };
          frozen = again;
          continue;
        }
        case 'source_refused':
          return this.sourceRefused(run, attempt.error);
        case 'too_large': {
          // The server measures the bundle larger than the freeze did, or its commit outran the
          // bound: freeze half as many rows. The rest of this bundle comes next (splitRest), so a
          // half that commits does not start the halving again over every pending row: a row
          // that can never commit in time is alone after log2(n) + 1 bounds, wherever it is.
          const smaller = await this.freeze(run, { ...this.freezeLimits(), maxRows: Math.max(1, Math.floor(frozen.rowCount / 2)) }, frozen);
          if (!smaller) return { type: 'nothing_to_push', facts: await this.facts() };
          run.splitRest = frozen.rowCount - smaller.rowCount;
          frozen = smaller;
          continue;
        }
      }
    }
    throw new ClientError(ClientErrorCode.pushNotConverging, `source bundle ${frozen.sourceBundleId} did not commit within ${MAX_ROUNDS} rounds`);
  }

  /**
   * Replays a committed bundle in one transaction with acknowledging its tuple, so a crash either
   * keeps the frozen bundle (and the retry converges to `already_committed`) or has done both. A
   * bundle whose rows were pruned meanwhile is acknowledged and rebuilt instead (protocol §10.2).
   */
  private async replay(run: Run, frozen: FrozenBundle, bundle: { bundle_seq: number; source_bundle_id: number; row_count: number; bundle_hash?: string }, alreadyCommitted: boolean): Promise<SyncEvent> {
    await this.askFirstPullPage(run, bundle.bundle_seq);
    const predicted = await this.predictReplay(run, frozen, bundle);
    const fetched = predicted ? { kind: 'rows' as const, rows: predicted } : await fetchOwnBundle(this.ctx, bundle, frozen.sourceBundleId);
    run.committed = { bundleSeq: bundle.bundle_seq, sourceBundleId: bundle.source_bundle_id, alreadyCommitted };
    run.pushedRows += bundle.row_count;
    if (fetched.kind === 'pruned') {
      await this.db.transaction(async (tx) => {
        await dropOutbox(tx, frozen);
        await acknowledgeTuple(tx, frozen.sourceBundleId);
        await setRebuildRequired(tx, true);
      });
      return { type: 'replay_pruned' };
    }
    await applyTransaction(this.db, this.ctx.model, async (tx, keys) => {
      await inApplyMode(tx, () => applyCommittedRows(tx, this.ctx.model, fetched.rows, true), keys);
      // Conflict bases (base-rows.ts): a row changed again after the freeze builds on what was just committed.
      await rebaseChangedAgain(tx, this.ctx.model, fetched.rows);
      await dropOutbox(tx, frozen);
      await forgetCleanBases(tx, this.ctx.model);
      await acknowledgeTuple(tx, frozen.sourceBundleId);
      await advanceCheckpointPastOwn(tx, bundle.bundle_seq);
      await forgetSnapshotsBefore(tx, bundle.bundle_seq);
    }, this.needsRebuild, fetched.rows.length <= IMMEDIATE_KEYS_ROWS);
    return { type: 'pushed', facts: await this.facts() };
  }

  /** The committed rows built from the frozen ones (replay-prediction.ts), or null to read them back. */
  private async predictReplay(run: Run, frozen: FrozenBundle, bundle: { bundle_seq: number; source_bundle_id: number; row_count: number; bundle_hash?: string }): Promise<CommittedRow[] | null> {
    // A bundle frozen in another protocol than the model's (frozen before an upgrade) has its
    // values in that protocol's json form, which the model's apply would misread.
    if (!this.ctx.limits.predictReplay || bundle.bundle_hash === undefined || bundle.source_bundle_id !== frozen.sourceBundleId || frozen.protocol !== this.ctx.model.protocol) return null;
    const rows = run.frozenRows?.frozen === frozen ? run.frozenRows.rows : await readOutbox(this.db, this.ctx.model, frozen);
    return predictCommittedRows(rows, { bundle_seq: bundle.bundle_seq, row_count: bundle.row_count, bundle_hash: bundle.bundle_hash });
  }

  /**
   * A sync that pushed asks for its first pull page while its bundle is replayed: one round trip
   * fewer on a link (the other goals do not pull after pushing, machine.ts). The page starts where
   * the replay will leave the checkpoint (past this bundle when it is the next one, else where it
   * is). Committed bundles never change, so the page stays right whatever happens meanwhile; it is
   * used only if the pull starts there (another push or a rebuild may move the checkpoint first),
   * and abandoned otherwise.
   */
  private async askFirstPullPage(run: Run, bundleSeq: number): Promise<void> {
    if (run.goal !== 'sync' || run.pullTarget !== undefined) return;
    const { checkpoint } = await readAttachment(this.db);
    run.pagesAhead?.pages.abandon();
    run.pagesAhead = null;
    // Nothing before the pushed bundle is missing: once it is replayed the device is at the
    // ceiling its commit saw, and a page asked for now would answer empty but for a commit made in
    // the last milliseconds, which the wake source announces. One request per push instead of two.
    run.ownCeiling = checkpoint === bundleSeq - 1 ? bundleSeq : undefined;
    if (run.ownCeiling !== undefined) return;
    const per = run.pullBundles ?? pullPageBundles(this.ctx.limits, this.rowsPerBundle);
    run.pagesAhead = { target: undefined, pages: new PagesAhead((from, signal) => pullPage(this.ctx, from, undefined, per, signal)) };
    run.pagesAhead.pages.keep([checkpoint]);
  }

  // ── Pull ────────────────────────────────────────────────────────────────────────────────────

  /** One page of complete bundles, applied with the checkpoint in one transaction. */
  private async pullPhase(run: Run): Promise<SyncEvent> {
    const checkpoint = (await readAttachment(this.db)).checkpoint;
    if (run.pullTarget === undefined && run.ownCeiling !== undefined && checkpoint === run.ownCeiling) {
      run.pullTarget = run.ownCeiling;
      await this.ceilingReached(run.ownCeiling);
      return { type: 'page_applied', more: false };
    }
    // The page asked for ahead after this checkpoint, towards the same ceiling, if there is one.
    const aheadPages = run.pagesAhead && run.pagesAhead.target === run.pullTarget ? run.pagesAhead.pages : null;
    const ahead = aheadPages?.has(checkpoint) ? aheadPages.take(checkpoint) : null;
    let page: PullPage;
    if (ahead) {
      const settled = await ahead;
      if ('error' in settled) throw settled.error;
      page = settled.page;
    } else {
      page = await pullPage(this.ctx, checkpoint, run.pullTarget, run.pullBundles ?? pullPageBundles(this.ctx.limits, this.rowsPerBundle));
    }
    if (page.kind !== 'page') run.pagesAhead?.pages.abandon();
    if (page.kind === 'history_pruned') {
      // Durable first: a crash during the rebuild resumes it on the next sync (protocol §10.6).
      await this.db.transaction(this.needsRebuild);
      run.pullTarget = undefined;
      return { type: 'history_pruned' };
    }
    if (page.kind === 'source_refused') return this.sourceRefused(run, page.error);
    run.pullTarget = page.stable;
    const last = page.last;
    if (last === undefined) {
      await this.ceilingReached(page.stable);
      return { type: 'page_applied', more: false };
    }
    // The run's later pages are sized once, from its first: pages asked for ahead keep their starts.
    if (page.bundles > 0) this.rowsPerBundle = page.rows.length / page.bundles;
    const per = (run.pullBundles ??= pullPageBundles(this.ctx.limits, this.rowsPerBundle));
    // The next pages' requests run while this one is applied.
    const stable = page.stable;
    if (run.pagesAhead?.target !== stable) {
      run.pagesAhead?.pages.abandon();
      run.pagesAhead = { target: stable, pages: new PagesAhead((at, signal) => pullPage(this.ctx, at, stable, per, signal)) };
    }
    run.pagesAhead.pages.keep(page.hasMore ? pagesAfter(last, page.bundles === page.asked, per, this.ctx.limits.pagesAhead, stable) : []);
    const stats = await applyTransaction(this.db, this.ctx.model, async (tx, keys) => {
      const applied = await inApplyMode(tx, () => applyCommittedRows(tx, this.ctx.model, page.rows, false), keys);
      await advanceCheckpoint(tx, last);
      await forgetSnapshotsBefore(tx, last);
      return applied;
    }, this.needsRebuild, page.rows.length <= IMMEDIATE_KEYS_ROWS);
    run.bundlesApplied += page.bundles;
    run.rowsApplied += stats.applied;
    run.rowsSkippedPending += stats.skipped;
    run.rowsSeen += page.rows.length;
    // Rows still to come are estimated from the bundles still to come.
    const perBundle = run.rowsSeen / run.bundlesApplied;
    this.ctx.progress({ phase: 'pull', rowsDone: run.rowsSeen, rowsTotal: run.rowsSeen + Math.round(perBundle * Math.max(0, page.stable - last)) });
    const more = page.hasMore && last < page.stable;
    if (!more) await this.ceilingReached(page.stable);
    return { type: 'page_applied', more };
  }

  /**
   * Records, once per attachment, that the user's data reached a frozen ceiling (a pull's stable
   * bundle, or a snapshot): live queries report their rows complete from then on.
   */
  private async ceilingReached(bundleSeq: number): Promise<void> {
    const { userId } = await readAttachment(this.db);
    if (userId === null || this.ceilingReachedFor === userId) return;
    this.ceilingReachedFor = await readCeilingReached(this.db);
    if (this.ceilingReachedFor === userId) return;
    await this.db.transaction((tx) => recordCeilingReached(tx, userId, bundleSeq));
    this.ceilingReachedFor = userId;
  }

  // ── Rebuild ─────────────────────────────────────────────────────────────────────────────────

  /** Records the rotation before requesting it, so a retry after a crash repeats the same one. */
  private async rotation(reason: SourceReplacementReason): Promise<Rotation> {
    const source = await readSource(this.db);
    const newSourceId = source.rotationNewSourceId ?? this.ctx.newSourceId();
    await this.db.transaction((tx) => recordRotationIntent(tx, newSourceId, reason));
    return { previousSourceId: source.sourceId, newSourceId, reason };
  }

  /** A snapshot download, resumed when one is in progress, applied in one final transaction. */
  private async rebuildPhase(run: Run): Promise<SyncEvent> {
    const reason = run.machine.rotate ? (run.options.rotate ?? (await readSource(this.db)).rotationReason) : null;
    const frozen = await readFrozen(this.db);
    if (frozen) {
      // Only a rotation gets here with a frozen bundle: the server refused its tuple, so nothing
      // of it committed, and the local rows still carry every change (pushed again from the new source).
      if (!reason) throw new ClientError(ClientErrorCode.outboxPending, `a frozen bundle (source bundle ${frozen.sourceBundleId}) must be pushed or discarded before a rebuild`);
      await this.db.transaction((tx) => unfreeze(tx, frozen));
    }
    if ((await outboxTables(this.db)).length > 0) {
      throw new ClientError(ClientErrorCode.outboxPending, 'an outbox table exists without its push state; refusing to rebuild over it');
    }
    // A rotation always asks for its own session: an older download cannot vouch for the new source.
    let download: SnapshotDownload | null = reason ? null : await readSnapshotDownload(this.db);
    const resumed = download !== null;
    let rotatedTo: string | undefined;
    for (let attempt = 1; ; attempt++) {
      if (!download || Date.parse(download.expiresAt) <= Date.now()) {
        const rotation = attempt === 1 && reason ? await this.rotation(reason) : null;
        const early = rotation ? null : await this.takeEarly();
        const created = early ?? (await createSnapshotSession(this.ctx, rotation));
        if (created.kind === 'source_refused') return this.sourceRefused(run, created.error);
        const started = created.download;
        await this.db.transaction(async (tx) => {
          // The server has retired the previous source: adopt the new one at once, so no request
          // goes out under a retired id even if this download never finishes.
          if (rotation) await adoptSource(tx, rotation.newSourceId);
          // The hydration of an attach writes the tables it can straight in (directTables); every
          // other rebuild shows its rows all at once, at the final apply.
          await resetStageTables(tx, this.ctx.model, run.goal === 'attach' ? await directTables(tx, this.ctx.model) : new Set());
          await recordSnapshotDownload(tx, started);
        });
        if (rotation) this.ctx.sourceRef.current = rotatedTo = rotation.newSourceId;
        download = started;
      }
      if ((await downloadSnapshot(this.ctx, download)) === 'downloaded') break;
      if (attempt >= MAX_SNAPSHOT_SESSIONS) throw new ClientError(ClientErrorCode.protocolViolation, 'snapshot sessions keep vanishing during download');
      download = null;
    }
    const done = download;
    const rowsApplied = await applyTransaction(this.db, this.ctx.model, async (tx) => {
      const applied = await inApplyMode(tx, () => applyStagedSnapshot(tx, this.ctx.model));
      await checkpointAtSnapshot(tx, done.snapshotBundleSeq);
      await clearSnapshotDownload(tx);
      await dropStageTables(tx, this.ctx.model);
      return applied;
    }, this.needsRebuild);
    const deleted = deleteSnapshotSession(this.ctx, done.snapshotId);
    this.trailing = this.trailing.then(() => deleted);
    await this.ceilingReached(done.snapshotBundleSeq);
    run.rebuilds++;
    run.rebuiltRows += rowsApplied;
    run.rebuild = { snapshotBundleSeq: done.snapshotBundleSeq, rowsApplied, resumed, ...(rotatedTo ? { rotatedTo } : {}) };
    run.pullTarget = undefined;
    return { type: 'rebuilt', facts: await this.facts() };
  }

  // ── Operations outside a run ────────────────────────────────────────────────────────────────

  /**
   * A new app version added a local column or table (install.ts recordLocalModel): its synced rows
   * lack those values, so the next sync rebuilds from a snapshot, keeping every pending change.
   */
  async localModelGrew(): Promise<void> {
    if ((await readAttachment(this.db)).userId !== null) await this.db.transaction(this.needsRebuild);
  }

  /** Connects this device to `userId` (protocol §10.8), then pushes and hydrates as the answer says. */
  async attach(userId: string): Promise<AttachResult> {
    const current = await readAttachment(this.db);
    if (current.userId === userId) return { status: 'attached', resolution: 'already_attached', hydratedRows: 0 };
    if (current.userId !== null) throw new ClientError(ClientErrorCode.attachedToOtherUser, 'this database is attached to another user; detach first');
    const counts = await countDirty(this.db);
    const pending = counts.dirty + counts.frozen > 0 || (await readFrozen(this.db)) !== null;
    // A device with nothing to push rebuilds from a snapshot whenever the user has data
    // (remote_authoritative), so it asks for the session while the connect is on its way, and the
    // rows start one round trip sooner. The server's create registers the source as the connect
    // does; for a user without data it is refused or empty, and deleted.
    await this.discardEarly();
    if (!pending && (await this.mayCreateEarly())) {
      this.early = createSnapshotSession(this.ctx, null, false).then(
        (created) => (created.kind === 'session' ? created : null),
        () => null,
      );
    }
    try {
      const answer = await connect(this.ctx, pending);
      if (answer.resolution === 'retry_later') return { status: 'retry_later', retryAfterMs: (answer.retry_after_seconds ?? 1) * 1000, reason: 'scope_initializing' };
      await this.db.transaction((tx) =>
        attachUser(tx, userId, { rebuildRequired: answer.resolution === 'remote_authoritative', initializationId: answer.initialization_id ?? null }));
      this.ceilingReachedFor = null;
      if (answer.resolution === 'initialize_empty') return { status: 'attached', resolution: answer.resolution, hydratedRows: 0 };
      const report = await this.run('attach');
      return { status: 'attached', resolution: answer.resolution, hydratedRows: report.rebuiltRows };
    } finally {
      // Not taken (another answer than remote_authoritative, a failure): deleted (best effort)
      // before the attach answers, so an attach that hydrates nothing leaves no request going.
      await this.discardEarly();
    }
  }

  /** A fresh download is what the attach's rebuild will start: no download to resume, no rotation to request. */
  private async mayCreateEarly(): Promise<boolean> {
    return (await readSnapshotDownload(this.db)) === null && (await readSource(this.db)).rotationReason === null;
  }

  /** The early session, once: a later attempt of the same rebuild creates its own. */
  private async takeEarly(): Promise<CreatedSession | null> {
    const early = this.early;
    this.early = null;
    return early ? await early : null;
  }

  private async discardEarly(): Promise<void> {
    const created = await this.takeEarly();
    if (created) await deleteSnapshotSession(this.ctx, created.download.snapshotId);
  }

  /** Drops a rejected frozen bundle; the local rows still hold its values, so a rebuild restores the server's. */
  async discardRejected(): Promise<{ readonly discardedRows: number }> {
    const frozen = await readFrozen(this.db);
    if (!frozen?.rejected) return { discardedRows: 0 };
    await this.db.transaction(async (tx) => {
      await dropOutbox(tx, frozen);
      await setRebuildRequired(tx, true);
    });
    return { discardedRows: frozen.rowCount };
  }

  /** Moves the rows a rejected frozen bundle is refused for into the quarantine (quarantine.ts). */
  async quarantineRejected(): Promise<{ readonly quarantinedRows: number }> {
    const frozen = await readFrozen(this.db);
    if (!frozen?.rejected) return { quarantinedRows: 0 };
    const saved = await salvage(this.ctx, frozen, frozen.rejected, this.needsRebuild);
    return { quarantinedRows: saved?.quarantinedRows ?? 0 };
  }

  /**
   * Clears the user's synced data and gives the device a new source (the old one belongs to the
   * old user's stream); blocked while anything unsynced exists, quarantined rows included.
   */
  async detach(): Promise<DetachResult> {
    if ((await readAttachment(this.db)).userId === null) return { status: 'detached' };
    const [pending] = await this.db.query<{ n: number }>('SELECT count(*) AS n FROM _sync_dirty');
    const pendingRows = Number(pending?.n ?? 0) + (await countQuarantine(this.db));
    if (pendingRows > 0 || (await outboxTables(this.db)).length > 0) return { status: 'blocked', pendingRows };
    const fresh = this.ctx.newSourceId();
    await this.db.transaction(async (tx) => {
      await clearSyncedData(tx, this.ctx.model);
      await clearSnapshotDownload(tx);
      await dropStageTables(tx, this.ctx.model);
      await detachUser(tx);
      await adoptSource(tx, fresh);
      await forgetCleanBases(tx, this.ctx.model);
    });
    this.ceilingReachedFor = null;
    this.ctx.sourceRef.current = fresh;
    return { status: 'detached' };
  }
}
